"""The orchestrator: statuses, time budget, honest bounds, fallback."""

from __future__ import annotations

import pytest

from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Backend, JobState, Termination
from solver.scoring.checker import check_plan
from tests.factories import cluster, job, node, point, problem, random_tiny, running, solve


def test_small_instance_is_proven_optimal() -> None:
    p = problem(
        cluster(node("n0"), node("n1")),
        job("a", point(8, 800)),
        job("b", point(4, 300)),
        job("c", point(4, 350), point(8, 500)),
    )
    r = solve(p)
    assert r.stats.termination is Termination.OPTIMAL
    # The plan may be the heuristic's own: a bound proves it (the priced passes' Lagrangian
    # dual or the aggregated MIP, whose bounds meet the plan here, or the full model on HiGHS).
    proofs = ("Lagrangian dual bound", "aggregate MIP OPTIMAL", "HiGHS OPTIMAL")
    assert any(proof in r.stats.detail for proof in proofs)
    assert r.stats.best_bound is not None and r.stats.relative_gap is not None
    assert r.stats.relative_gap <= 1e-6
    assert check_plan(p, r.plan.assignments) == []
    assert r.stats.first_plan_seconds <= r.stats.wall_seconds


def test_heuristic_backend_reports_the_aggregated_lps_bound() -> None:
    """The heuristic uses the aggregated LP as its guide: the LP's proven bound is reported,
    and met here (one job, one node) within the LP's safety margin (1e-6)."""
    p = problem(cluster(node("n0")), job("a", point(8, 800)), backend=Backend.HEURISTIC)
    r = solve(p)
    assert r.stats.backend_used is Backend.HEURISTIC
    assert r.stats.best_bound is not None and r.stats.best_bound >= r.stats.objective
    assert r.stats.relative_gap is not None and r.stats.relative_gap <= 2e-6


def test_no_time_left_returns_the_heuristic_plan_as_fallback() -> None:
    p = problem(cluster(node("n0")), job("a", point(8, 800)), job("b", point(4, 300)))
    r = solve(p, seconds=0.01)
    assert r.stats.termination is Termination.FALLBACK
    assert r.stats.backend_used is Backend.HEURISTIC
    assert check_plan(p, r.plan.assignments) == []
    assert [a.state for a in r.plan.assignments] != [JobState.QUEUED, JobState.QUEUED]
    # Not even the aggregated bound is started without the time for it: the answer is not late.
    assert "no time left for the aggregated bound" in r.stats.detail
    # A bound, if any, is the priced passes' Lagrangian dual, and a bound it is.
    told = "Lagrangian dual bound" in r.stats.detail
    assert (r.stats.best_bound is not None) == told
    assert r.stats.best_bound is None or r.stats.best_bound >= r.stats.objective


def test_non_preemptible_jobs_over_the_power_budget_are_infeasible() -> None:
    # Each kept job draws at least its lowest-clock power; together over the budget.
    c = cluster(node("n0"), power=500.0)
    p = problem(
        c,
        job(
            "a",
            point(8, 800, watts=3000),
            current=running("A100", {"n0": tuple(range(8))}),
            preemptible=False,
        ),
    )
    r = solve(p)
    assert r.stats.termination is Termination.INFEASIBLE
    assert r.plan.assignments == ()
    # Which jobs force it is said (it was "cluster draws ... W over its budget ... W" alone).
    assert r.stats.detail.startswith("cluster draws ")
    assert r.stats.detail.endswith(
        "over its budget 500 W, with only the non-preemptible running jobs kept as they run (a)"
    )


def test_job_without_configuration_is_queued_with_reason() -> None:
    p = problem(
        cluster(node("n0", count=4)),
        job("big", point(8, 800), min_gpus=8),
        job("ok", point(4, 100)),
    )
    r = solve(p)
    big = r.plan.assignment("big")
    assert big.state is JobState.QUEUED
    assert big.queue_reason is not None and big.queue_reason.value == "NO_FEASIBLE_CONFIGURATION"
    assert r.plan.assignment("ok").state is JobState.RUNNING


def test_empty_job_list_is_a_valid_answer() -> None:
    r = solve(problem(cluster(node("n0"))))
    assert r.plan.assignments == ()
    assert r.stats.termination is Termination.OPTIMAL
    assert r.stats.objective == pytest.approx(0.0)


def test_decomposed_backend_merges_checked_parts_and_bounds_the_whole() -> None:
    from solver.runtime.pools import InlineExecutor

    c = cluster(*(node(f"n{i}", rack=f"r{i}") for i in range(4)))
    jobs = [job(f"j{k}", point(4, 400.0), point(8, 700.0)) for k in range(6)]
    p = problem(c, *jobs, backend=Backend.DECOMPOSED, budget=5.0)
    r = solve(p, executor=InlineExecutor())
    assert r.stats.backend_used is Backend.DECOMPOSED
    assert check_plan(p, r.plan.assignments) == []
    assert r.stats.best_bound is not None and r.stats.best_bound >= r.stats.objective
    assert "parts on inline" in r.stats.detail
    # 32 GPUs, six jobs: all run (four at 8 GPUs would leave two queued; 4 GPUs each fits all).
    assert all(a.state is JobState.RUNNING for a in r.plan.assignments)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("backend", [Backend.AGGREGATE, Backend.AUTO, Backend.DECOMPOSED])
def test_the_reported_gap_is_at_least_the_true_gap(seed: int, backend: Backend) -> None:
    import dataclasses

    from solver.runtime.pools import InlineExecutor
    from tests.bruteforce import optimum_of

    p, _, optimum = optimum_of(random_tiny, seed)  # the backend changes no plan's objective
    p = dataclasses.replace(p, options=dataclasses.replace(p.options, backend=backend))
    r = solve(p, executor=InlineExecutor())
    if optimum == float("-inf"):
        assert r.stats.termination is Termination.INFEASIBLE
        return
    assert r.stats.best_bound is not None and r.stats.relative_gap is not None
    assert r.stats.best_bound >= optimum - 1e-9
    true_gap = (optimum - r.stats.objective) / max(abs(r.stats.objective), 1e-9)
    assert r.stats.relative_gap >= true_gap - 1e-9


def test_a_slow_aggregated_lp_runs_after_the_priced_passes() -> None:
    """An LP that would leave its guide no time to start being placed (here: a placement
    estimated to need more than any budget) comes after the priced passes (and they run
    once): the answer is at least the heuristic's, whatever the LP then does."""
    p = problem(
        cluster(node("n0"), node("n1")),
        job("a", point(8, 800)),
        job("b", point(4, 300)),
        job("c", point(4, 350), point(8, 500)),
        backend=Backend.HEURISTIC,
    )
    fast = Solver(SolverSettings()).solve(p)
    slow = Solver(SolverSettings(guided_start_share=1e6)).solve(p)
    assert "priced passes before the slow aggregated LP" in slow.stats.detail
    assert "priced passes before" not in fast.stats.detail
    assert slow.stats.detail.count("priced passes in") == 1
    assert check_plan(p, slow.plan.assignments) == []
    assert slow.stats.objective == pytest.approx(fast.stats.objective)
