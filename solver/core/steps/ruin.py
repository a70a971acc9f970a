"""Ruin and recreate (solver.search.ruin) on the best plan so far: the heuristic's own way past
the knapsack over watts that single moves cannot reorder."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from solver.core.steps import SolveRun
from solver.domain import Backend, Plan
from solver.scoring.plans import materialize
from solver.search.ruin import ruin_and_recreate
from solver.search.state import SearchState, state_of


@dataclass(frozen=True)
class RuinProgress:
    """Where a ruin and recreate stopped: its state (the best it met), its random draws, and
    the plan that state stands for when it was the incumbent's best (else None)."""

    state: SearchState
    rng: random.Random
    left_best: Plan | None
    runs: int


def run_ruin(
    run: SolveRun,
    until: float,
    *,
    yield_to_guides: bool = False,
    resume: RuinProgress | None = None,
) -> RuinProgress | None:
    """Ruin and recreate around the incumbent until its work limit or `until` (a
    time.monotonic() instant); offer the result; where it stopped. With `yield_to_guides`, it
    also stops when a MIP incumbent worth more than the best plan is handed over, so that it
    is placed while there is time for it. Given the progress of the last run (`resume`), it
    goes on where that stopped when the best plan is still the one it left, else starts anew
    from the best with other draws."""
    best = run.incumbent.best
    if best is None or run.incumbent.done() or time.monotonic() >= until:
        return resume
    started = time.monotonic()
    if resume is not None and resume.left_best is best:
        state, rng = resume.state, resume.rng
    else:
        runs = 0 if resume is None else resume.runs
        state, rng = state_of(run.problem, best), random.Random(run.problem.options.seed + runs)

    def stop() -> bool:
        return run.clock.stopped() or (yield_to_guides and run.pending_promises_more())

    with run.heuristic_lock:
        gained = ruin_and_recreate(
            run.heuristic.scorer,
            state,
            until,
            seed=rng,
            stop=stop,
            stall_attempts=run.settings.ruin_stall_attempts,
        )
    mine: Plan | None = best  # the plan its state stands for
    if gained > 0:
        mine = materialize(run.problem, run.configs, dict(state.choices))
        run.incumbent.offer(mine, "ruin and recreate", Backend.HEURISTIC)
    run.incumbent.note(f"ruin and recreate +{gained:.4f} in {time.monotonic() - started:.2f} s")
    runs = 1 if resume is None else resume.runs + 1
    # Resumable only while the best plan is its own: a better one found meanwhile (by the
    # exact side) is where the next run starts.
    left = mine if run.incumbent.best is mine else None
    return RuinProgress(state, rng, left, runs)
