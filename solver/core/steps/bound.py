"""The aggregated model as a step: a proven upper bound and a guide to place.

The LP over GPU pools (split over racks where racks have budgets), or its Lagrangian dual when
the configurations are too many for the LP; then the same model with integral choices (a MIP
on HiGHS), whose every improving solution is handed to the search to be placed
(``SolveRun.hand_over``) and whose dual bound, tighter, tightens the incumbent's as it falls.
"""

from __future__ import annotations

import threading
import time

from solver.core.steps import SolveRun
from solver.domain import Fairness, FairnessMode, FairnessScope
from solver.search import bound_worker
from solver.search.bound import aggregate_columns, solve_aggregate
from solver.search.bound_fairness import holds_fairness
from solver.search.guide import Guide
from solver.search.lagrangian import solve_lagrangian
from solver.search.pricing import dual_bound


def aggregate_bound(run: SolveRun) -> Guide:
    """Bound the aggregated model (LP, or its Lagrangian dual when large); its guide."""
    if run.configs.num_configurations <= run.settings.lp_max_configurations:
        limit = run.clock.left() - run.clock.deadline.at_pace(run.extract_seconds)
        outcome = solve_aggregate(run.problem, run.configs, time_limit=limit, fairness=True)
        run.incumbent.note(f"aggregate LP {outcome.status} in {outcome.wall_seconds:.2f} s")
        run.incumbent.tighten(outcome.best_bound, with_fairness=outcome.with_fairness)
        return Guide(outcome.choice, outcome.racks)
    dual = solve_lagrangian(run.problem, run.configs, time_limit=max(0.2 * run.clock.left(), 0.1))
    run.incumbent.note(
        f"aggregate Lagrangian bound in {dual.wall_seconds:.2f} s ({dual.iterations} cuts)"
    )
    run.incumbent.tighten(dual.best_bound)
    return Guide(dual.choice, {})


def dual_first(run: SolveRun) -> None:
    """The Lagrangian dual before the priced passes, when the LP is judged slow: a proven bound
    in milliseconds (61 ms at 2,048 jobs and 31,120 configurations) where the LP, stopped at
    the deadline, gave none; the passes are then priced with it."""
    limit = max(run.settings.dual_first_share * run.clock.left(), 0.0)
    with run.heuristic_lock:
        dual = run.heuristic.dual = dual_bound(run.problem, run.configs, limit)
    run.incumbent.tighten(dual.best_bound)
    run.incumbent.note(f"Lagrangian dual bound in {dual.wall_seconds:.2f} s")


def aggregate_seconds(run: SolveRun) -> float:
    """Roughly how long the aggregated LP takes (linear in its columns, longer with a fairness
    term that couples them); the Lagrangian dual that replaces it above
    ``lp_max_configurations`` takes a fraction of a second."""
    s = run.settings
    if run.configs.num_configurations > s.lp_max_configurations:
        return 0.0
    factor = s.aggregate_fairness_factor if couples_columns(run.problem.fairness) else 1.0
    return factor * s.aggregate_seconds_per_column * aggregate_columns(run.problem, run.configs)


def couples_columns(fairness: Fairness) -> bool:
    """Whether the fairness term's rows take the columns of many jobs together (max-min,
    finish time, proportional by tenant): what makes the LP slower. Proportional by job only
    changes the objective, and DRF's few rows per tenant left it as fast (2,048 jobs)."""
    if not fairness.active or fairness.mode is FairnessMode.DRF:
        return False
    return not (fairness.mode is FairnessMode.PROPORTIONAL and fairness.scope is FairnessScope.JOB)


def aggregate_fits(run: SolveRun) -> bool:
    """Whether the aggregated LP, and extracting a plan after it, fit in the time left at the
    call's pace (``Deadline.at_pace``); otherwise the plan so far answers at once rather than
    late. Building the LP is not bounded by its time limit: at 1,024 nodes on a loaded machine
    (pace 2.2-2.3) an LP estimated at idle pace to fit took 0.66 s, and the call answered 0.3 s
    past its window."""
    need = run.extract_seconds + aggregate_seconds(run)
    return run.clock.left() >= run.clock.deadline.at_pace(need)


def aggregate_is_slow(run: SolveRun) -> bool:
    """Whether the aggregated LP would leave its guide no time to start being placed (the
    share ``place_guided`` asks for, ``guided_start_share`` of the placement's estimate): the
    priced passes then run before it, so that the LP cannot leave the first pass as the
    answer. At 2,048 jobs and 1 s an LP of 0.2 s had come after them (estimated above 30 % of
    the time left), was stopped, and the answer was the first plan 0.4-0.5 % below; first, its
    guide placed was 0.005-0.01 % from the bound. At idle pace, not the call's: the priced
    passes put first on a loaded machine (1,024 nodes, a 2 s budget) took the time the
    guide's placement needed, and half again as many calls answered with the first plan."""
    return run.clock.left() < seconds_to_guide(run, run.settings.guided_start_share)


def seconds_to_guide(run: SolveRun, placing: float = 1.0) -> float:
    """Roughly how long the aggregated LP, the extraction after it and `placing` (a share) of
    its guide's placement take: from the first plan to the guide's plan, which at short
    budgets is the solve's answer."""
    racks = bool(run.problem.cluster.rack_power_budgets_watts)
    placement = placing * run.heuristic.guided_seconds(racks)
    return run.extract_seconds + aggregate_seconds(run) + placement


def run_mip(run: SolveRun, until: float) -> None:
    """The aggregated model with integral choices (HiGHS) until `until` (a time.monotonic()
    instant) or a closed gap: each improving solution is handed over to be placed, and its
    dual bound tightens the LP's.

    Where racks have power budgets (and the settings ask for it), in two phases: the model
    whose racks split GPUs freely until its first solution worth more than the best plan,
    then the one in whole tensor groups per budgeted rack (``mip_integral_racks``) for the
    rest. The first finds a good guide fast (1.2 s at 1,024 nodes, where the second's first
    good solution came after 10 s); the second has the tighter bound, and its solutions place
    as they are counted."""
    s = run.settings
    if run.configs.num_configurations > s.lp_max_configurations or run.incumbent.done():
        return
    # The MIP takes at least the LP's time: one that cannot finish its root gives nothing.
    least = max(s.min_aggregate_mip_seconds, 2 * aggregate_seconds(run))
    if until - time.monotonic() < least:
        return
    if not (s.mip_integral_racks and run.problem.cluster.rack_power_budgets_watts):
        _solve_mip(run, until, integral_racks=False, until_promising=False)
        return
    _solve_mip(run, until, integral_racks=False, until_promising=True)
    if not run.incumbent.done() and until - time.monotonic() >= least:
        _solve_mip(run, until, integral_racks=True, until_promising=False)


def _solve_mip(run: SolveRun, until: float, *, integral_racks: bool, until_promising: bool) -> None:
    """One MIP of ``run_mip``; with `until_promising`, it stops at its first solution worth
    more than the best plan (once handed over)."""
    s = run.settings
    with_fairness = holds_fairness(run.problem)
    promising = threading.Event()

    def improved(guide: Guide, objective: float) -> None:
        promises = run.promises_more(objective)
        if integral_racks and not promises:
            # It cannot gain, and handed over it would take the place of the first phase's
            # guide not yet placed.
            return
        run.hand_over(guide, objective)
        with run.lock:
            run.guide = dict(guide.choice)
            if run.lns is not None:
                run.lns.set_guide(guide.choice)
        if until_promising and promises:
            promising.set()

    def tighter(bound: float) -> None:
        run.incumbent.tighten(bound, with_fairness=with_fairness)

    def stop() -> bool:
        return run.clock.stopped() or run.incumbent.done() or promising.is_set()

    where = ""
    if (
        run.threads >= 2
        and 0 < run.configs.num_configurations <= s.isolated_mip_max_configurations
        and bound_worker.ready()
    ):
        where = " in a worker"
        outcome = bound_worker.solve_mip_isolated(
            run.problem,
            run.configs,
            end=until,
            stop=stop,
            on_choice=improved,
            on_bound=tighter,
            integral_racks=integral_racks,
        )
    else:
        outcome = solve_aggregate(
            run.problem,
            run.configs,
            integer=True,
            time_limit=until - time.monotonic(),
            # HiGHS checks its time limit between nodes (a node's LP took over 0.1 s at 1,024
            # nodes); its interrupt callback, polled in the simplex, stops it at the instant.
            stop=lambda: stop() or time.monotonic() >= until,
            on_choice=improved,
            # Its dual bound as it falls: a MIP still inside a heuristic at the answer (its
            # result ignored) has proven it already.
            on_bound=tighter,
            fairness=True,
            integral_racks=integral_racks,
        )
    kind = " in whole groups per rack" if integral_racks else ""
    run.incumbent.note(
        f"aggregate MIP{kind} {outcome.status}{where} in {outcome.wall_seconds:.2f} s"
    )
    run.incumbent.tighten(outcome.best_bound, with_fairness=outcome.with_fairness)
