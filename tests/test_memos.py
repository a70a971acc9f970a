"""The cluster and the problem travel to workers without what they remembered (solver.memos)."""

from __future__ import annotations

import pickle

from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.memos import positions_in
from solver.search.placement import Placer, wanted_nodes
from tests.factories import make_request


def test_a_pickled_problem_leaves_its_memos_behind_and_makes_them_again() -> None:
    r = make_request()
    r.jobs[0].excluded_nodes.append("a100-1")
    p = problem_from_proto(r, Limits())
    Placer(p.cluster).place("A100-80GB", 4, 1, barred=p.jobs[0].barred_nodes)
    assert wanted_nodes(p) == {"a100-0": 4.0, "h100-0": 4.0}  # llm: 8 GPUs over 2 nodes
    assert "_barred_positions" in p.cluster.__dict__ and "_wanted_nodes" in p.__dict__
    q = pickle.loads(pickle.dumps(p))
    assert q == p
    assert not [k for k in (*q.__dict__, *q.cluster.__dict__) if k.startswith("_")]
    assert q.cluster.node("a100-1").name == "a100-1" and wanted_nodes(q) == wanted_nodes(p)


def test_positions_of_few_and_of_most_nodes_and_of_names_elsewhere() -> None:
    names = [f"n{k}" for k in range(10)]
    index = {n: k for k, n in enumerate(names)}
    known = frozenset(names)
    assert positions_in(frozenset({"n7", "n2"}), index, known) == (2, 7)
    most = frozenset(names) - {"n3", "n0"}
    assert positions_in(most, index, known) == (1, 2, 4, 5, 6, 7, 8, 9)  # by the complement
    # A part of a decomposed cluster sees names of nodes it does not have.
    foreign = frozenset({"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "n1", "n9"})
    assert positions_in(foreign, index, known) == (1, 9)
    assert positions_in(foreign | most, index, known) == (1, 2, 4, 5, 6, 7, 8, 9)
    assert positions_in(frozenset(), index, known) == ()
