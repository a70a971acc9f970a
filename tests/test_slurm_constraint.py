"""Slurm node features and a job's ``--constraint`` through the adapter: features become node
labels, a constraint of one feature, of ``&`` or of ``|`` a node selector; the rest of Slurm's
syntax gives the job back to Slurm; a constraint no node meets is reported, not sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import pytest

from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.slurm.constraint import ConstraintError, node_features, selector_terms
from solver.slurm.decide import Action, reported
from solver.slurm.record import decode
from solver.slurm.site import Site
from solver.slurm.snapshot import Snapshot, build_snapshot
from solver.slurm.state import SlurmOutputError, parse_sinfo, parse_squeue
from solver.wire import LabelOperator
from tests.slurm_helpers import captured
from tests.test_slurm_snapshot import NOW, _job

Edit = Callable[[list[dict[str, object]]], None]


def _built(state: str, nodes: Edit, jobs: Edit) -> Snapshot:
    sinfo, squeue = json.loads(captured(state, "sinfo")), json.loads(captured(state, "squeue"))
    nodes(sinfo["nodes"])
    jobs(squeue["jobs"])
    return build_snapshot(
        parse_sinfo(json.dumps(sinfo)),
        parse_squeue(json.dumps(squeue)),
        Site(),
        now=NOW,
        budget_seconds=2,
    )


def _featured(nodes: list[dict[str, object]]) -> None:
    """node2 fast and ib, node3 fast (Slurm 22.05's comma-separated strings), node4 ib (a
    list, as Slurm 23.02 and later write it)."""
    for n in nodes:
        n["active_features"] = {"node2": "fast,ib", "node3": "fast", "node4": ["ib"]}.get(
            str(n["name"]), ""
        )


def _constrained(job_id: int, constraint: str) -> Edit:
    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, job_id)["features"] = constraint

    return edit


def _terms(constraint: str) -> list[list[tuple[str, int]]]:
    return [[(r.key, r.operator) for r in t.requirements] for t in selector_terms(constraint)]


EXISTS = LabelOperator.LABEL_OPERATOR_EXISTS


def test_constraints_a_selector_can_say() -> None:
    assert _terms("") == [] and _terms("  ") == []
    assert _terms("fast") == [[("fast", EXISTS)]]
    assert _terms("fast&ib") == [[("fast", EXISTS), ("ib", EXISTS)]]
    assert _terms("fast|ib|a100_x") == [[("fast", EXISTS)], [("ib", EXISTS)], [("a100_x", EXISTS)]]


@pytest.mark.parametrize(
    ("constraint", "why"),
    [
        ("fast&ib|gpu", "mixes & and |"),
        ("[rack1|rack2]", "'[rack1' is not a feature name"),
        ("fast*2", "'fast*2' is not a feature name"),
        ("(a&b)", "'(a' is not a feature name"),
        ("[a*2&b*1]", "'[a*2' is not a feature name"),
        ("a&", "'' is not a feature name"),
        ("|a", "'' is not a feature name"),
    ],
)
def test_the_rest_of_slurms_syntax_is_refused(constraint: str, why: str) -> None:
    with pytest.raises(ConstraintError) as e:
        selector_terms(constraint)
    assert str(e.value).startswith(f"--constraint {constraint!r}") and why in str(e.value)


def test_node_features_from_either_form() -> None:
    assert node_features("fast, ib,,") == {"fast", "ib"}
    assert node_features(["fast", "ib"]) == {"fast", "ib"}
    assert node_features("") == frozenset()


def test_features_become_labels_and_a_constraint_a_selector_that_binds() -> None:
    snap = _built("mixed", _featured, _constrained(3, "fast&ib"))
    labels = {n.name: dict(n.labels) for n in snap.request.cluster.nodes}
    assert labels == {
        "node1": {},
        "node2": {"fast": "", "ib": ""},
        "node3": {"fast": ""},
        "node4": {"ib": ""},
    }
    assert validate_request(snap.request, Limits()) == []
    problem = problem_from_proto(snap.request, Limits())
    barred = {j.name: set(j.barred_nodes) for j in problem.jobs}
    assert barred == {"3": {"node1", "node3", "node4"}, "4": set()}


def test_an_or_constraint_allows_any_featured_node() -> None:
    snap = _built("mixed", _featured, _constrained(3, "fast|ib"))
    problem = problem_from_proto(snap.request, Limits())
    assert {j.name: set(j.barred_nodes) for j in problem.jobs}["3"] == {"node1"}


def test_a_constraint_beyond_a_selector_goes_back_to_slurm_as_submitted() -> None:
    snap = _built("mixed", _featured, _constrained(3, "[fast|ib]"))
    assert [j.name for j in snap.request.jobs] == ["4"]
    [(job, reason, why)] = snap.returned
    assert job.job_id == 3 and reason == "constraint" and "given back to Slurm" in why
    [decision] = [d for d in reported(snap) if d.job_id == 3]
    assert (decision.action, decision.reason) == (Action.FALLBACK, "constraint")


def test_a_constraint_no_node_of_its_types_meets_is_reported_not_sent() -> None:
    snap = _built("mixed", _featured, _constrained(3, "fast&nvlink"))
    [(job, why)] = snap.unplaceable
    assert job.job_id == 3 and "--constraint fast&nvlink" in why
    assert [j.name for j in snap.request.jobs] == ["4"]

    def excluding_node2(jobs: list[dict[str, object]]) -> None:
        _constrained(3, "fast&ib")(jobs)
        _job(jobs, 3)["excluded_nodes"] = "node2"

    snap = _built("mixed", _featured, excluding_node2)
    [(job, why)] = snap.unplaceable
    assert job.job_id == 3 and "--constraint fast&ib" in why


def test_a_running_job_whose_constraint_became_unreadable_stays_where_it_runs() -> None:
    snap = _built("placed", _featured, _constrained(13, "[fast|ib]"))
    thirteen = next(j for j in snap.request.jobs if j.name == "13")
    held = {s.node for s in thirteen.current_allocation.placement}
    assert held == {"node2"}
    assert set(thirteen.excluded_nodes) == {n.name for n in snap.request.cluster.nodes} - held
    assert not thirteen.node_selector
    assert validate_request(snap.request, Limits()) == []


def test_malformed_features_name_the_field() -> None:
    def bad(nodes: list[dict[str, object]]) -> None:
        nodes[0]["active_features"] = ["fast", 3]

    with pytest.raises(SlurmOutputError, match=r"nodes\[0\]\.active_features"):
        _built("mixed", bad, lambda jobs: None)

    def worse(nodes: list[dict[str, object]]) -> None:
        nodes[0]["active_features"] = 7

    with pytest.raises(SlurmOutputError, match=r"nodes\[0\]\.active_features"):
        _built("mixed", worse, lambda jobs: None)


def _pinned(job_id: int, hosts: str) -> Edit:
    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, job_id)["required_nodes"] = hosts

    return edit


def test_a_jobs_own_nodelist_of_one_node_confines_it_there() -> None:
    """Before, DSFRO placed it where it liked and the adapter's node list replaced the job's."""
    snap = _built("mixed", _featured, _pinned(3, "node3"))
    three = next(j for j in snap.request.jobs if j.name == "3")
    assert set(three.excluded_nodes) == {"node1", "node2", "node4"}
    assert validate_request(snap.request, Limits()) == []


def test_a_nodelist_of_several_nodes_goes_back_to_slurm_and_one_elsewhere_is_reported() -> None:
    snap = _built("mixed", _featured, _pinned(3, "node[2-3]"))
    [(job, reason, why)] = snap.returned
    assert job.job_id == 3 and reason == "nodelist" and "--nodelist names several nodes" in why
    [decision] = [d for d in reported(snap) if d.job_id == 3]
    assert (decision.action, decision.reason) == (Action.FALLBACK, "nodelist")
    snap = _built("mixed", _featured, _pinned(3, "gpu9"))
    [(job, why)] = snap.unplaceable
    assert job.job_id == 3 and "--nodelist gpu9 is no node of its GPU types" in why
    assert [j.name for j in snap.request.jobs] == ["4"]


def test_a_placed_job_keeps_its_own_nodelist_not_the_adapters() -> None:
    """Job 13 runs where the adapter put it (its node list now the adapter's, node2); the
    record keeps the one it was submitted with."""
    record = decode(json.loads(captured("placed", "squeue"))["jobs"][12]["admin_comment"])
    assert record.original is not None
    own = replace(record, original=replace(record.original, required_nodes=("node2",)))

    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, 13)["admin_comment"] = own.encode()

    snap = _built("placed", lambda nodes: None, edit)
    thirteen = next(j for j in snap.request.jobs if j.name == "13")
    assert set(thirteen.excluded_nodes) == {n.name for n in snap.request.cluster.nodes} - {"node2"}
    untouched = _built("placed", lambda nodes: None, lambda jobs: None)
    assert not next(j for j in untouched.request.jobs if j.name == "13").excluded_nodes


def test_a_job_in_a_reservation_goes_back_to_slurm() -> None:
    """Nodes of an active reservation are left out of the snapshot (sinfo's RESERVED): a job
    that may run only there would be planned where Slurm never starts it."""

    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, 3)["resv_name"] = "maint1"

    snap = _built("mixed", _featured, edit)
    [(job, reason, why)] = snap.returned
    assert (job.job_id, reason) == (3, "reservation") and "--reservation maint1" in why
    assert [j.name for j in snap.request.jobs] == ["4"]


def test_an_exclusive_job_waits_for_an_empty_node_and_keeps_its_nodes_to_itself() -> None:
    """In ``mixed`` job 1 runs on node1 (GPUs 0-2) and job 2 on node1 and node2 (3-6, 0-3): an
    exclusive waiting job may use only the empty nodes; a running exclusive job leaves no GPU
    of its node to another job (node1's GPU 7)."""

    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, 3)["shared"] = "none"  # as squeue shows --exclusive

    snap = _built("mixed", lambda nodes: None, edit)
    excluded = {j.name: set(j.excluded_nodes) for j in snap.request.jobs}
    assert excluded == {"3": {"node1", "node2"}, "4": set()}
    before = {n.name: len(n.unavailable_gpu_indices) for n in snap.request.cluster.nodes}

    def running_exclusive(jobs: list[dict[str, object]]) -> None:
        _job(jobs, 1)["shared"] = "none"

    snap = _built("mixed", lambda nodes: None, running_exclusive)
    after = {n.name: len(n.unavailable_gpu_indices) for n in snap.request.cluster.nodes}
    assert before["node1"] == 7 and after["node1"] == 8
    assert {k: v for k, v in after.items() if k != "node1"} == {
        k: v for k, v in before.items() if k != "node1"
    }
