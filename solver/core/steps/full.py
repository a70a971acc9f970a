"""The full model on an exact backend (CP-SAT, HiGHS or Pyomo), seeded with the best plan so
far; in the solve's own process, or in an isolated worker killed at the deadline."""

from __future__ import annotations

import logging

from solver.core.steps import SolveRun
from solver.domain import Backend
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus, get_backend
from solver.exact.isolated import solve_isolated
from solver.exact.solve import plan_of, solve_full

log = logging.getLogger(__name__)


def full_model_size(run: SolveRun) -> int:
    """Roughly how many variables the full model of the run's problem has."""
    return formulation.estimate_size(run.problem, run.configs)


def solve_full_model(
    run: SolveRun, size: int, which: Backend, threads: int, *, in_process: bool = True
) -> None:
    """Build the full model, solve it on `which` within the time left, offer its plan and
    tighten the bound with what it proved."""
    s, clock, incumbent = run.settings, run.clock, run.incumbent
    build = s.build_seconds_per_variable * size
    python_built = {
        Backend.CPSAT: s.cpsat_build_seconds_per_variable,
        Backend.PYOMO: s.pyomo_build_seconds_per_variable,
    }
    if which in python_built:  # models built in Python: at the call's pace
        build = clock.deadline.at_pace(python_built[which] * size)
    if clock.left() <= run.extract_seconds + build:
        incumbent.note("no time left to build and solve the full model")
        return
    model = formulation.build(run.problem, run.configs)
    with run.lock:
        assert incumbent.best is not None
        hint = formulation.hint(model, incumbent.best)
    time_limit = clock.left() - run.extract_seconds
    if time_limit <= 0:
        incumbent.note("building the full model used up the time budget")
        return
    o = run.problem.options
    options = ExactOptions(
        time_limit=time_limit,
        relative_gap=o.relative_gap,
        seed=o.seed,
        threads=threads,
        time_budget=o.time_budget_seconds,
        solver_name=o.pyomo_solver,
        # Done (the gap closed by the aggregated MIP's bound and a placed plan meanwhile):
        # nothing it finds can be kept. With only the clock, a medium call proven optimal
        # after 0.3 s waited for the full model until its 5 s budget.
        stop=lambda: clock.stopped() or incumbent.done(),
    )
    if in_process:
        result = solve_full(model, which, hint=hint, options=options)
    else:
        solved = solve_isolated(
            run.problem,
            run.configs,
            which,
            hint=hint,
            options=options,
            deadline=clock.end - run.extract_seconds,
            time_share=s.isolated_time_share,
        )
        result = plan_of(model, solved, get_backend(which).name)
    name = result.backend
    where = "" if in_process else " in a worker process"
    note = f"{name} {result.status.value} in {result.wall_seconds:.2f} s{where}"
    incumbent.note(f"{note} ({result.detail})" if result.detail else note)
    if result.status is SolverStatus.INFEASIBLE:
        # The heuristic's plan passed the checker, so the model disagrees with the checker.
        log.error("%s says infeasible but the heuristic plan passes the checker", name)
        incumbent.note(f"{name} disagreed with the checker; its verdict ignored")
        return
    if result.status is SolverStatus.ERROR:
        log.error("%s failed: %s", name, result.detail)
        return
    incumbent.offer(result.plan, name, which)
    incumbent.tighten(result.best_bound, with_fairness=True)
    if result.status is SolverStatus.OPTIMAL:
        incumbent.confirm(name)
