"""Large-neighbourhood search on the full model from the best plan so far (solver.exact.lns)."""

from __future__ import annotations

import time
from collections.abc import Callable

from solver.core.steps import SolveRun
from solver.domain import Plan
from solver.exact.lns import SUB_BACKEND, Lns


def run_lns(run: SolveRun, end: float, stop: Callable[[], bool] | None = None) -> None:
    """LNS until `end` (a time.monotonic() instant) or `stop()` (default: the clock stopped
    or the gap closed); each better plan is offered as it is found."""
    if end - time.monotonic() < 2 * run.settings.extract_seconds:
        return
    incumbent = run.incumbent
    with run.lock:
        assert incumbent.best is not None
        search = Lns(run.problem, run.configs, incumbent.best)
        if run.guide:
            search.set_guide(run.guide)
        run.lns = search
    def offer(plan: Plan) -> None:
        incumbent.offer(plan, "LNS", SUB_BACKEND)

    search.run(
        end,
        on_improve=offer,
        stop=stop if stop is not None else lambda: run.clock.stopped() or incumbent.done(),
    )
    incumbent.note(search.stats.summary())
