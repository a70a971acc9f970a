"""The heuristic as steps: its first greedy pass (the first checked plan, in milliseconds, so
that an answer always exists), and later its priced passes with local search.

The passes are limited by work, not by the clock, so their plans do not depend on the
machine's speed; the clock only stops them on an overloaded machine, and stops even the first
pass when the answer is due.
"""

from __future__ import annotations

import time

from solver.core.steps import SolveRun
from solver.domain import Backend
from solver.scoring.plans import materialize
from solver.search.state import SearchState


def run_first(run: SolveRun) -> tuple[list[str], SearchState]:
    """Offer the first greedy pass's plan; the checker's violations of it (empty when it
    passed) and its state, for the priced passes to start from."""
    clock = run.clock
    heuristic = run.heuristic
    state = heuristic.first(stop_at=clock.work_end())
    plan = materialize(run.problem, run.configs, dict(state.choices))
    assert heuristic.first_plan_at is not None
    run.first_plan_seconds = heuristic.first_plan_at - clock.start
    violations = run.incumbent.violations(plan)
    if violations:
        # Only hard constraints of the request itself (non-preemptible jobs over a power
        # budget) defeat the heuristic, which places those jobs first whatever they draw.
        return [v.message for v in violations], state
    run.incumbent.offer(plan, "first pass", Backend.HEURISTIC, checked=True)
    if heuristic.cut_short is not None:
        run.incumbent.note(
            f"the first greedy pass stopped at the deadline after {heuristic.cut_short} jobs"
        )
    return [], state


def run_priced(run: SolveRun, start: SearchState | None, until: float) -> None:
    """The priced greedy passes, re-insertion and local search on the best (safety stop at
    `until`, a time.monotonic() instant); offer the best plan. Past `until` they do not start:
    their first look at the clock comes after materializing a plan, which with its check took
    0.3 s at 1,024 nodes on a loaded machine, past the end of the solve."""
    if run.priced or run.heuristic.cut_short is not None or run.incumbent.done():
        return
    started = time.monotonic()
    stop = min(until, run.clock.work_end())
    if started >= stop:
        return
    told = run.heuristic.dual  # told already by dual_first, when it ran
    with run.heuristic_lock:
        plan = run.heuristic.priced(stop, start)
    run.priced = True
    run.incumbent.offer(plan, "priced passes", Backend.HEURISTIC)
    run.incumbent.note(f"priced passes in {time.monotonic() - started:.2f} s")
    # The dual that priced them bounds the aggregated model at any step: where the LP comes
    # later and is stopped, or never comes, the answer keeps a proven bound.
    if (dual := run.heuristic.dual) is not None and dual is not told:
        run.incumbent.tighten(dual.best_bound)
        run.incumbent.note("their Lagrangian dual bound told")
