"""Finish-time fairness' leases (solver.core.leases): a running job that finishes within the
horizon keeps its GPUs, unless keeping the jobs that must stay would break a limit."""

from __future__ import annotations

import dataclasses

from solver.core.leases import finish_leases
from solver.domain import AttainedService, Fairness, FairnessMode, JobState, Problem
from tests.factories import cluster, job, node, point, problem, running, solve

HORIZON = 300.0
RATE = 100.0  # samples/s on one GPU


def _one_gpu_two_jobs(x_left_s: float, mode: FairnessMode = FairnessMode.FINISH_TIME) -> Problem:
    """x runs on the one GPU with `x_left_s` seconds of work left; y, older and never run,
    waits: finish-time fairness alone would run y."""
    x = job(
        "x",
        point(1, RATE),
        remaining_samples=RATE * x_left_s,
        current=running("A100", {"n0": (0,)}),
        attained=AttainedService(1800.0, 1800.0),
        age_seconds=1800.0,
    )
    y = job("y", point(1, RATE), remaining_samples=RATE * 600.0, age_seconds=3600.0)
    p = problem(cluster(node("n0", count=1)), x, y)
    return dataclasses.replace(p, fairness=Fairness(mode, horizon_seconds=HORIZON))


def test_a_running_job_that_finishes_within_the_horizon_keeps_its_gpus() -> None:
    leased = finish_leases(_one_gpu_two_jobs(x_left_s=200.0))
    assert [(j.name, j.preemptible) for j in leased.jobs] == [("x", False), ("y", True)]


def test_no_lease_for_a_job_with_more_than_the_horizon_left_or_outside_finish_time() -> None:
    longer = _one_gpu_two_jobs(x_left_s=400.0)
    assert finish_leases(longer) is longer
    for mode in (FairnessMode.WEIGHTED_SUM, FairnessMode.MAX_MIN, FairnessMode.DRF):
        other = _one_gpu_two_jobs(x_left_s=200.0, mode=mode)
        assert finish_leases(other) is other


def test_no_lease_when_the_kept_jobs_alone_would_break_the_power_budget() -> None:
    p = _one_gpu_two_jobs(x_left_s=200.0)
    # x draws 300 W at its only clock; the node's idle floor alone is 50 W.
    short = dataclasses.replace(p, cluster=dataclasses.replace(p.cluster, power_budget_watts=200.0))
    assert finish_leases(short) is short


def test_the_solver_lets_the_nearly_done_job_finish_instead_of_swapping() -> None:
    def runs(p: Problem) -> list[str]:
        r = solve(p, seconds=5.0)
        return [a.job for a in r.plan.assignments if a.state is JobState.RUNNING]

    # With much work left, finish-time fairness swaps x out for the older y; nearly done, x
    # keeps its GPU for the round, and the plan is checked as every plan is.
    assert runs(_one_gpu_two_jobs(x_left_s=4000.0)) == ["y"]
    assert runs(_one_gpu_two_jobs(x_left_s=200.0)) == ["x"]
