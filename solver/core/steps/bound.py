"""The aggregated model as a step: a proven upper bound and a configuration choice to place.

The LP over GPU pools (split over racks where racks have budgets), or its Lagrangian dual when
the configurations are too many for the LP; then, with time to spare, the same model with
integral choices (a MIP on HiGHS), whose bound is tighter and whose choice is placed too.
"""

from __future__ import annotations

from collections.abc import Mapping

from solver.core.steps import SolveRun
from solver.core.steps.guided import place_guided
from solver.domain import Config
from solver.search.bound import solve_aggregate
from solver.search.lagrangian import solve_lagrangian


def aggregate_bound(run: SolveRun) -> Mapping[str, Config]:
    """Bound the aggregated model (LP, or its Lagrangian dual when large); its choice."""
    if run.configs.num_configurations <= run.settings.lp_max_configurations:
        outcome = solve_aggregate(run.problem, run.configs)
        run.incumbent.note(f"aggregate LP {outcome.status} in {outcome.wall_seconds:.2f} s")
        bound, choice = outcome.best_bound, outcome.choice
    else:
        dual = solve_lagrangian(
            run.problem, run.configs, time_limit=max(0.2 * run.clock.left(), 0.1)
        )
        run.incumbent.note(
            f"aggregate Lagrangian bound in {dual.wall_seconds:.2f} s ({dual.iterations} cuts)"
        )
        bound, choice = dual.best_bound, dual.choice
    run.incumbent.tighten(bound)
    return choice


def aggregate_fits(run: SolveRun) -> bool:
    """Whether the aggregated LP fits in the time left (roughly: it is linear in the
    configurations); otherwise the plan so far answers at once rather than late."""
    s = run.settings
    needed = s.aggregate_seconds_per_configuration * run.configs.num_configurations
    return run.clock.left() >= s.extract_seconds + needed


def refine_bound(run: SolveRun) -> None:
    """The aggregated model with integral choices (HiGHS MIP, a share of the time left): its
    dual bound tightens the LP's, and its choice is placed like the LP's and guides LNS."""
    s = run.settings
    if run.configs.num_configurations > s.lp_max_configurations or run.incumbent.done():
        return
    limit = s.aggregate_mip_share * (run.clock.left() - s.extract_seconds)
    if limit < s.min_aggregate_mip_seconds:
        return
    outcome = solve_aggregate(
        run.problem, run.configs, integer=True, time_limit=limit, stop=run.clock.stopped
    )
    run.incumbent.note(f"aggregate MIP {outcome.status} in {outcome.wall_seconds:.2f} s")
    run.incumbent.tighten(outcome.best_bound)
    if outcome.choice:
        with run.lock:
            run.guide = dict(outcome.choice)
            if run.lns is not None:
                run.lns.set_guide(outcome.choice)
    place_guided(run, outcome.choice, "MIP-guided")
