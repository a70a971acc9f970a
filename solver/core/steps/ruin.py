"""Ruin and recreate (solver.search.ruin) on the best plan so far: the heuristic's own way past
the knapsack over watts that single moves cannot reorder."""

from __future__ import annotations

import time

from solver.core.steps import SolveRun
from solver.domain import Backend
from solver.scoring.plans import materialize
from solver.search.ruin import ruin_and_recreate
from solver.search.state import state_of


def run_ruin(
    run: SolveRun, until: float, *, yield_to_guides: bool = False, resumed: int = 0
) -> None:
    """Ruin and recreate around the incumbent until its work limit or `until` (a
    time.monotonic() instant); offer the result. With `yield_to_guides`, it also stops when a
    MIP incumbent worth more than the best plan is handed over, so that it is placed while
    there is time for it; `resumed` counts the times it went on after that (each draws other
    ruins)."""
    best = run.incumbent.best
    if best is None or run.incumbent.done() or time.monotonic() >= until:
        return
    started = time.monotonic()
    state = state_of(run.problem, best)

    def stop() -> bool:
        return run.clock.stopped() or (yield_to_guides and run.pending_promises_more())

    with run.heuristic_lock:
        gained = ruin_and_recreate(
            run.heuristic.scorer,
            state,
            until,
            seed=run.problem.options.seed + resumed,
            stop=stop,
            stall_attempts=run.settings.ruin_stall_attempts,
        )
    if gained > 0:
        plan = materialize(run.problem, run.configs, dict(state.choices))
        run.incumbent.offer(plan, "ruin and recreate", Backend.HEURISTIC)
    run.incumbent.note(f"ruin and recreate +{gained:.4f} in {time.monotonic() - started:.2f} s")
