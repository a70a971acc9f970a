"""A decomposed solve: parts on an executor, merged, completed by one global pass, checked, and
bounded by the Lagrangian dual over every part's configurations."""

from __future__ import annotations

from solver.core.deadline import Clock
from solver.core.incumbent import Incumbent, infeasible
from solver.core.settings import SolverSettings
from solver.domain import Backend, Problem, SolveResult
from solver.runtime.pools import Executor
from solver.scoring.fairness import fairness_headroom
from solver.scoring.plans import materialize
from solver.search.decompose import Decomposition, solve_decomposed
from solver.search.heuristic import Heuristic
from solver.search.lagrangian import solve_lagrangian
from solver.search.quick import quick_plan


def decompose(
    problem: Problem, settings: SolverSettings, clock: Clock, executor: Executor
) -> Decomposition:
    """Both rounds of the parts (WorkerLost or Stopped when no part came back)."""
    reserve = merge_reserve(problem, settings, clock)
    return solve_decomposed(
        problem,
        executor,
        end=clock.end - reserve,
        part_gpus=settings.part_gpus,
        stop=clock.stopped,
    )


def merge_reserve(problem: Problem, settings: SolverSettings, clock: Clock) -> float:
    """Time kept for merging, completing and checking the parts' plans."""
    window = clock.end - clock.start
    return min(0.45 * window, settings.merge_seconds_per_job * len(problem.jobs) + 0.5)


def decompose_after_quick(
    problem: Problem,
    settings: SolverSettings,
    clock: Clock,
    executor: Executor,
    incumbent: Incumbent,
) -> tuple[Decomposition, float | None]:
    """The quick plan first, offered to `incumbent` as the first plan (xl: about 1 s, against
    2.5-3 s for the parts' first round, which it delays by as much of a long budget; without
    its third step, which the parts' plans make up for and which would delay them 0.5 s more
    at xl), then the parts' two rounds on the executor. The decomposition, and when the quick
    plan existed (None if it failed the checker); WorkerLost or Stopped if no part came back."""
    quick = quick_plan(
        problem,
        clock.work_end(),
        clock.stopped,
        chunk_jobs=settings.quick_chunk_jobs,
        check_every=settings.quick_check_every,
        grow=False,
    )
    quick_seconds = None
    if not quick.blocked and incumbent.offer(quick.plan, "quick plan", Backend.HEURISTIC):
        quick_seconds = clock.elapsed()
    return decompose(problem, settings, clock, executor), quick_seconds


def finish_decomposed(
    problem: Problem,
    settings: SolverSettings,
    clock: Clock,
    d: Decomposition,
    executor: Executor,
    blocked: list[str],
    incumbent: Incumbent,
    quick_seconds: float | None = None,
) -> SolveResult:
    """The merged first plan, completed, checked and bounded, offered to `incumbent` (which
    may hold the quick plan already)."""
    configs = d.configs
    incumbent.fairness_headroom = fairness_headroom(
        problem, configs.by_job, configs.best_samples_per_second
    )
    if blocked:
        return infeasible(
            problem,
            "non-preemptible jobs whose running shape has no estimate: " + ", ".join(blocked),
            wall_seconds=clock.elapsed(),
            configs=configs,
        )
    first = materialize(problem, configs, d.first)
    violations = incumbent.violations(first)
    if violations and incumbent.best is None:
        return infeasible(
            problem, violations[0].message, wall_seconds=clock.elapsed(), configs=configs
        )
    if violations:
        incumbent.note(f"the parts' first plan failed the checker ({violations[0].constraint})")
    else:
        incumbent.offer(first, "decomposed", Backend.DECOMPOSED, checked=True)
    incumbent.note(f"{d.parts} parts on {executor.name} ({executor.workers} workers)")
    # What is left is shared by the bound, the completion and its check, each of them about
    # a third of the finishing measured per job (merge_seconds_per_job).
    step = settings.merge_seconds_per_job * len(problem.jobs) / 3
    if clock.left() > 3 * step:
        limit = max(min(step, clock.left() - 2 * step), 0.1)
        dual = solve_lagrangian(problem, configs, time_limit=limit)
        incumbent.note(f"Lagrangian bound in {dual.wall_seconds:.2f} s")
        incumbent.tighten(dual.best_bound)
    if clock.left() > 2 * step:
        heuristic = Heuristic(problem, configs, clock.stopped)
        completed = heuristic.complete(d.final, clock.end - step)
        incumbent.offer(completed, "completed", Backend.DECOMPOSED)
    elif clock.left() > step:
        incumbent.offer(materialize(problem, configs, d.final), "second round", Backend.DECOMPOSED)
    if d.lost and not incumbent.optimal() and not clock.stopped():
        # The second round's work died with its worker: the first round's plan, completed.
        incumbent.degrade(f"{d.lost}; the first round's plan, completed")
    elif d.lost:
        incumbent.note(f"second round {d.lost}")
    if d.cut:
        incumbent.note(d.cut)
    firsts = [s for s in (quick_seconds, d.first_seconds) if s is not None]
    return incumbent.result(
        wall_seconds=clock.elapsed(),
        first_plan_seconds=min(firsts),
        configs=configs,
    )
