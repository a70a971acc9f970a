"""The aggregated model as a step: a proven upper bound and a guide to place.

The LP over GPU pools (split over racks where racks have budgets), or its Lagrangian dual when
the configurations are too many for the LP; then the same model with integral choices (a MIP
on HiGHS), whose bound is tighter and whose every improving solution is handed to the search
to be placed (``SolveRun.hand_over``).
"""

from __future__ import annotations

import time

from solver.core.steps import SolveRun
from solver.search.bound import Guide, solve_aggregate
from solver.search.lagrangian import solve_lagrangian


def aggregate_bound(run: SolveRun) -> Guide:
    """Bound the aggregated model (LP, or its Lagrangian dual when large); its guide."""
    if run.configs.num_configurations <= run.settings.lp_max_configurations:
        outcome = solve_aggregate(run.problem, run.configs)
        run.incumbent.note(f"aggregate LP {outcome.status} in {outcome.wall_seconds:.2f} s")
        run.incumbent.tighten(outcome.best_bound)
        return Guide(outcome.choice, outcome.racks)
    dual = solve_lagrangian(run.problem, run.configs, time_limit=max(0.2 * run.clock.left(), 0.1))
    run.incumbent.note(
        f"aggregate Lagrangian bound in {dual.wall_seconds:.2f} s ({dual.iterations} cuts)"
    )
    run.incumbent.tighten(dual.best_bound)
    return Guide(dual.choice, {})


def aggregate_fits(run: SolveRun) -> bool:
    """Whether the aggregated LP fits in the time left (roughly: it is linear in the
    configurations); otherwise the plan so far answers at once rather than late."""
    s = run.settings
    needed = s.aggregate_seconds_per_configuration * run.configs.num_configurations
    return run.clock.left() >= s.extract_seconds + needed


def run_mip(run: SolveRun, until: float) -> None:
    """The aggregated model with integral choices (HiGHS) until `until` (a time.monotonic()
    instant) or a closed gap: each improving solution is handed over to be placed, and its
    dual bound tightens the LP's."""
    s = run.settings
    if run.configs.num_configurations > s.lp_max_configurations or run.incumbent.done():
        return
    limit = until - time.monotonic()
    if limit < s.min_aggregate_mip_seconds:
        return

    def improved(guide: Guide, objective: float) -> None:
        run.hand_over(guide)
        with run.lock:
            run.guide = dict(guide.choice)
            if run.lns is not None:
                run.lns.set_guide(guide.choice)

    outcome = solve_aggregate(
        run.problem,
        run.configs,
        integer=True,
        time_limit=limit,
        stop=lambda: run.clock.stopped() or run.incumbent.done(),
        on_choice=improved,
    )
    run.incumbent.note(f"aggregate MIP {outcome.status} in {outcome.wall_seconds:.2f} s")
    run.incumbent.tighten(outcome.best_bound)
