"""The quick plan as a step: checked, and a fallback for the time that was too short.

The plan that only keeps the running jobs answers if the quick plan fails the checker (a bug:
logged); INFEASIBLE if that fails too (the request's own hard constraints: non-preemptible jobs
that cannot keep their GPUs or their power).
"""

from __future__ import annotations

import logging

from solver.core.deadline import Clock
from solver.core.incumbent import Incumbent, infeasible, with_kept_jobs
from solver.core.settings import SolverSettings
from solver.domain import Backend, Problem, SolveResult
from solver.search.quick import QuickPlan, quick_plan

log = logging.getLogger(__name__)


def solve_quick(problem: Problem, settings: SolverSettings, clock: Clock, why: str) -> SolveResult:
    """The quick plan within the clock, told as a fallback for `why`."""
    end = clock.work_end()
    quick = quick_plan(
        problem,
        end,
        clock.stopped,
        chunk_jobs=settings.quick_chunk_jobs,
        check_every=settings.quick_check_every,
    )
    first_plan = clock.elapsed()
    if quick.blocked:
        return infeasible(
            problem,
            "non-preemptible jobs that cannot keep their allocation: " + ", ".join(quick.blocked),
            wall_seconds=clock.elapsed(),
            configs=quick.configs,
        )
    incumbent = Incumbent(problem, improve=False)
    violations = incumbent.violations(quick.plan)
    if violations and (quick.started or quick.grown):
        log.error("quick plan rejected by the checker: %s", violations[0])
        kept = quick_plan(problem, float("-inf"), chunk_jobs=1, check_every=1)
        if incumbent.offer(kept.plan, "running jobs kept", Backend.HEURISTIC):
            why += f"; the quick plan failed the checker ({violations[0].constraint})"
            return _answer(incumbent, kept, clock, first_plan, why + ": running jobs kept only")
    if violations:
        why = with_kept_jobs(problem, violations[0].message)
        return infeasible(problem, why, wall_seconds=clock.elapsed(), configs=quick.configs)
    incumbent.offer(quick.plan, "quick plan", Backend.HEURISTIC)
    return _answer(incumbent, quick, clock, first_plan, why)


def _answer(
    incumbent: Incumbent, quick: QuickPlan, clock: Clock, first_plan: float, why: str
) -> SolveResult:
    incumbent.degrade(f"{quick.summary()} ({why})")
    return incumbent.result(
        wall_seconds=clock.elapsed(),
        first_plan_seconds=first_plan,
        configs=quick.configs,
    )
