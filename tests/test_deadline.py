"""Short budgets: the quick plan (solver.search.quick) and when the solver takes it.

No assertion here bounds a duration: the machine is shared. Deadlines are either far away or
already past, and the tests assert what the solver does about them.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.core.deadline import Deadline, extract_seconds, finish_seconds
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import (
    Backend,
    JobAssignment,
    JobState,
    Problem,
    QueueReason,
    SolveResult,
    Termination,
)
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.objective import is_migrated, running_gain, score_plan
from solver.search import quick
from solver.search.heuristic import Heuristic
from solver.search.quick import NOT_REACHED, QuickPlan, quick_plan
from tests.factories import cluster, job, node, point, problem, random_tiny, running, solve

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = sorted(p.stem for p in (ROOT / "instances").glob("*.json"))
PAST = float("-inf")
NEVER = float("inf")
DEFAULTS = SolverSettings()


def quick_with_defaults(
    p: Problem, end: float, stop: Callable[[], bool] | None = None
) -> QuickPlan:
    """The quick plan at the solver's default chunk and check sizes."""
    return quick_plan(
        p, end, stop, chunk_jobs=DEFAULTS.quick_chunk_jobs, check_every=DEFAULTS.quick_check_every
    )


def bundled(name: str) -> Problem:
    return problem_from_proto(load_request_json(ROOT / "instances" / f"{name}.json"), Limits())


def assert_honest(p: Problem, plan_objective: float, assignments: Sequence[JobAssignment]) -> None:
    """The plan's reported objective is the score of its assignments against the full
    enumeration's best throughputs (what EvaluatePlan would say)."""
    best = build_config_set(p).best_samples_per_second
    score = score_plan(p, assignments, best)
    assert score.total == pytest.approx(plan_objective, abs=1e-9)


def kept_in_place(p: Problem, assignments: Sequence[JobAssignment]) -> set[str]:
    by_name = {a.job: a for a in assignments}
    return {
        j.name
        for j in p.jobs
        if j.current is not None
        and by_name[j.name].state is JobState.RUNNING
        and not is_migrated(j, by_name[j.name])
    }


@pytest.mark.parametrize("seed", range(40))
def test_quick_plan_is_valid_and_honest_on_random_tiny(seed: int) -> None:
    p = random_tiny(seed)
    q = quick_with_defaults(p, NEVER)
    if q.blocked:  # a non-preemptible job without its shape: the orchestrator says INFEASIBLE
        return
    assert check_plan(p, q.plan.assignments) == []
    assert_honest(p, q.plan.objective.total, q.plan.assignments)
    assert q.not_reached == 0
    # Every running job whose allocation stays valid runs: kept where it runs, or moved
    # where that gains more than the move costs (the grow step; tests/test_quick_grow.py).
    valid = {j.name for j in p.jobs if j.current is not None} - set(q.preempted)
    running = {a.job for a in q.plan.assignments if a.state is JobState.RUNNING}
    assert valid <= running
    assert len(valid - kept_in_place(p, q.plan.assignments)) <= q.grown


@pytest.mark.parametrize("name", INSTANCES)
def test_quick_plan_is_valid_on_the_bundled_instances(name: str) -> None:
    p = bundled(name)
    q = quick_with_defaults(p, NEVER)
    assert not q.blocked
    assert check_plan(p, q.plan.assignments) == []
    assert_honest(p, q.plan.objective.total, q.plan.assignments)
    valid = {j.name for j in p.jobs if j.current is not None} - set(q.preempted)
    running = {a.job for a in q.plan.assignments if a.state is JobState.RUNNING}
    assert valid <= running
    assert len(valid - kept_in_place(p, q.plan.assignments)) <= q.grown


@pytest.mark.parametrize("name", INSTANCES)
def test_a_deadline_already_past_still_gives_a_valid_plan_that_keeps_the_running_jobs(
    name: str,
) -> None:
    p = bundled(name)
    q = quick_with_defaults(p, PAST)
    assert check_plan(p, q.plan.assignments) == []
    assert q.started == 0
    waiting = [j for j in p.jobs if j.current is None]
    assert q.not_reached == len(waiting)
    for a in q.plan.assignments:
        if a.job in {j.name for j in waiting}:
            assert a.state is JobState.QUEUED
            assert a.queue_detail == NOT_REACHED
    running_now = {j.name for j in p.jobs if j.current is not None}
    assert kept_in_place(p, q.plan.assignments) == running_now - set(q.preempted)


def test_a_stop_request_stops_the_quick_plan() -> None:
    p = bundled("medium")
    q = quick_with_defaults(p, NEVER, stop=lambda: True)
    assert q.started == 0 and q.not_reached > 0
    assert check_plan(p, q.plan.assignments) == []


def test_queued_jobs_are_started_when_there_is_time() -> None:
    p = problem(cluster(node("n0")), job("a", point(2, 200)), job("b", point(4, 300)))
    q = quick_with_defaults(p, NEVER)
    assert q.started == 2
    assert [a.state for a in q.plan.assignments] == [JobState.RUNNING, JobState.RUNNING]
    assert check_plan(p, q.plan.assignments) == []


def test_row_gain_is_the_objective_running_gain() -> None:
    for seed in range(20):
        p = random_tiny(seed)
        q = quick._Quick(p, NEVER, None, DEFAULTS.quick_chunk_jobs, DEFAULTS.quick_check_every)
        q.rows.load(p.jobs)
        for j in p.jobs:
            for row in q.rows.of(j):
                c = q.config(j, row)
                expected = running_gain(j, c, q.rows.best(j), p.weights, q.max_watts)
                assert q.row_gain(j, row) == pytest.approx(expected, abs=1e-12)


def test_a_running_job_on_a_node_gone_is_stopped_and_the_plan_is_valid() -> None:
    gone = job("a", point(2, 200), current=running("A100", {"n9": (0, 1)}))
    here = job("b", point(2, 200), current=running("A100", {"n0": (0, 1)}))
    p = problem(cluster(node("n0")), gone, here)
    q = quick_with_defaults(p, NEVER)
    assert q.preempted == ("a",)
    states = {a.job: a for a in q.plan.assignments}
    assert states["a"].state is JobState.QUEUED and states["a"].migrated
    assert states["a"].queue_detail == quick.NODE_GONE
    assert kept_in_place(p, q.plan.assignments) == {"b"}
    assert check_plan(p, q.plan.assignments) == []


def test_a_running_job_on_an_unavailable_gpu_is_placed_anew() -> None:
    moved = job("a", point(2, 200), current=running("A100", {"n0": (0, 1)}))
    p = problem(cluster(node("n0", unavailable=frozenset({1}))), moved)
    q = quick_with_defaults(p, NEVER)
    assert q.preempted == ("a",)
    (a,) = q.plan.assignments
    assert a.state is JobState.RUNNING and a.migrated
    assert check_plan(p, q.plan.assignments) == []


def test_a_non_preemptible_job_that_cannot_stay_makes_the_request_infeasible() -> None:
    stuck = job("a", point(2, 200), current=running("A100", {"n9": (0, 1)}), preemptible=False)
    p = problem(cluster(node("n0")), stuck)
    assert quick_with_defaults(p, NEVER).blocked == ("a",)
    r = solve(p, seconds=-1.0)
    assert r.stats.termination is Termination.INFEASIBLE
    assert "a" in r.stats.detail


def test_a_preemptible_job_over_the_power_left_runs_at_a_lower_clock() -> None:
    clocks = [point(4, 400, watts=2000, clock=1410), point(4, 350, watts=1200, clock=1125)]
    hot = job("a", *clocks, current=running("A100", {"n0": (0, 1, 2, 3)}, clock=1410))
    p = problem(cluster(node("n0"), power=1600.0), hot)
    q = quick_with_defaults(p, NEVER)
    (a,) = q.plan.assignments
    assert a.state is JobState.RUNNING and not a.migrated
    assert a.config is not None and a.config.sm_clock_mhz < 1410
    assert check_plan(p, q.plan.assignments) == []


def test_the_solver_takes_the_quick_path_when_the_deadline_is_nearer_than_the_estimate() -> None:
    p = bundled("small")
    never_enough = SolverSettings(first_plan_seconds=1e6)  # no deadline is far enough
    r = solve(p, seconds=3600, settings=never_enough)
    assert r.stats.termination is Termination.FALLBACK
    assert r.stats.backend_used is Backend.HEURISTIC
    assert r.stats.detail.startswith("quick plan")
    assert r.stats.best_bound is None and r.stats.relative_gap is None
    assert check_plan(p, r.plan.assignments) == []
    assert r.stats.objective == r.plan.objective.total


def test_the_solver_keeps_the_normal_path_when_there_is_time() -> None:
    p = dataclasses.replace(
        bundled("small"),
        options=dataclasses.replace(bundled("small").options, backend=Backend.HEURISTIC),
    )
    r = solve(p, seconds=3600)
    assert "quick plan" not in r.stats.detail
    assert r.stats.detail.endswith("heuristic only (no exact solver beyond the aggregated LP)")
    assert "priced passes" in r.stats.detail and "guided placement" in r.stats.detail


@pytest.mark.parametrize("backend", [Backend.AUTO, Backend.HEURISTIC, Backend.DECOMPOSED])
def test_a_deadline_already_past_answers_with_the_quick_plan(backend: Backend) -> None:
    p = bundled("medium")
    p = dataclasses.replace(p, options=dataclasses.replace(p.options, backend=backend))
    r = solve(p, seconds=-1.0)  # no executor needed either
    assert r.stats.termination is Termination.FALLBACK
    assert "quick plan" in r.stats.detail and "not reached" in r.stats.detail
    assert check_plan(p, r.plan.assignments) == []
    reasons = {a.queue_reason for a in r.plan.assignments if a.state is JobState.QUEUED}
    assert reasons <= {QueueReason.INSUFFICIENT_RESOURCES}


def test_a_cancelled_solve_answers_with_a_valid_quick_plan() -> None:
    p = bundled("medium")
    cancel = threading.Event()
    cancel.set()
    r = solve(p, seconds=3600, stop=cancel)
    assert r.stats.detail.startswith("quick plan")
    assert check_plan(p, r.plan.assignments) == []


def test_the_first_greedy_pass_stops_at_its_stop_and_keeps_the_running_jobs() -> None:
    p = bundled("medium")
    configs = build_config_set(p)
    h = Heuristic(p, configs)
    plan = h.run(NEVER, stop_at=PAST)
    assert h.cut_short == 0
    assert check_plan(p, plan.assignments) == []
    running_now = {j.name for j in p.jobs if j.current is not None}
    kept = kept_in_place(p, plan.assignments)
    assert len(kept) >= 0.9 * len(running_now)
    assert all(a.state is JobState.QUEUED for a in plan.assignments if a.job not in running_now)


def test_a_slow_enumeration_still_switches_to_the_quick_plan() -> None:
    p = bundled("small")
    settings = SolverSettings(first_plan_seconds=1.0, after_enumeration_share=1.0)

    class SlowEnumeration(Solver):
        def _here(self, *args: Any, **kwargs: Any) -> SolveResult:
            time.sleep(0.1)  # as if enumerating had taken an age
            return super()._here(*args, **kwargs)

    # Time for the look before enumeration (its estimate, the finish reserve the power margin
    # keeps for settling, 50 ms to spare), not for the whole estimate after it.
    estimate = settings.first_plan_seconds + settings.first_plan_seconds_per_job * len(p.jobs)
    seconds = estimate + finish_seconds(settings, len(p.jobs)) + 0.05
    r = SlowEnumeration(settings).solve(p, Deadline.after(seconds, settings, len(p.jobs)))
    assert r.stats.detail.startswith("quick plan")
    assert "after enumeration" in r.stats.detail
    assert check_plan(p, r.plan.assignments) == []


def test_the_extraction_reserve_grows_with_the_jobs_up_to_its_fixed_size() -> None:
    """0.15 s whatever the size left a 2-job snapshot at 0.3 s no aggregated LP (FALLBACK);
    materializing and checking a plan takes 0.5 ms at 32 jobs and 36 ms at 2,048."""
    s = SolverSettings()
    floor, per_job = s.extract_floor_seconds, s.extract_seconds_per_job
    assert extract_seconds(s, 2) == pytest.approx(floor + 2 * per_job)
    assert extract_seconds(s, 256) < s.extract_seconds
    assert extract_seconds(s, 2048) == s.extract_seconds
