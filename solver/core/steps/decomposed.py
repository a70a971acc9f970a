"""A decomposed solve: parts on an executor, merged, completed by one global pass, checked, and
bounded by the Lagrangian dual over every part's configurations."""

from __future__ import annotations

from collections.abc import Callable

from solver.core.deadline import Clock
from solver.core.incumbent import Incumbent, infeasible
from solver.core.settings import SolverSettings
from solver.domain import Backend, Plan, Problem, SolveResult
from solver.perfmodel.configs import ConfigSet
from solver.runtime.pools import Executor
from solver.scoring.plans import materialize
from solver.search.decompose import Decomposition, solve_decomposed
from solver.search.heuristic import Heuristic
from solver.search.lagrangian import solve_lagrangian


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
    return min(0.3 * window, settings.merge_seconds_per_job * len(problem.jobs) + 0.5)


def finish_decomposed(
    problem: Problem,
    settings: SolverSettings,
    clock: Clock,
    d: Decomposition,
    executor: Executor,
    blocked: list[str],
    on_first: Callable[[Plan], None] | None = None,
) -> SolveResult:
    """The merged first plan, completed, checked and bounded; `on_first` is told the first."""
    configs = d.configs
    if blocked:
        return _infeasible(
            problem,
            configs,
            clock,
            "non-preemptible jobs whose running shape has no estimate: " + ", ".join(blocked),
        )
    incumbent = Incumbent(problem, improve=False, on_first=on_first)
    first = materialize(problem, configs, d.first)
    violations = incumbent.violations(first)
    if violations:
        return _infeasible(problem, configs, clock, violations[0].message)
    incumbent.offer(first, "decomposed", Backend.DECOMPOSED)
    incumbent.note(f"{d.parts} parts on {executor.name} ({executor.workers} workers)")
    dual = solve_lagrangian(problem, configs, time_limit=max(0.1 * clock.left(), 0.1))
    incumbent.note(f"Lagrangian bound in {dual.wall_seconds:.2f} s")
    incumbent.tighten(dual.best_bound)
    reserve = merge_reserve(problem, settings, clock)
    completed = Heuristic(problem, configs).complete(
        d.final, clock.end - settings.extract_seconds - 0.1 * reserve
    )
    if incumbent.violations(completed):
        incumbent.note("completed plan failed the checker; the first plan is returned")
    else:
        incumbent.offer(completed, "completed", Backend.DECOMPOSED)
    if d.lost and not incumbent.optimal() and not clock.stopped():
        # The second round's work died with its worker: the first round's plan, completed.
        incumbent.degrade(f"{d.lost}; the first round's plan, completed")
    elif d.lost:
        incumbent.note(f"second round {d.lost}")
    return incumbent.result(
        wall_seconds=clock.elapsed(),
        first_plan_seconds=d.first_seconds,
        num_configurations=configs.num_configurations,
        num_configurations_enumerated=configs.num_enumerated,
    )


def _infeasible(problem: Problem, configs: ConfigSet, clock: Clock, detail: str) -> SolveResult:
    return infeasible(
        problem,
        detail=detail,
        wall_seconds=clock.elapsed(),
        num_configurations=configs.num_configurations,
        num_configurations_enumerated=configs.num_enumerated,
    )
