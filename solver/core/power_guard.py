"""Every solver path honours the power margin without a formulation of its own: the solve runs on
the request's budget, the plan's margin is checked, and while it is broken the budget is
tightened by the excess and the problem solved again (at most ``power_margin_solves`` times,
within the deadline, each with time to finish; a first solve whose first plan already breaks
it is cut short, ``_Probe``; one that keeps it with watts to spare, solved again looser); a
plan over it has its power limits lowered until their sum fits the budget, or failing that
jobs queued (``settle``), and the best settled plan wins. Every running job gets its per-GPU
power limit. docs/objective.md, "Power margin", says why this and not a model row.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence

from solver.core.deadline import Deadline
from solver.core.incumbent import relative_gap, within_asked
from solver.core.incumbent import termination as termination_of
from solver.core.power_states import without_unused_resumes
from solver.core.settings import SolverSettings
from solver.domain import (
    JobAssignment,
    JobState,
    Plan,
    Problem,
    QueueReason,
    SolveResult,
    Termination,
)
from solver.perfmodel.budgets import floor_watts, woken_watts
from solver.perfmodel.configs import build_config_set
from solver.perfmodel.guard import GuardParams, Margin, margin_of, plan_draws, settle
from solver.scoring.checker import check_plan
from solver.scoring.objective import score_plan

log = logging.getLogger(__name__)

SHED_DETAIL = "queued to keep the power margin (docs/objective.md, Power margin)"
CAP_DISCOUNT = 0.06
"""A plan whose limits were lowered to their floors (the jobs' mean draws) to fit the margin is
taken over another attempt's only when worth more than it by this share of its objective,
which does not see the throughput a lowered limit may cost: the Zeus sweeps' median slowdown at
86 % of a job's free draw (solver/simulate/power_cap.py), what a cap at the mean costs a job
drawing one standard deviation (18 %) above its prediction. Limits lowered part of the way
cost that share of it (an assumption: linear between no cost unlowered and this at the floor)."""
ALONE_SHARE = 0.9
"""Share of the time left the first solve gets when no re-solve could follow: the rest absorbs
the tail of a large solve (at 1,024 nodes an exact side past its deadline held the answer up to
0.42 s past a 5 s budget), and settling the plan."""


@dataclasses.dataclass(frozen=True)
class Attempt:
    """What one solve of the loop gets besides its problem and deadline."""

    first: bool
    """Whether this is the request's first solve (the one whose first plan the caller is told)."""
    stop: threading.Event | None = None
    """Its stop: the request's, and for the first solve also the end of a probe."""
    on_first_plan: Callable[[Plan], None] | None = None
    """The loop's look at the first solve's first plan (besides the caller's own hook)."""

    def hook(
        self, caller: Callable[[Plan], None] | None, *, probe: bool
    ) -> Callable[[Plan], None] | None:
        """The solve's first-plan hook: the caller's, then the loop's look where the solve
        may be cut short (`probe`)."""
        hooks = [h for h in (caller, self.on_first_plan if probe else None) if h is not None]
        if not hooks:
            return None

        def tell(plan: Plan) -> None:
            for h in hooks:
                h(plan)

        return tell


SolveOnce = Callable[[Problem, Deadline, Attempt], SolveResult]
"""Solves a problem by a deadline as one attempt of the loop."""


class ProbeStop(threading.Event):
    """The first solve's stop: set when the request's is, or when the loop ends a probe."""

    def __init__(self, request: threading.Event | None) -> None:
        super().__init__()
        self._request = request
        self.to_guide: Callable[[], float] | None = None
        """The probed solve's estimate, once it can make one (its first pass timed), of the
        seconds from a first plan to the aggregated guide's plan: what a re-solve needs after
        its own first plan to be worth more than the first plan settled."""

    def is_set(self) -> bool:
        return super().is_set() or self.requested()

    def requested(self) -> bool:
        """Whether the request itself was stopped (not only the probe ended)."""
        return self._request is not None and self._request.is_set()

    def cut_short(self) -> bool:
        """Whether the probe ended the solve (whatever the request did)."""
        return super().is_set()


class _Probe:
    """Ends the first solve early once its first plan breaks the margin (the budget binds:
    every better plan draws as much, so the answer is a tightened re-solve's): it keeps
    ``power_margin_probe_share`` of the time then left, for its bound on the request's budget
    (which bounds the margin's problem) and a plan there, and the re-solve gets the rest, when
    that is time enough for the re-solve's first plan and its guide's plan (``resolve_needs``);
    otherwise the first solve goes on and its plan is settled. A re-solve cut shorter answers
    its first plan: at 1,024 nodes / 1,600 jobs and 1 s, 4.6 % below the optimum, where the
    first solve's guided plan settled is 0.7 % below."""

    def __init__(
        self, problem: Problem, params: GuardParams, stop: threading.Event | None, until: float,
        share: float,
    ) -> None:  # fmt: skip
        self.halt = ProbeStop(stop)
        self.broke = False
        self._problem, self._params, self._until, self._share = problem, params, until, share
        self._started = time.monotonic()
        self._timer: threading.Timer | None = None

    def resolve_needs(self) -> float:
        """Seconds a re-solve needs to its guide's plan, told at the first solve's first plan:
        that solve's time to it (a re-solve's first plan takes as long) and the solve's
        estimate of the rest (0 when it made none)."""
        to_guide = self.halt.to_guide
        return time.monotonic() - self._started + (0.0 if to_guide is None else to_guide())

    def look(self, plan: Plan) -> None:
        """The first plan: when it breaks the margin, the first solve ends after its share,
        if the re-solve then has the time it needs."""
        if _margin(self._problem, plan.assignments, self._params).slack >= 0:
            return
        left = max(self._until - time.monotonic(), 0.0)
        delay = self._share * left
        if left - delay < self.resolve_needs():
            return
        self.broke = True
        self._timer = threading.Timer(delay, self.halt.set)
        self._timer.daemon = True
        self._timer.start()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def solve_within_margin(
    problem: Problem,
    deadline: Deadline,
    solve_once: SolveOnce,
    settings: SolverSettings,
    stop: threading.Event | None = None,
    first_plan_hint: float | None = None,
    *,
    resolve_hint: float | None = None,
    on_better_plan: Callable[[Plan], None] | None = None,
) -> SolveResult:
    """The best plan `solve_once` finds that satisfies the margin, with power limits.

    Every attempt's plan is a candidate once settled (its limits set, lowered and jobs queued
    where it breaks the margin); the one worth most wins, a settled plan with lowered limits
    discounted by up to ``CAP_DISCOUNT``, as far as they came down. A re-solve runs only with
    time for its first plan and as long again to improve it (``power_margin_resolve_factor``
    times the first solve's time to its first plan), and at least the time the first solve
    took to a plan worth the best candidate: a re-solve cut shorter is worth less than that
    candidate, and only risks the deadline (at 1,024 nodes one ran 0.1-0.3 s past it). When
    the hints (seconds, as recent solves of this size took: `first_plan_hint` to a first plan,
    `resolve_hint` what a re-solve needed) say the time the first solve would leave cannot
    hold a re-solve, the first solve gets ``ALONE_SHARE`` of it. `on_better_plan` is told each
    better settled plan while more solving follows (a worker sends it ahead, in case it
    dies). Each solve ends a finish reserve (``Deadline.finishes``) before the deadline, for
    settling its plan. A first solve whose first plan breaks the margin is cut short by the
    probe (``_Probe``), and the re-solve after it gets ``ALONE_SHARE`` of the rest. A
    re-solve whose plan keeps the margin with watts to spare (``_loosens``) is followed, time
    allowing, by one under a looser budget, short of one that broke it."""
    params = settings.guard_params()
    budget = problem.cluster.power_budget_watts
    if budget is None or params.z <= 0:
        return settle_plan(problem, solve_once(problem, deadline, Attempt(True, stop)), params)
    floor = floor_watts(problem.cluster)
    end = deadline.end - deadline.finishes()
    probe = _Probe(problem, params, stop, end, settings.power_margin_probe_share)
    target = budget  # first the request's budget: its bound then bounds the margin's problem
    bound: float | None = None  # of an untightened solve: it bounds the margin's problem too
    best: _Candidate | None = None  # the settled candidate worth most, the earliest of equals
    first: SolveResult | None = None
    first_broke = False
    started = 0.0  # the first solve's start, in seconds since the deadline's
    needs = 0.0  # the first solve's time to its first plan: what a re-solve needs at least
    over: float | None = None  # the lowest budget a solve ran under whose plan broke the margin
    factor = settings.power_margin_resolve_factor
    for attempt in range(settings.power_margin_solves):
        now = time.monotonic()
        # Settling a plan is a finish of its own (its draws, limits, a plan rescored: 0.05-0.08
        # s at 1,600 jobs), after the solve's end: the solve ends a finish reserve sooner.
        left = max(deadline.end - deadline.finishes() - now, 0.0)
        wanted = 0.0
        if attempt > 0:
            assert first is not None and best is not None
            reach = _seconds_to(first.stats.progress, best.value, started)
            wanted = max(factor * needs, reach)
            if left < wanted:
                break
        last = attempt == settings.power_margin_solves - 1
        share = 1.0 if last else settings.power_margin_first_share if attempt == 0 else 0.5
        if attempt == 1 and probe.broke and not last:
            share = ALONE_SHARE  # its target is the probe's margin: it is the answer's solve
        if attempt == 0:
            after = max(factor * (first_plan_hint or 0.0), resolve_hint or 0.0)
            if after > 0 and left * (1.0 - share) < after:
                share = ALONE_SHARE  # no re-solve could follow
        window = left * share if left * share >= wanted else left
        when = dataclasses.replace(deadline, end=now + window)
        run_budget = max(min(target, budget), floor)
        if attempt == 0:
            try:
                result = solve_once(problem, when, Attempt(True, probe.halt, probe.look))
            finally:
                probe.close()
        else:
            result = solve_once(_with_budget(problem, run_budget), when, Attempt(False, stop))
        if attempt == 0:
            first, started = result, now - deadline.start
            needs = max(result.stats.first_plan_seconds - started, 0.0)
        proven = result.stats.best_bound
        if run_budget >= budget and proven is not None:  # the request budget's tightest
            bound = proven if bound is None else min(proven, bound)
        if result.stats.termination is Termination.INFEASIBLE:
            if best is None:  # the request's own budget (the first solve's) admits no plan
                return result
            break
        margin = _margin(problem, result.plan.assignments, params)
        candidate = _candidate(problem, result, params, run_budget < budget, margin.slack)
        if attempt == 0:
            first_broke = candidate.broken  # a re-solve was wanted
        better = best is None or candidate.value > best.value
        best = candidate if best is None or better else best  # (None: for the type checker)
        if stop is not None and stop.is_set():
            break
        if margin.slack < 0:
            over = run_budget if over is None else min(over, run_budget)
        # The probe cut the first solve at a plan within the margin (its first plan was not):
        # the rest goes to the request's budget again.
        resume = margin.slack >= 0 and attempt == 0 and probe.halt.cut_short()
        loosen = (
            margin.slack >= 0
            and not resume
            and _loosens(run_budget, margin.slack, over)
            and not within_asked(problem, relative_gap(best.value, bound))
        )
        if (margin.slack >= 0 and not resume and not loosen) or run_budget <= floor:
            break
        if on_better_plan is not None and not last and better:
            on_better_plan(candidate.result.plan)
        if resume:
            continue
        # Broken: tightened by the excess; held with watts to spare below a budget that broke
        # it: loosened by them, short of that budget.
        target = run_budget + margin.slack - 1.0  # 1 W below: floors of the model's rows
        if loosen:
            assert over is not None
            target = min(target, (run_budget + over) / 2)
        elif probe.halt.cut_short():  # a plan cut short may not fill its budget; the re-solve's
            spare = 1.0 + settings.power_margin_resolve_spare
            target = min(target, budget - spare * margin.margin - 1.0)
    assert first is not None and best is not None
    result = best.result
    if best.tightened or best.broken:  # its own bound is not the request's
        result = _rebound(result, bound, best.note)
    resolve = _seconds_to(first.stats.progress, best.value, started) if first_broke else None
    stats = dataclasses.replace(
        result.stats,
        first_plan_seconds=first.stats.first_plan_seconds,
        resolve_seconds=resolve,
    )
    return dataclasses.replace(result, stats=stats)


LOOSEN_SHARE = 1e-3
"""A tightened solve whose plan keeps the margin with more than this share of the budget to
spare, under a budget that broke it, is solved again between the two (time allowing): the
excess is the first plan's margin, and a plan of fewer or smaller jobs has a smaller one, so
tightening by it overshoots (4 nodes, 16 jobs: 38-81 W spare, 18 % of the objective lost)."""


def _loosens(run_budget: float, slack: float, over: float | None) -> bool:
    """Whether a plan solved under `run_budget`, with `slack` watts to spare at the margin, is
    worth a solve under a looser budget, below `over` (a budget whose plan broke it)."""
    if over is None or over <= run_budget + 1.0:
        return False
    return slack > max(1.0, LOOSEN_SHARE * run_budget)


def _seconds_to(progress: tuple[tuple[float, float], ...], value: float, start: float) -> float:
    """Seconds from `start` until a solve whose `progress` this is kept a plan worth `value`
    (0 when its progress is unknown; its last plan's time when none was worth it)."""
    for at, objective in progress:
        if objective >= value - 1e-9 * max(1.0, abs(value)):
            return max(at - start, 0.0)
    return max(progress[-1][0] - start, 0.0) if progress else 0.0


@dataclasses.dataclass(frozen=True)
class _Candidate:
    result: SolveResult
    """Settled: with its power limits, lowered and jobs queued where the margin broke."""
    value: float
    tightened: bool
    broken: bool

    @property
    def note(self) -> str:
        if self.broken:
            return "power limits lowered to fit the power margin"
        return "budget tightened for the power margin" if self.tightened else ""


def _candidate(
    problem: Problem, result: SolveResult, params: GuardParams, tightened: bool, slack: float
) -> _Candidate:
    # A tightened solve scored its plan on its own problem (a lower cluster budget, which
    # DRF's watts share and every budget-relative term read): rescored on the request's.
    settled, lowered = _settled(problem, result, params, rescore=tightened)
    objective = settled.stats.objective
    value = objective - CAP_DISCOUNT * lowered * abs(objective)
    return _Candidate(settled, value, tightened, slack < 0)


def settle_plan(problem: Problem, result: SolveResult, params: GuardParams) -> SolveResult:
    """The plan with its power limits, lowered (and jobs queued) as ``settle`` says when it
    breaks the margin; rescored when jobs were queued."""
    return _settled(problem, result, params)[0]


def _settled(
    problem: Problem, result: SolveResult, params: GuardParams, *, rescore: bool = False
) -> tuple[SolveResult, float]:
    """``settle_plan``'s result, and how far its limits came down (``Settlement.lowered``);
    rescored on `problem` when jobs were queued, or with `rescore`."""
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
    if shed:
        plan = without_unused_resumes(plan)
        violations = check_plan(problem, assignments, plan.layout_changes, plan.power_actions)
        if violations:  # cannot happen: queuing a job breaks no rule once its resume is gone
            log.error("the plan with jobs queued for the margin breaks %s", violations[0])
            return result, 1.0
    if not shed and not rescore:
        return dataclasses.replace(result, plan=plan), s.lowered
    configs = build_config_set(problem)
    best, least = configs.best_samples_per_second, configs.least_joules_per_sample
    objective = score_plan(problem, assignments, best, result.plan.layout_changes, least)
    plan = dataclasses.replace(plan, objective=objective)
    note = f"{len(shed)} jobs queued to keep the power margin" if shed else ""
    detail = "; ".join(d for d in (result.stats.detail, note) if d)
    stats = dataclasses.replace(result.stats, objective=objective.total, detail=detail)
    return SolveResult(plan=plan, stats=stats), s.lowered


def _margin(problem: Problem, plan: Sequence[JobAssignment], params: GuardParams) -> Margin:
    """The plan's margin against the request's cluster budget (there is one)."""
    woken = woken_watts(problem.cluster, plan)
    margin = margin_of(problem, plan_draws(problem, plan, params), params, woken)
    assert margin is not None
    return margin


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


__all__ = ["Attempt", "ProbeStop", "settle_plan", "solve_within_margin"]
