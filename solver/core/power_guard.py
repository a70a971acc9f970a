"""Every solver path honours the power margin without a formulation of its own: the solve runs on
the request's budget, the plan's margin is checked, and while it is broken the budget is
tightened by the excess and the problem solved again (at most
``power_margin_solves`` times, within the deadline); a plan still over it has its power limits
lowered until their sum fits the budget, or failing that jobs queued (``settle``). Every
running job gets its per-GPU power limit. docs/objective.md, "Power margin", says why this
and not a model row.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from solver.core.deadline import Deadline
from solver.core.incumbent import relative_gap
from solver.core.incumbent import termination as termination_of
from solver.core.settings import SolverSettings
from solver.domain import (
    JobAssignment,
    JobState,
    Problem,
    QueueReason,
    SolveResult,
    Termination,
)
from solver.perfmodel.budgets import floor_watts, woken_watts
from solver.perfmodel.configs import build_config_set
from solver.perfmodel.guard import GuardParams, margin_of, plan_draws, settle
from solver.scoring.objective import score_plan

SHED_DETAIL = "queued to keep the power margin (docs/objective.md, Power margin)"
CAP_DISCOUNT = 0.06
"""The first plan with lowered limits is taken over a tightened solve's only when worth more than
it by this share of its objective, which does not see the throughput a lowered limit may cost:
the Zeus sweeps' median slowdown at 86 % of a job's free draw (solver/simulate/power_cap.py)."""
SolveOnce = Callable[[Problem, Deadline, bool], SolveResult]
"""Solves a problem by a deadline; the flag: whether this is the first solve of the request."""


def solve_within_margin(
    problem: Problem,
    deadline: Deadline,
    solve_once: SolveOnce,
    settings: SolverSettings,
    stop: threading.Event | None = None,
) -> SolveResult:
    """The best plan `solve_once` finds that satisfies the margin, with power limits."""
    params = settings.guard_params()
    budget = problem.cluster.power_budget_watts
    if budget is None or params.z <= 0:
        return settle_plan(problem, solve_once(problem, deadline, True), params)
    floor = floor_watts(problem.cluster)
    target = budget  # first the request's budget: its bound then bounds the margin's problem
    result: SolveResult | None = None
    tightened = False
    bound: float | None = None  # of an untightened solve: it bounds the margin's problem too
    untightened: SolveResult | None = None
    for attempt in range(settings.power_margin_solves):
        last = attempt == settings.power_margin_solves - 1
        left = deadline.end - time.monotonic()
        share = 1.0 if last else settings.power_margin_first_share if attempt == 0 else 0.5
        when = dataclasses.replace(deadline, end=time.monotonic() + max(left, 0.0) * share)
        run_budget = max(min(target, budget), floor)
        attempt_result = solve_once(_with_budget(problem, run_budget), when, attempt == 0)
        if run_budget >= budget:
            bound = attempt_result.stats.best_bound
        if attempt_result.stats.termination is Termination.INFEASIBLE:
            if result is None:  # nothing feasible yet: the budget alone, as asked
                full = run_budget >= budget
                result = attempt_result if full else solve_once(problem, deadline, False)
            break
        result = attempt_result
        tightened = run_budget < budget
        if not tightened:
            untightened = result
        plan = result.plan.assignments
        woken = woken_watts(problem.cluster, plan)
        margin = margin_of(problem, plan_draws(problem, plan, params), params, woken)
        assert margin is not None
        if margin.slack >= 0 or (stop is not None and stop.is_set()) or run_budget <= floor:
            break
        target = run_budget + margin.slack - 1.0  # 1 W below: floors of the model's rows
    assert result is not None
    if result.stats.termination is Termination.INFEASIBLE:
        return result
    if tightened:
        result = _rebound(result, bound, "budget tightened for the power margin")
    settled = settle_plan(problem, result, params)
    if settled.stats.objective != result.stats.objective:
        settled = _rebound(settled, settled.stats.best_bound, "")
    if untightened is not None and untightened is not result:
        # The first plan with its limits lowered to fit (a hard cap), if it queues no job and
        # is worth more than what the tightened solves found.
        capped = settle_plan(problem, untightened, params)
        unchanged = capped.stats.objective == untightened.stats.objective
        value = capped.stats.objective - CAP_DISCOUNT * abs(capped.stats.objective)
        if unchanged and value > settled.stats.objective:
            note = "power limits lowered to fit the margin (worth more than a tightened solve)"
            return _rebound(capped, bound, note)
    return settled


def settle_plan(problem: Problem, result: SolveResult, params: GuardParams) -> SolveResult:
    """The plan with its power limits, lowered (and jobs queued) as ``settle`` says when it
    breaks the margin; rescored when jobs were queued."""
    draws = plan_draws(problem, result.plan.assignments, params)
    jobs = {j.name: j for j in problem.jobs}
    keep = [j.name for j in problem.jobs if not j.preemptible and j.current is not None]
    first = [d.job for d in draws if jobs[d.job].current is None]
    woken = woken_watts(problem.cluster, result.plan.assignments)
    s = settle(problem, draws, params, keep, first, woken)
    shed = set(s.shed)
    assignments = tuple(
        JobAssignment(
            job=a.job,
            state=JobState.QUEUED,
            migrated=jobs[a.job].current is not None,
            queue_reason=QueueReason.INSUFFICIENT_RESOURCES,
            queue_detail=SHED_DETAIL,
        )
        if a.job in shed
        else dataclasses.replace(a, power_limit_watts=s.limits[a.job])
        if a.job in s.limits
        else a
        for a in result.plan.assignments
    )
    plan = dataclasses.replace(result.plan, assignments=assignments)
    if not shed:
        return dataclasses.replace(result, plan=plan)
    configs = build_config_set(problem)
    best, least = configs.best_samples_per_second, configs.least_joules_per_sample
    objective = score_plan(problem, assignments, best, result.plan.layout_changes, least)
    plan = dataclasses.replace(plan, objective=objective)
    note = f"{len(shed)} jobs queued to keep the power margin"
    stats = dataclasses.replace(
        result.stats,
        objective=objective.total,
        detail=f"{result.stats.detail}; {note}" if result.stats.detail else note,
    )
    return SolveResult(plan=plan, stats=stats)


def _with_budget(problem: Problem, watts: float) -> Problem:
    if watts == problem.cluster.power_budget_watts:
        return problem
    cluster = dataclasses.replace(problem.cluster, power_budget_watts=watts)
    return dataclasses.replace(problem, cluster=cluster)


def _rebound(result: SolveResult, bound: float | None, note: str) -> SolveResult:
    """The result with `bound` (one proven for a problem at least as loose: the request's
    budget) and the gap and termination it gives; a bound proven under a tightened budget
    bounds nothing of the request's and is never passed here."""
    s = result.stats
    gap = relative_gap(s.objective, bound)
    degraded = s.termination is Termination.FALLBACK
    termination = termination_of(s.objective, bound, degraded=degraded)
    detail = f"{s.detail}; {note}" if s.detail and note else s.detail or note
    stats = dataclasses.replace(
        s, termination=termination, best_bound=bound, relative_gap=gap, detail=detail
    )
    return SolveResult(plan=result.plan, stats=stats)


__all__ = ["settle_plan", "solve_within_margin"]
