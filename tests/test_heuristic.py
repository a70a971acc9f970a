"""The heuristic: best-fit placement, tensor groups whole, kept jobs, power, local search."""

from __future__ import annotations

import time

from solver.domain import JobState, ObjectiveWeights
from solver.model.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.search.heuristic import place, solve_heuristic
from tests.factories import cluster, job, node, only_throughput, point, problem, running


def test_place_prefers_the_tightest_single_node() -> None:
    c = cluster(node("n0"), node("n1", unavailable=frozenset({0, 1, 2, 3})))
    p = problem(c, job("a", point(4, 100)))
    cfg = next(x for x in build_config_set(p).by_job["a"] if x.num_gpus == 4)
    assert place(p, {"n0": 8, "n1": 4}, cfg) == {"n1": 4}


def test_place_keeps_tensor_groups_whole_and_racks_few() -> None:
    c = cluster(node("a", rack="r0"), node("b", rack="r0"), node("c", rack="r1"))
    p = problem(c, job("j", point(8, 100, tp=4)))
    cfg = next(x for x in build_config_set(p).by_job["j"] if x.num_gpus == 8)
    # 6 free on a and b, 8 on c: c alone holds it.
    assert place(p, {"a": 6, "b": 6, "c": 8}, cfg) == {"c": 8}
    # 6 free everywhere: groups of 4 only, 4 + 4 inside rack r0.
    assert place(p, {"a": 6, "b": 6, "c": 6}, cfg) == {"a": 4, "b": 4}
    assert place(p, {"a": 3, "b": 3, "c": 3}, cfg) is None


def test_heuristic_keeps_a_running_job_in_place() -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(4, 400), current=running("A100", {"n0": (4, 5, 6, 7)})),
        job("b", point(4, 400)),
        weights=ObjectiveWeights(1, 0, 0.5, 0, 0),
    )
    plan = solve_heuristic(p, build_config_set(p), time.monotonic() + 1)
    assert check_plan(p, plan.assignments) == []
    assert plan.assignment("a").placement[0].gpu_indices == (4, 5, 6, 7)
    assert plan.assignment("b").state is JobState.RUNNING


def test_heuristic_fits_more_jobs_than_greedy_by_size() -> None:
    # Each job's best is 8 GPUs, but two 4-GPU jobs are worth more than one 8-GPU job.
    p = problem(
        cluster(node("n0")),
        job("a", point(4, 380), point(8, 400)),
        job("b", point(4, 380), point(8, 400)),
        weights=only_throughput(),
    )
    plan = solve_heuristic(p, build_config_set(p), time.monotonic() + 1)
    assert [a.state for a in plan.assignments] == [JobState.RUNNING, JobState.RUNNING]
    assert plan.objective.throughput == 2 * 380 / 400


def test_heuristic_respects_the_power_budget() -> None:
    p = problem(
        cluster(node("n0"), power=1900.0), job("a", point(8, 800)), weights=only_throughput()
    )
    plan = solve_heuristic(p, build_config_set(p), time.monotonic() + 1)
    assert check_plan(p, plan.assignments) == []
    a = plan.assignment("a")
    assert a.state is JobState.RUNNING and a.config is not None and a.config.sm_clock_mhz < 1410
