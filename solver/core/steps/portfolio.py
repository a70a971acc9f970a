"""The improvement phase, by backend, once the first plan and the aggregated LP's guide exist.

- HEURISTIC: the LP's guide placed, ruin and recreate on the best plan (work-limited), the
  priced passes once it has stalled, then ruin and recreate again; no solver beyond the LP.
- AGGREGATE: the same, and the aggregated MIP whose incumbents are placed as they come (ruin
  and recreate pauses for one worth more than the best plan, then resumes where it stopped: at
  short budgets, nearly the heuristic's own search, not a guarantee of it).
- AUTO: the same, in the same order, then LNS until the end; the MIP and, when it is small
  enough to build in time, the full model on HiGHS run on a thread of their own (the solvers
  release the GIL), handing their results to the search.

On one core the aggregated MIP runs after the priced passes, its choice placed before the second
ruin and recreate, and the full model after the search, instead of beside it.
"""

from __future__ import annotations

import threading
import time

from solver.core.steps import SolveRun
from solver.core.steps.bound import run_mip
from solver.core.steps.first import run_priced
from solver.core.steps.full import full_model_size, solve_full_model
from solver.core.steps.guided import place_guided
from solver.core.steps.lns import place_pending, run_lns
from solver.core.steps.ruin import RuinProgress, run_ruin
from solver.domain import Backend
from solver.search.guide import Guide
from solver.search.state import SearchState

GUIDED_SEARCH_SECONDS = 0.2
"""Local search after placing the LP's guide (its gain comes in the first tenth of a second on
hetero-power snapshots of 64-256 nodes); ruin and recreate and LNS take it from there."""
RUIN_FINISH_RESERVES = 3
"""Ruin and recreate stops this many finish reserves (``Deadline.finishes``: stretched on a
slowed machine) before the end."""
PRICED_SHARE = 0.5
"""Safety stop of the priced passes, as a share of the time left when they start."""


def improve(run: SolveRun, guide: Guide, start: SearchState, backend: Backend) -> None:
    """Improve the best plan until the end of the run's clock or a closed gap."""
    s, clock, incumbent = run.settings, run.clock, run.incumbent
    end = clock.end - run.extract_seconds
    exact = backend in (Backend.AUTO, Backend.AGGREGATE)
    lns = backend is Backend.AUTO
    size = full_model_size(run) if lns else 0
    full = lns and size <= s.full_model_max_variables
    if lns and not full:
        incumbent.note(f"full model skipped: ~{size} variables")

    def mip() -> None:
        # Ends a finish reserve before the search's end: its last look at the side is there,
        # and a MIP ending on the instant (its guide still being read) had its bound ignored.
        run_mip(run, end - clock.deadline.finishes())

    def full_model(threads: int) -> None:
        if full and not incumbent.done():
            which = Backend[s.auto_exact_backend]
            solve_full_model(
                run, size, which, threads, in_process=size <= s.in_process_max_variables
            )

    def exact_side(threads: int) -> None:
        mip()
        full_model(threads)

    side: threading.Thread | None = None
    if exact and run.threads >= 2:
        # Not a daemon: a solver thread still inside HiGHS when the interpreter exits would
        # abort the process; after a stop it ends within its solver's next interrupt check.
        side = threading.Thread(
            target=exact_side, args=(run.threads - 1,), name="dsfro-exact", daemon=False
        )
        side.start()
    # The heuristic's own sequence first, as backend HEURISTIC runs it (its passes are
    # work-limited), so that AUTO's plan is not below the heuristic's alone for the MIP's
    # sake; the MIP's incumbents are placed during ruin and recreate (below) and after it,
    # then LNS searches around them.
    place_guided(run, guide, "guided", GUIDED_SEARCH_SECONDS, need=s.guided_start_share)
    # Its plan needs only the finish, not an extraction: its last attempt, materializing and
    # checking the plan take about twice the finish reserve (256 nodes / 384 jobs: answers
    # 20 ms past a 1 s budget with one reserve), hence RUIN_FINISH_RESERVES of them.
    # A MIP incumbent worth more than the best plan, handed over meanwhile, is placed at once
    # (at short budgets the end of ruin and recreate leaves no time for it); ruin and recreate
    # then goes on where it stopped, or from the placed plan when that is better.
    ruin_end = clock.end - clock.deadline.finishes(RUIN_FINISH_RESERVES)
    ruin = _ruin(run, ruin_end, side is not None, None)
    # The priced passes once ruin and recreate has stalled (its work limit), for other
    # starting points; ruin and recreate again from a better one, or on where it stopped.
    # Before ruin and recreate they took a third to a half of a 1 s budget and gained
    # nothing after the guide's placement (docs/benchmarks.md, "Ruin before the priced passes").
    run_priced(run, start, time.monotonic() + PRICED_SHARE * max(end - time.monotonic(), 0.0))
    one_core = side is None and exact
    if one_core:
        # One core: the MIP before the second ruin and recreate, its choice placed at once.
        # After the whole search, the MIP had 0.2 s of a 2 s call on 64-node snapshots (the
        # second ruin and recreate took 0.5 s for nothing), and the plan stayed the
        # heuristic's, 0.1 % below the optimum that two threads reach (docs/benchmarks.md,
        # "one thread against two").
        mip()
        place_pending(run)
    ruin = _ruin(run, ruin_end, side is not None, ruin)
    if one_core:  # the rest of the exact side after the search
        if lns:
            run_lns(run, time.monotonic() + s.lns_share_one_core * (end - time.monotonic()))
        full_model(1)
        place_pending(run)
        return
    if lns:
        run_lns(run, end, guides=True)
    if side is not None:
        while side.is_alive() and clock.left() > run.extract_seconds:
            side.join(timeout=0.05)
            place_pending(run)
        place_pending(run)
        if side.is_alive():
            why = "cancelled" if clock.stopped() else "ran past the deadline"
            incumbent.note(f"the exact side {why}; its result is ignored")
            incumbent.close()


def _ruin(
    run: SolveRun, until: float, side: bool, ruin: RuinProgress | None
) -> RuinProgress | None:
    """Ruin and recreate (resumed from `ruin`), each MIP incumbent handed over meanwhile placed
    at once and ruin and recreate resumed after it."""
    ruin = run_ruin(run, until, yield_to_guides=side, resume=ruin)
    while place_pending(run):
        ruin = run_ruin(run, until, yield_to_guides=True, resume=ruin)
    return ruin
