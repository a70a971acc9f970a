"""A guide (the aggregated model's solution) placed, then improved by local search."""

from __future__ import annotations

import time

from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.domain import Backend
from solver.search.guide import Guide

WHOLE_PLACEMENT_NEED = 1.5
"""A guide worth little when cut short is placed only with its estimate and half again for
noise left: a MIP incumbent refines a plan already near it, and cut short it only takes the
solve's tail (late MIP-guided placements under load answered 21-43 ms past 1 s budgets, commit
fd2ae35); the dual's choice placed in part is hardly above the first plan (at 1,024 nodes 2,648
at 20 % of its placement, 2,770 at 35 %, 2,937 at 50 %; the first plan 2,646)."""


def place_guided(
    run: SolveRun,
    guide: Guide,
    source: str = "guided",
    search_seconds: float | None = None,
    *,
    need: float = WHOLE_PLACEMENT_NEED,
) -> None:
    """Place `guide` (in its racks, and best-fit anywhere: the better), re-insertion and local
    search for at most `search_seconds` (default: up to the safety stop); offer the plan. It
    starts only with `need` times the placement's estimate left (the LP's guide:
    ``SolverSettings.guided_start_share``) and stops at its window with the jobs placed by then."""
    clock, s = run.clock, run.settings
    # Placing a choice costs about what the last one took (a share of the first greedy pass
    # before any); what is left goes to local search.
    reserve = clock.deadline.at_pace(run.extract_seconds)
    needed = reserve + need * run.heuristic.guided_seconds(bool(guide.racks))
    if not guide.choice or clock.left() <= needed or run.incumbent.done():
        return
    with run.heuristic_lock:
        started = time.monotonic()
        end = started + guided_window(
            clock.left(), s, run.extract_seconds, clock.deadline.slowdown
        )
        search_until = None if search_seconds is None else started + search_seconds
        plan = run.heuristic.run_guided(guide.choice, end, guide.racks, search_until)
    run.incumbent.offer(plan, source, Backend.AGGREGATE)
    run.incumbent.note(f"{source} placement in {time.monotonic() - started:.2f} s")


def place_dual_guide(run: SolveRun, search_seconds: float | None = None) -> None:
    """Place the Lagrangian dual's choice (``dual_first``), where the aggregated LP does not
    fit: each job at its best configuration at the dual's prices, placed best-fit anywhere.
    The first plan fills GPUs by value density and leaves out what the budgets need elsewhere;
    the dual's choice prices them: at 256 nodes / 400 jobs 724 against the first plan's 597
    and the LP's guide placed, 751 (1,024 nodes: 3,053, 2,646 and 3,154). Cut short it is
    worth little, so it starts only with ``WHOLE_PLACEMENT_NEED`` times its estimate left:
    started with a share, under load at 0.5 s it took the priced passes' time for nothing."""
    dual = run.heuristic.dual
    if dual is not None:
        place_guided(run, Guide(dict(dual.choice), {}), "dual-guided", search_seconds)


def guided_window(left: float, s: SolverSettings, extract: float, slowdown: float = 1.0) -> float:
    """Seconds one guided placement may take with `left` seconds left: its safety stop
    (``max_guided_seconds``, or ``guided_share`` of the time left when more), never past the
    extraction reserve `extract` stretched by the call's `slowdown` (``Deadline.slowdown``): its
    plan is materialized and checked after the window, which at 1,024 nodes beside the test
    suite took 0.23 s where the idle reserve is 0.15 s, and the call answered past its due
    instant."""
    reserve = slowdown * extract
    return min(left - reserve, max(s.max_guided_seconds, s.guided_share * left))
