"""The power margin loop's use of time (solver.core.power_guard.solve_within_margin): when a
re-solve runs, how much of the window the first solve gets from the solver's pace hints, and
what each solve keeps back for settling its plan."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from solver.core.deadline import Deadline
from solver.core.power_guard import ALONE_SHARE, Attempt, solve_within_margin
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import JobState, Plan, Problem, SolveResult
from solver.scoring.power import power_margin
from tests.test_power_guard import four_equal_jobs


def test_no_resolve_without_time_for_its_first_plan() -> None:
    # The first solve took (in effect) the whole deadline to its first plan: no re-solve runs.
    p = four_equal_jobs(3850.0)
    settings = SolverSettings()
    solver = Solver(settings)
    calls: list[bool] = []

    def once(q: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
        calls.append(attempt.first)
        result = solver._solve_once(q, d, None, None)
        stats = dataclasses.replace(result.stats, first_plan_seconds=10.0)
        return dataclasses.replace(result, stats=stats)

    result = solve_within_margin(p, Deadline.after(2.0, settings), once, settings)
    assert calls == [True]
    report = power_margin(p, result.plan.assignments)
    assert report is not None and report.slack >= -1e-6


@pytest.mark.parametrize("which", ["first_plan", "resolve"])
def test_the_first_solve_takes_the_whole_window_when_no_resolve_could_follow(which: str) -> None:
    # 2 s left: with no hint (or a fast one) the first solve gets power_margin_first_share of
    # it, in case a re-solve follows. When a recent solve of this size took 1 s to its first
    # plan, the 0.6 s left after it could not hold a re-solve (2 x 1 s); nor when a recent
    # re-solve needed 1 s to reach the first solve's settled plan: it gets 90 % then.
    p = four_equal_jobs(3850.0)
    settings = SolverSettings()
    solver = Solver(settings)
    windows: list[float] = []

    def once(q: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
        windows.append(d.end - time.monotonic())
        return solver._solve_once(q, d, None, None)

    for hint, expected in ((None, 0.7 * 2.0), (0.01, 0.7 * 2.0), (1.0, ALONE_SHARE * 2.0)):
        windows.clear()
        deadline = Deadline.after(2.0, settings)
        if which == "first_plan":
            solve_within_margin(p, deadline, once, settings, None, hint)
        else:
            solve_within_margin(p, deadline, once, settings, None, None, resolve_hint=hint)
        assert windows[0] == pytest.approx(expected, abs=0.05), hint


def test_every_solve_leaves_a_finish_reserve_for_settling_its_plan() -> None:
    # Settling a plan (its draws, limits, a plan rescored) comes after the solve's end: at
    # 1,024 nodes it takes 0.05-0.08 s, and a solve that used the whole window answered late.
    p = four_equal_jobs(3850.0)
    settings = SolverSettings(power_margin_solves=2)  # the re-solve is the last: all time left
    solver = Solver(settings)
    ends: list[float] = []

    def once(q: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
        ends.append(d.end)
        return solver._solve_once(q, d, None, None)

    deadline = dataclasses.replace(Deadline.after(3.0, settings), finish_seconds=0.5)
    solve_within_margin(p, deadline, once, settings)
    assert len(ends) == 2  # the first plan broke the margin: the re-solve ran
    assert all(end <= deadline.end - 0.5 + 1e-9 for end in ends)


def test_the_solver_hints_the_margin_loop_with_its_last_pace() -> None:
    p = four_equal_jobs(3850.0)
    solver = Solver(SolverSettings())
    assert solver.first_plan_per_job is None
    result = solver.solve(p)
    assert result.stats.first_plan_seconds is not None
    assert solver.first_plan_per_job == pytest.approx(result.stats.first_plan_seconds / len(p.jobs))


def test_before_its_first_answer_the_solver_hints_with_the_settings_estimate() -> None:
    # No pace yet: the settings' estimates of the time to a first plan and of what a re-solve
    # needs stand in for it. At 0.5 s (first_plan_seconds), a re-solve would need 1 s and the
    # 30 % of 2 s left after a first solve at 70 % cannot hold it, so the first solve gets
    # ALONE_SHARE; so too at 0.25 s a job for the re-solve; at the defaults (milliseconds for
    # four jobs) it gets 70 %.
    p = four_equal_jobs(3850.0)
    windows: list[float] = []

    class Recording(Solver):
        def _solve_once(self, *args: Any) -> SolveResult:
            windows.append(args[1].end - time.monotonic())
            return super()._solve_once(*args)

    for settings, expected in (
        (SolverSettings(), 0.7 * 2.0),
        (SolverSettings(first_plan_seconds=0.5), ALONE_SHARE * 2.0),
        (SolverSettings(power_margin_resolve_seconds_per_job=0.25), ALONE_SHARE * 2.0),
    ):
        windows.clear()
        solver = Recording(settings)
        assert solver.first_plan_per_job is None
        solver.solve(p, Deadline.after(2.0, settings))
        assert windows[0] == pytest.approx(expected, abs=0.05), settings.first_plan_seconds


def _reached_late(solver: Solver, seconds: float) -> Any:
    """A `once` whose first solve reports (in its progress) reaching its plan `seconds` in."""
    calls: list[bool] = []

    def once(q: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
        calls.append(attempt.first)
        result = solver._solve_once(q, d, None, None)
        if not attempt.first:
            return result
        late = ((0.001, -1e9), (seconds, result.stats.objective))
        return dataclasses.replace(result, stats=dataclasses.replace(result.stats, progress=late))

    once.calls = calls  # type: ignore[attr-defined]
    return once


def test_no_resolve_without_time_to_reach_the_best_candidate() -> None:
    # The first solve's plan (which breaks the margin) came 5 s into it: a re-solve with 2 s
    # left could not reach a plan worth its settled value, so none runs; the answer says what
    # a re-solve would have needed.
    p = four_equal_jobs(3850.0)
    settings = SolverSettings()
    solver = Solver(settings)
    slow = _reached_late(solver, 5.0)
    result = solve_within_margin(p, Deadline.after(3.0, settings), slow, settings)
    assert slow.calls == [True]
    assert result.stats.resolve_seconds == pytest.approx(5.0, abs=0.05)
    report = power_margin(p, result.plan.assignments)
    assert report is not None and report.slack >= -1e-6
    # Reached early (10 ms in): the re-solve runs as before.
    fast = _reached_late(solver, 0.01)
    result = solve_within_margin(p, Deadline.after(3.0, settings), fast, settings)
    assert fast.calls[:2] == [True, False]
    assert result.stats.resolve_seconds is not None and result.stats.resolve_seconds < 0.05


def test_a_plan_within_the_margin_needs_no_resolve_and_says_none() -> None:
    p = four_equal_jobs(100_000.0)
    result = Solver(SolverSettings()).solve(p)
    assert result.stats.resolve_seconds is None
    assert [v for _, v in result.stats.progress] == sorted(v for _, v in result.stats.progress)
    assert result.stats.progress[-1][1] == pytest.approx(result.stats.objective)


def test_each_better_settled_plan_is_told_while_a_resolve_follows() -> None:
    # The first plan breaks the margin: before the re-solve, its settled plan is told (power
    # limits set, lowered until the margin holds), not the raw plan; nothing is told after the
    # last attempt (the answer follows at once).
    p = four_equal_jobs(3850.0)
    settings = SolverSettings()
    solver = Solver(settings)
    told: list[tuple[int, Plan]] = []
    calls: list[bool] = []

    def once(q: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
        calls.append(attempt.first)
        return solver._solve_once(q, d, None, None)

    def tell(plan: Plan) -> None:
        told.append((len(calls), plan))

    solve_within_margin(p, Deadline.after(3.0, settings), once, settings, on_better_plan=tell)
    assert len(calls) >= 2 and told and told[0][0] == 1
    assert all(n < settings.power_margin_solves for n, _ in told)
    for _, plan in told:
        runs = [a for a in plan.assignments if a.state is JobState.RUNNING]
        assert runs and all(a.power_limit_watts is not None for a in runs)
        report = power_margin(p, plan.assignments)
        assert report is not None and report.slack >= -1e-6


def test_the_solver_remembers_what_a_resolve_needed() -> None:
    solver = Solver(SolverSettings())
    solver.note_pace(0.2, None, 10)
    assert solver.first_plan_per_job == pytest.approx(0.02)
    assert solver.resolve_per_job is None
    solver.note_pace(None, 3.0, 10)
    assert solver.first_plan_per_job == pytest.approx(0.02)
    assert solver.resolve_per_job == pytest.approx(0.3)
