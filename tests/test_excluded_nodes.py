"""Per-job node exclusions (``Job.excluded_nodes``): the wire field's checks, its conversion,
the rule that binds (a job keeps the excluded nodes it holds), the independent checker's
family and best-fit placement off the barred nodes. Every solve path:
tests/test_excluded_nodes_paths.py."""

from __future__ import annotations

import dataclasses

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import FieldViolation, validate_request
from solver.domain import JobAssignment, JobState
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.placement import Placer, wanted_nodes
from solver.search.state import SearchState
from tests.factories import cluster, job, make_request, node, point, problem, running
from tests.service_helpers import WAIT, serving


def test_each_excluded_node_must_be_a_node_of_the_snapshot() -> None:
    r = make_request()
    r.jobs[1].excluded_nodes.extend(["a100-1", "a100-9", "h100-0", ""])
    assert validate_request(r, Limits()) == [
        FieldViolation("jobs[1].excluded_nodes[1]", 'unknown node "a100-9"'),
        FieldViolation("jobs[1].excluded_nodes[3]", 'unknown node ""'),
    ]


def test_more_excluded_nodes_than_the_server_takes_nodes_is_refused() -> None:
    r = make_request()
    r.jobs[0].excluded_nodes.extend(["a100-0", "a100-1", "h100-0"])
    assert validate_request(r, Limits()) == []
    assert validate_request(r, Limits(max_nodes=2)) == [
        FieldViolation("cluster.nodes", "3 nodes exceed the limit of 2 (max_nodes)"),
    ]
    r.jobs[0].excluded_nodes.extend(["a100-0"] * 20)
    assert FieldViolation(
        "jobs[0].excluded_nodes", "23 entries exceed the limit of 20 (max_nodes)"
    ) in validate_request(r, Limits(max_nodes=20))


def test_jobs_of_one_rule_share_one_set_and_a_job_keeps_the_nodes_it_holds() -> None:
    r = make_request()
    for j in r.jobs:
        j.excluded_nodes.extend(["a100-0", "h100-0"])
    r.jobs[1].excluded_nodes.reverse()  # the same set, in another order
    p = problem_from_proto(r, Limits())
    llm, bert, resnet = p.jobs
    assert llm.excluded_nodes == frozenset({"a100-0", "h100-0"})
    assert bert.excluded_nodes is llm.excluded_nodes
    assert llm.barred_nodes is llm.excluded_nodes  # waiting: every excluded node binds
    # resnet runs on a100-0 now: it may stay and grow there, not go to h100-0.
    assert resnet.barred_nodes == frozenset({"h100-0"})
    assert resnet.may_use("a100-0") and not resnet.may_use("h100-0")
    assert resnet.may_use("a100-1") and not llm.may_use("a100-0")


def test_the_checker_refuses_a_new_placement_on_an_excluded_node_only() -> None:
    c = cluster(node("n0"), node("n1", rack="r1"))
    j = job("j", point(4, 100.0), point(8, 190.0), min_gpus=4, excluded_nodes=frozenset({"n0"}))
    p = problem(c, j)
    configs = build_config_set(p)
    [four] = [x for x in configs.by_job["j"] if x.num_gpus == 4 and x.sm_clock_mhz == 1410]
    on_n0 = materialize(p, configs, {"j": (four, {"n0": 4})})
    [violation] = check_plan(p, on_n0.assignments)
    assert (violation.constraint, violation.job) == ("excluded_node", "j")
    assert "node n0 is barred" in violation.message
    assert check_plan(p, materialize(p, configs, {"j": (four, {"n1": 4})}).assignments) == []
    # Running on n0 now: staying there, or growing there, is no new placement.
    kept = problem(c, dataclasses.replace(j, current=running("A100", {"n0": (0, 1, 2, 3)})))
    configs = build_config_set(kept)
    grown = [x for x in configs.by_job["j"] if x.sm_clock_mhz == 1410]
    assert {x.num_gpus for x in grown} == {4, 8}
    for x in grown:
        plan = materialize(kept, configs, {"j": (x, {"n0": x.num_gpus})})
        assert check_plan(kept, plan.assignments) == []
    queued = (JobAssignment("j", JobState.QUEUED),)
    assert check_plan(p, queued) == []


def test_best_fit_skips_the_barred_nodes_even_the_tightest() -> None:
    c = cluster(node("n0", count=4), node("n1", count=8), node("n2", count=8, rack="r1"))
    placer = Placer(c)
    assert placer.place("A100", 4, 1) == {"n0": 4}
    assert placer.place("A100", 4, 1, barred=frozenset({"n0"})) == {"n1": 4}
    assert placer.place("A100", 4, 2, barred=frozenset({"n0", "n1"})) == {"n2": 4}
    assert placer.place("A100", 12, 1, barred=frozenset({"n1"})) == {"n2": 8, "n0": 4}
    assert placer.place("A100", 8, 1, barred=frozenset({"n1", "n2"})) is None
    assert placer.place_split("A100", 1, {frozenset({"r0"}): 8}, frozenset({"n1"})) is None
    assert placer.place_split("A100", 1, {frozenset({"r0"}): 4}, frozenset({"n0"})) == {"n1": 4}
    assert placer.rack_room("A100", 1, frozenset({"n1"})).tolist() == [4.0, 8.0]
    assert placer.place("A100", 4, 1) == {"n0": 4}  # nothing taken by the queries


def test_best_fit_leaves_the_nodes_barred_jobs_need_to_the_others_last() -> None:
    """Of equally tight nodes, the one fewest waiting barred jobs want; the tightest first
    still. Without barred jobs nothing is wanted: best fit is as before (cluster order)."""
    c = cluster(node("n0"), node("n1"), node("n2", count=4, rack="r1"))
    waiting = job("w", point(4, 100.0), max_gpus=4, excluded_nodes=frozenset({"n1"}))
    free = job("f", point(4, 100.0), max_gpus=4)
    wanted = wanted_nodes(problem(c, waiting, free))
    assert wanted == {"n0": 2.0, "n2": 2.0}  # its 4 GPUs over the two nodes it may use
    placer = Placer(c, wanted=wanted)
    assert placer.place("A100", 8, 1) == {"n1": 8}  # n0 and n1 alike: n1, wanted less
    assert placer.place("A100", 4, 1) == {"n2": 4}  # the tightest, wanted or not
    assert placer.place("A100", 12, 1) == {"n1": 8, "n0": 4}  # n1 first in its rack
    assert wanted_nodes(problem(c, free)) == {}
    assert Placer(c, wanted={}).place("A100", 8, 1) == {"n0": 8}


def test_the_search_state_does_not_share_a_placement_across_exclusions() -> None:
    """Two jobs of one shape, one barred from the tightest node: the placement remembered
    for the first is not the second's."""
    c = cluster(node("n0", count=4), node("n1", count=8))
    free = job("free", point(4, 100.0), min_gpus=4, max_gpus=4)
    barred = job(
        "barred", point(4, 100.0), min_gpus=4, max_gpus=4, excluded_nodes=frozenset({"n0"})
    )
    p = problem(c, free, barred)
    state = SearchState(p)
    configs = build_config_set(p)
    first = state.fit_anew(configs.by_job["free"][0])
    second = state.fit_anew(configs.by_job["barred"][0])
    assert (first, second) == ({"n0": 4}, {"n1": 4})
    assert state.barred("barred") == frozenset({"n0"}) and state.barred("free") == frozenset()


def test_the_service_places_no_job_on_a_node_it_excludes() -> None:
    """Over gRPC on loopback: bert (A100 only) excluded from a100-1 and resnet from h100-0,
    where it would run fastest; EvaluatePlan refuses the plan moved onto an excluded node."""
    r = make_request()
    r.options.time_budget.FromSeconds(2)
    r.jobs[1].excluded_nodes.append("a100-1")
    r.jobs[2].excluded_nodes.extend(["h100-0", "a100-1"])
    with serving() as (_, stub):
        response = stub.Solve(r, timeout=WAIT)
        on = {a.job: {s.node for s in a.placement} for a in response.plan.assignments}
        assert on["bert"] and "a100-1" not in on["bert"]
        assert on["resnet"] and on["resnet"] <= {"a100-0"}
        moved = pb.Plan()
        moved.CopyFrom(response.plan)
        [resnet] = [a for a in moved.assignments if a.job == "resnet"]
        del resnet.placement[:]
        resnet.placement.add(node="a100-1", gpu_indices=list(range(resnet_gpus(response))))
        evaluated = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=r, plan=moved), timeout=WAIT)
        bad = pb.SolveRequest()
        bad.CopyFrom(r)
        bad.jobs[0].excluded_nodes.append("a100-7")
        with pytest.raises(grpc.RpcError) as e:
            stub.Solve(bad, timeout=WAIT)
    assert not evaluated.valid
    assert any(v.constraint == "excluded_node" for v in evaluated.violations)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "jobs[0].excluded_nodes[0]" in (e.value.details() or "")


def resnet_gpus(response: pb.SolveResponse) -> int:
    [a] = [a for a in response.plan.assignments if a.job == "resnet"]
    return sum(len(s.gpu_indices) for s in a.placement)
