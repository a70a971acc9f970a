"""AUTO's improvement phase: LNS around the best plan until the end; beside it (when cores
allow) or before and after it, the aggregated model as a MIP (a tighter bound, an integral
guide) and the full model if it is small enough to build in time.

The solvers release the GIL, so a thread gives the exact side a core of its own from the start;
the aggregated LP's choice is placed meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from solver.core.steps import SolveRun
from solver.core.steps.bound import refine_bound
from solver.core.steps.full import solve_full_model
from solver.core.steps.guided import place_guided
from solver.core.steps.lns import run_lns
from solver.domain import Backend, Config


def search(run: SolveRun, full_size: int, choice: Mapping[str, Config]) -> None:
    """Improve the best plan until the end of the run's clock or a closed gap."""
    s, clock, incumbent = run.settings, run.clock, run.incumbent
    end = clock.end - s.extract_seconds
    fits = full_size <= s.full_model_max_variables
    small = full_size <= s.in_process_max_variables
    backend = Backend[s.auto_exact_backend]
    if not fits:
        incumbent.note(f"full model skipped: ~{full_size} variables")

    def exact_side(threads: int) -> None:
        refine_bound(run)
        if fits and not incumbent.done():
            solve_full_model(run, full_size, backend, threads, in_process=small)

    if run.threads < 2:
        place_guided(run, choice)
        refine_bound(run)
        run_lns(run, time.monotonic() + s.lns_share_one_core * (end - time.monotonic()))
        if fits and not incumbent.done():
            solve_full_model(run, full_size, backend, 1, in_process=small)
        return
    # Not a daemon: a solver thread still inside HiGHS when the interpreter exits would abort
    # the process; after a stop it ends within its solver's next interrupt check.
    exact = threading.Thread(
        target=exact_side, args=(run.threads - 1,), name="dsfro-exact", daemon=False
    )
    exact.start()
    place_guided(run, choice)
    run_lns(run, end, stop=lambda: clock.stopped() or (not exact.is_alive() and incumbent.done()))
    exact.join(timeout=max(clock.left(), 0.0))
    if exact.is_alive():
        why = "cancelled" if clock.stopped() else "ran past the deadline"
        incumbent.note(f"the exact side {why}; its result is ignored")
        incumbent.close()
