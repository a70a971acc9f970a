"""Finish-time fairness' leases (solver.core.leases): a running job that finishes within the
horizon keeps its GPUs, unless keeping the jobs that must stay would break a limit."""

from __future__ import annotations

import dataclasses

from solver.app import pipeline
from solver.app.limits import Limits
from solver.core.leases import finish_leases
from solver.domain import AttainedService, Fairness, FairnessMode, JobState, Problem, Termination
from solver.offline.generate import generate, spec_from_args
from solver.scoring.checker import check_plan
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


def test_a_lease_is_granted_only_where_the_solver_can_keep_it() -> None:
    """Pollux's profiles on T4 are measured at one clock, and the solver plans them there: a
    lease checked at the GPU's lowest clock instead was granted, the kept jobs drew 1,507 W in
    a rack of 1,120 W, and a feasible request answered INFEASIBLE (a random snapshot of
    scripts/bench_unseen.py through the service)."""
    args = (
        "--nodes 64 --jobs 128 --seed 403 --mix hetero-power --running-share 0.3 "
        "--unavailable-share 0.2 --power-budget-fraction 0.6 --rack-power-budget-fraction 0.5"
    )
    p = pipeline.to_problem(generate(spec_from_args(args.split())), Limits())
    p = dataclasses.replace(
        p, fairness=dataclasses.replace(p.fairness, mode=FairnessMode.FINISH_TIME)
    )
    # The jobs within the horizon, kept at the least draw the solver plans, break the rack's
    # budget: no lease (all are granted or none).
    assert finish_leases(p) is p
    result = solve(
        dataclasses.replace(p, options=dataclasses.replace(p.options, time_budget_seconds=1.0))
    )
    assert result.stats.termination is not Termination.INFEASIBLE
    assert check_plan(p, result.plan.assignments) == []
