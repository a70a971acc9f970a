"""A guide (the aggregated model's solution) placed, then improved by local search."""

from __future__ import annotations

import time

from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.domain import Backend
from solver.search.bound import Guide


def place_guided(
    run: SolveRun, guide: Guide, source: str = "guided", search_seconds: float | None = None
) -> None:
    """Place `guide` (in its racks, and best-fit anywhere: the better), re-insertion and local
    search for at most `search_seconds` (default: up to the safety stop); offer the plan."""
    clock = run.clock
    # Placing a choice costs about what the last one took (a share of the first greedy pass
    # before any); what is left goes to local search. A placement longer than estimated
    # stops at its window with the jobs placed by then (the most valuable first), so the
    # estimate decides only whether to start: with half again for noise, a first pass 50 %
    # slow at 256 nodes / 400 jobs and a 0.5 s budget left the placement out and the answer
    # 12 % below the others (ruin and recreate from the first plan instead).
    reserve = clock.deadline.finishes(GUIDED_FINISHES)
    needed = reserve + run.heuristic.guided_seconds(bool(guide.racks))
    if not guide.choice or clock.left() <= needed or run.incumbent.done():
        return
    with run.heuristic_lock:
        started = time.monotonic()
        end = started + guided_window(clock.left(), reserve, run.settings)
        search_until = None if search_seconds is None else started + search_seconds
        plan = run.heuristic.run_guided(guide.choice, end, guide.racks, search_until)
    run.incumbent.offer(plan, source, Backend.AGGREGATE)
    run.incumbent.note(f"{source} placement in {time.monotonic() - started:.2f} s")


GUIDED_FINISHES = 2.0
"""Finish reserves (``Deadline.finishes``: per job, at the call's pace) kept after a guided
placement's window: its plan is materialized, then checked, each about one finish. At 1,024
nodes / 1,600 jobs that is 0.16 s idle, as the fixed extraction reserve (0.15 s) it replaces,
which at 400 jobs kept back 0.15 s of a 0.5 s budget for 0.04 s of work."""


def guided_window(left: float, reserve: float, s: SolverSettings) -> float:
    """Seconds one guided placement may take with `left` seconds left: its safety stop
    (``max_guided_seconds``, or ``guided_share`` of the time left when more), never past the
    `reserve` kept for its plan after it (at the call's pace: at 1,024 nodes beside the test
    suite materializing and checking it took 0.23 s where the idle reserve was 0.15 s, and the
    call answered past its due instant)."""
    return min(left - reserve, max(s.max_guided_seconds, s.guided_share * left))
