"""The power margin loop's probe (solver.core.power_guard): a first solve whose first plan
already breaks the margin ends after ``power_margin_probe_share`` of the time then left, and
the re-solve, under the request's budget less that plan's margin (and its spare), gets
``ALONE_SHARE`` of the rest; a first plan within the margin lets the first solve run."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest

from solver.core.deadline import Deadline, extract_seconds
from solver.core.power_guard import ALONE_SHARE, Attempt, ProbeStop, solve_within_margin
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Backend, Plan, Problem, SolveResult
from solver.perfmodel.guard import Margin, margin_of, plan_draws
from solver.power_states import PowerSaving
from tests import mig_cases
from tests import test_power_states as sleeping
from tests.test_power_guard import four_equal_jobs


class Recorder:
    """A `once` whose first solve tells the loop its first plan, then works until stopped
    (or its window ends); the re-solves solve at once. It records what each attempt got."""

    def __init__(
        self, solver: Solver, deadline: Deadline, work: float = 10.0, to_guide: float = 0.0
    ) -> None:
        self.solver, self.deadline, self.work, self.to_guide = solver, deadline, work, to_guide
        self.first_plan: Plan | None = None
        self.halted = False
        self.first_seconds = 0.0
        self.told_at = 0.0
        """Seconds into the first solve when it told its first plan."""
        self.budgets: list[float | None] = []
        self.windows: list[tuple[float, float]] = []  # (window, time left to the loop's end)

    def __call__(self, q: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
        start = time.monotonic()
        self.budgets.append(q.cluster.power_budget_watts)
        left = self.deadline.end - self.deadline.finishes() - start
        self.windows.append((d.end - start, left))
        result = self.solver._solve_once(q, d, None, None)
        if not attempt.first:
            return result
        self.first_plan = result.plan
        assert attempt.on_first_plan is not None and attempt.stop is not None
        self.told_at = time.monotonic() - start
        assert isinstance(attempt.stop, ProbeStop)
        attempt.stop.to_guide = lambda: self.to_guide  # as the solve tells it
        attempt.on_first_plan(result.plan)
        until = min(d.end, start + self.work)
        while not attempt.stop.is_set() and time.monotonic() < until:
            time.sleep(0.005)
        self.halted = attempt.stop.is_set()
        self.first_seconds = time.monotonic() - start
        return result


def recorded(
    budget_watts: float, seconds: float, work: float, to_guide: float = 0.0
) -> tuple[Recorder, SolveResult]:
    """The margin loop on four equal jobs under `budget_watts`, within `seconds`; the first
    solve says a re-solve needs `to_guide` seconds after its first plan."""
    p = four_equal_jobs(budget_watts)
    settings = SolverSettings()
    deadline = Deadline.after(seconds, settings)
    once = Recorder(Solver(settings), deadline, work, to_guide)
    return once, solve_within_margin(p, deadline, once, settings)


def first_margin(once: Recorder) -> Margin:
    """The margin of the first solve's plan against the request's budget."""
    assert once.first_plan is not None
    p, params = four_equal_jobs(3850.0), SolverSettings().guard_params()
    m = margin_of(p, plan_draws(p, once.first_plan.assignments, params), params)
    assert m is not None
    return m


def test_a_first_plan_over_the_margin_ends_the_first_solve_after_its_probe_share() -> None:
    p, settings = four_equal_jobs(3850.0), SolverSettings()
    once, result = recorded(3850.0, 3.0, work=10.0)
    assert once.halted
    window, left = once.windows[0]
    assert window == pytest.approx(0.7 * left, abs=0.05)  # what it would have had
    # Ended at the probe's share of the time left when its first plan came (this fake's own
    # solve before it took 0.15-0.27 s, by the host's pace), well before its window's end.
    share = settings.power_margin_probe_share
    halted_after = once.first_seconds - once.told_at
    assert halted_after == pytest.approx(share * (left - once.told_at), abs=0.1)
    assert once.first_seconds < window - 0.25
    # The re-solve: the request's budget less the margin of the plan cut short and its
    # spare, 1 W below (the excess alone would leave it the watts that plan did not draw).
    assert len(once.budgets) >= 2
    m = first_margin(once)
    assert m.slack < 0
    spare = 1.0 + settings.power_margin_resolve_spare
    expected = min(3850.0 + m.slack, 3850.0 - spare * m.margin) - 1.0
    assert once.budgets[1] == pytest.approx(expected)
    # ... with ALONE_SHARE of the time left (more solves may follow: it is not the last).
    window, left = once.windows[1]
    assert window == pytest.approx(ALONE_SHARE * left, abs=0.05)
    params = settings.guard_params()
    report = margin_of(p, plan_draws(p, result.plan.assignments, params), params)
    assert report is not None and report.slack >= -1e-6


def test_no_probe_when_the_re_solve_would_not_reach_its_guides_plan() -> None:
    # At 1,024 nodes and 1 s the re-solve after the probe answered its first plan (4.6 %
    # below the optimum); the first solve going on, its guided plan settled, 0.7 %. The probe
    # cuts only when the time after its share holds the re-solve's first plan (as long as the
    # first solve's) and what the solve said the rest takes.
    once, result = recorded(3850.0, 3.0, work=2.0, to_guide=2.5)
    assert not once.halted and once.first_seconds >= 2.0  # its own work done, not cut
    assert first_margin(once).slack < 0  # its first plan broke the margin
    params = SolverSettings().guard_params()
    p = four_equal_jobs(3850.0)
    report = margin_of(p, plan_draws(p, result.plan.assignments, params), params)
    assert report is not None and report.slack >= -1e-6  # kept all the same
    # The same, with a re-solve that fits after the probe's share: cut.
    once, _ = recorded(3850.0, 3.0, work=2.5, to_guide=0.5)
    assert once.halted and once.first_seconds < 2.0


def test_a_probed_solve_tells_what_a_re_solve_needs_after_its_first_plan() -> None:
    # The LP, the extraction after it and its guide's placement, as the solve estimates them;
    # a solve that is not probed is told nothing.
    p = four_equal_jobs(3850.0)
    solver = Solver(SolverSettings())
    probe = ProbeStop(None)
    solver._solve_once(p, Deadline.after(1.0, solver.settings), probe, None)
    assert probe.to_guide is not None
    assert probe.to_guide() >= extract_seconds(solver.settings, len(p.jobs)) > 0


def test_a_first_solve_that_ends_by_itself_leaves_the_budget_less_the_excess() -> None:
    # Its plan is as good as it gets on the request's budget: the excess is what the
    # re-solve's plan must give up, and no spare is kept.
    once, _ = recorded(3850.0, 3.0, work=0.0)
    assert not once.halted and len(once.budgets) >= 2
    m = first_margin(once)
    assert m.slack < 0
    assert once.budgets[1] == pytest.approx(3850.0 + m.slack - 1.0)
    window, left = once.windows[1]
    assert window == pytest.approx(ALONE_SHARE * left, abs=0.05)


def test_a_first_plan_within_the_margin_lets_the_first_solve_run() -> None:
    once, _ = recorded(100_000.0, 1.0, work=0.5)
    assert not once.halted and once.first_seconds >= 0.5
    assert once.budgets == [100_000.0]  # one solve


def test_the_requests_stop_still_stops_the_first_solve() -> None:
    p = four_equal_jobs(100_000.0)
    settings = SolverSettings()
    stop = threading.Event()
    seen: list[bool] = []

    def once(q: Problem, d: Deadline, attempt: Attempt) -> SolveResult:
        assert attempt.stop is not None
        seen.append(attempt.stop.is_set())
        stop.set()
        seen.append(attempt.stop.is_set())
        return Solver(settings)._solve_once(q, d, None, None)

    solve_within_margin(p, Deadline.after(1.0, settings), once, settings, stop)
    assert seen == [False, True]


def test_the_callers_first_plan_hook_still_hears_the_first_plan() -> None:
    # The solver tells both: the caller's hook (the service sends the plan ahead) and the
    # loop's look at it.
    p = four_equal_jobs(3850.0)
    told: list[Plan] = []
    result = Solver(SolverSettings()).solve(p, on_first_plan=told.append)
    assert len(told) == 1 and told[0].assignments
    assert result.stats.first_plan_seconds is not None


def test_decomposed_and_mig_solves_are_not_probed() -> None:
    # Cut short, a decomposed solve's parts are killed and its bound, computed last, is lost;
    # a MIG snapshot's slice packing and bound follow the whole-GPU solve: their first solve
    # gets no look at its first plan (here the caller passes no hook either). A power-states
    # snapshot's node actions are made whatever the time left: it is probed.
    hooks: list[bool] = []

    class Recording(Solver):
        def _solve_once(self, *args: Any) -> SolveResult:
            hooks.append(args[3] is not None)
            return super()._solve_once(*args)

    plain = four_equal_jobs(3850.0)
    decomposed = dataclasses.replace(
        plain, options=dataclasses.replace(plain.options, backend=Backend.DECOMPOSED)
    )
    saving = PowerSaving(enabled=True, suspend_after_seconds=600.0)
    powered = dataclasses.replace(
        plain, cluster=dataclasses.replace(plain.cluster, power_saving=saving)
    )
    sliced = mig_cases.problem(mig_cases.small("s0"), mig_cases.small("s1"), power=400.0)
    for p, probed in ((plain, True), (decomposed, False), (powered, True), (sliced, False)):
        hooks.clear()
        Recording(SolverSettings()).solve(p)
        assert hooks[0] is probed, p.options.backend


def test_a_probed_solve_with_sleeping_nodes_keeps_its_bound_over_every_node() -> None:
    # The bound over suspended nodes is computed after the whole-GPU solve, on the reserve
    # kept for the node actions: cut short by the probe, the solve still has it; stopped by
    # the request, it answers at once without it.
    p = sleeping.snapshot(
        sleeping.powered("n0"), sleeping.powered("n1", sleeping.ASLEEP), saving=sleeping.POLICY
    )
    solver = Solver(SolverSettings())
    request = threading.Event()
    probe = ProbeStop(request)
    probe.set()  # the probe ended the first solve
    cut = solver._solve_once(p, Deadline.after(2.0, solver.settings), probe, None)
    assert cut.stats.best_bound is not None
    assert "bound: the aggregated LP over every node" in cut.stats.detail
    request.set()  # the request itself stopped
    stopped = solver._solve_once(p, Deadline.after(2.0, solver.settings), probe, None)
    assert stopped.stats.best_bound is None
    assert "no bound over the suspended nodes" in stopped.stats.detail
