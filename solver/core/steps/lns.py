"""Large-neighbourhood search on the full model from the best plan so far (solver.exact.lns),
in slices between which the aggregated MIP's latest incumbent is placed."""

from __future__ import annotations

import time

from solver.core.steps import SolveRun
from solver.core.steps.guided import place_guided
from solver.domain import Plan
from solver.exact.lns import MIN_SLICE_SECONDS, SUB_BACKEND, Lns

GUIDE_SEARCH_SECONDS = 0.2
"""Local search after placing a MIP incumbent: its gain comes in the first tenth of a second
(measured on hetero-power snapshots of 64-256 nodes), the rest is LNS's."""


def run_lns(run: SolveRun, end: float, *, guides: bool = False) -> None:
    """LNS until `end` (a time.monotonic() instant), the clock stopped or the gap closed; each
    better plan is offered as it is found. With `guides`, a MIP incumbent handed over
    meanwhile is placed first and LNS goes on from the better plan."""
    incumbent = run.incumbent
    if end - time.monotonic() < 2 * run.extract_seconds:
        place_pending(run)
        return
    with run.lock:
        assert incumbent.best is not None
        search = Lns(run.problem, run.configs, incumbent.best)
        if run.guide:
            search.set_guide(run.guide)
        run.lns = search

    def offer(plan: Plan) -> None:
        incumbent.offer(plan, "LNS", SUB_BACKEND)

    def stop() -> bool:
        return run.clock.stopped() or incumbent.done() or (guides and run.has_pending())

    while not (run.clock.stopped() or incumbent.done()):
        if guides and place_pending(run):
            assert incumbent.best is not None
            search.adopt(incumbent.best)
        if time.monotonic() + MIN_SLICE_SECONDS >= end:
            break
        search.run(end, on_improve=offer, stop=stop)
        if not guides or (search.exhausted and not run.has_pending()):
            break
    with run.lock:
        run.lns = None
    incumbent.note(search.stats.summary())


def place_pending(run: SolveRun) -> bool:
    """Place the MIP incumbent handed over since the last look, if any; whether there was."""
    guide = run.take_pending()
    if guide is None:
        return False
    place_guided(run, guide, "MIP-guided", GUIDE_SEARCH_SECONDS)
    return True
