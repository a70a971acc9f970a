"""A configuration choice (the aggregated model's) placed best-fit, then local search."""

from __future__ import annotations

import time
from collections.abc import Mapping

from solver.core.steps import SolveRun
from solver.domain import Backend, Config


def place_guided(run: SolveRun, choice: Mapping[str, Config], source: str = "guided") -> None:
    """Place `choice` best-fit, improve it by local search, offer the plan."""
    clock, s = run.clock, run.settings
    needed = s.extract_seconds + 2 * run.heuristic.pass_seconds
    if not choice or clock.left() <= needed or run.incumbent.done():
        return
    with run.heuristic_lock:
        end = time.monotonic() + min(clock.left() - s.extract_seconds, s.max_guided_seconds)
        started = time.monotonic()
        plan = run.heuristic.run_guided(choice, end)
    run.incumbent.offer(plan, source, Backend.AGGREGATE)
    run.incumbent.note(f"{source} placement in {time.monotonic() - started:.2f} s")
