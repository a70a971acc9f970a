"""HiGHS backend: the formulation as a MILP passed to highspy directly (no modelling layer).

The whole model goes in with one ``passModel`` call on the formulation's arrays (rows in CSR
form, no Python loop per row); indicators become big-M rows with the tightest M the variable
bounds allow (``Formulation.linear_blocks``). The
objective keeps its exact floating-point coefficients; the bound is HiGHS's proven dual bound
plus an explicit margin for its floating-point tolerances.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping

import highspy
import numpy as np

from solver.exact.backends.base import (
    DEFAULT_OPTIONS,
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    outcome,
)
from solver.exact.index import Values, dense
from solver.exact.milp import Formulation
from solver.exact.rows import floats

BOUND_MARGIN = 1e-7
"""Relative margin (of max(1, |bound|)) added to HiGHS's dual bound: its LP relaxations are
solved to primal/dual feasibility tolerances of 1e-7, so the dual bound is exact only up to
about that much per unit of objective. Small enough to leave the 1e-6 optimality test intact."""

ABSOLUTE_GAP = 1e-9
"""mip_abs_gap: HiGHS's default (1e-6) would stop short of the relative gap asked for on
objectives near 0; the relative gap is what the service reports."""

_banner_lock = threading.Lock()
_banner_done = False


def new_highs() -> highspy.Highs:
    """A silent Highs instance.

    The first instance of a process prints HiGHS's banner on file descriptor 1 before any
    option can be set; it would land in ``dsfro solve --json`` output. It is sent to /dev/null.
    """
    global _banner_done
    with _banner_lock:
        if not _banner_done:
            sys.stdout.flush()
            saved = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
                h = highspy.Highs()  # type: ignore[no-untyped-call]
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(devnull)
            _banner_done = True
        else:
            h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    return h


def run_on_pool(h: highspy.Highs) -> bool:
    """Run `h`; whether it ran on HiGHS's existing thread pool instead of its own thread count.

    HiGHS's thread pool is process-wide and sized by the process's first solve; a later solve
    asking for another size is refused before it starts (kError, model status not set). The
    solve is then run on the pool as it is (``threads`` 0), never left unsolved."""
    if h.run() == highspy.HighsStatus.kError and h.getModelStatus() == _NOTSET:
        h.setOptionValue("threads", 0)
        h.run()
        return True
    return False


def stop_at(end: float, stop: Callable[[], bool] | None = None) -> Callable[[], bool]:
    """True from `end` (a time.monotonic() instant) on, or once `stop()` is."""
    return lambda: time.monotonic() >= end or (stop is not None and stop())


def stop_on_request(h: highspy.Highs, stop: Callable[[], bool]) -> None:
    """Interrupt `h` (as at a time limit) once `stop()` is true: HiGHS polls its interrupt
    callbacks in the simplex, the interior point method and branch and bound."""

    def interrupt(event: highspy.highs.HighsCallbackEvent) -> None:
        if event.data_in is not None and stop():
            event.data_in.user_interrupt = True

    for callback in (h.cbSimplexInterrupt, h.cbIpmInterrupt, h.cbMipInterrupt):
        callback.subscribe(interrupt)


def load(h: highspy.Highs, f: Formulation) -> int:
    """Put the formulation into `h` (maximised) with one ``passModel`` call on its arrays (rows
    in CSR form, joined once into the types HiGHS takes); returns the number of rows.

    ``passModel`` takes the whole model at once; it loads a large model about twice as fast as
    ``addVars``, ``changeColsIntegrality``, ``changeColsCost`` and ``addRows``.
    """
    n = f.num_variables
    if not n:
        h.changeObjectiveOffset(f.offset)
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        return 0
    inf = highspy.kHighsInf
    lower, upper, integer = f.bounds()
    blocks = f.linear_blocks()
    num_rows = sum(b.num_rows for b in blocks)
    row_starts = np.empty(num_rows, dtype=np.int32)
    row_lower, row_upper = np.empty(num_rows), np.empty(num_rows)
    first = offset = 0
    for b in blocks:  # one copy of the rows, straight into the types HiGHS takes
        row_starts[first : first + b.num_rows] = b.indptr[:-1] + offset
        row_lower[first : first + b.num_rows] = b.lo
        row_upper[first : first + b.num_rows] = b.hi
        first, offset = first + b.num_rows, offset + b.nnz
    indices = np.concatenate([np.zeros(0, np.int32)] + [b.indices for b in blocks], dtype=np.int32)
    status = h.passModel(
        n,
        num_rows,
        indices.size,
        int(highspy.MatrixFormat.kRowwise),
        int(highspy.ObjSense.kMaximize),
        f.offset,
        f.objective_vector(),
        np.maximum(lower, -inf),
        np.minimum(upper, inf),
        np.maximum(row_lower, -inf, out=row_lower),
        np.minimum(row_upper, inf, out=row_upper),
        row_starts,
        indices,
        np.concatenate([floats([])] + [b.coefs for b in blocks], dtype=np.float64),
        np.where(integer, int(highspy.HighsVarType.kInteger), 0).astype(np.int32),
    )
    if status == highspy.HighsStatus.kError:
        raise ValueError("HiGHS refused the model")
    return num_rows


def dual_bound(h: highspy.Highs, has_integers: bool, status: SolverStatus) -> float | None:
    """HiGHS's proven upper bound plus BOUND_MARGIN; None where it proved none."""
    info = h.getInfo()
    if status is SolverStatus.INFEASIBLE or status is SolverStatus.ERROR:
        return None
    if has_integers and info.mip_node_count >= 0:
        bound = float(info.mip_dual_bound)
    elif status is SolverStatus.OPTIMAL:
        bound = float(info.objective_function_value)  # an LP (or empty model) solved
    else:
        return None
    if not math.isfinite(bound):
        return None
    return bound + BOUND_MARGIN * max(1.0, abs(bound))


class HighsBackend:
    name = "HiGHS"

    def solve(
        self,
        formulation: Formulation,
        *,
        hint: Mapping[int, float] | None = None,
        options: ExactOptions = DEFAULT_OPTIONS,
    ) -> ExactOutcome:
        start = time.monotonic()
        h = new_highs()
        try:
            load(h, formulation)
            h.setOptionValue(
                "time_limit", max(options.time_limit - (time.monotonic() - start), 0.001)
            )
            h.setOptionValue("mip_rel_gap", options.relative_gap)
            h.setOptionValue("mip_abs_gap", ABSOLUTE_GAP)
            h.setOptionValue("random_seed", options.seed)
            h.setOptionValue("threads", max(options.threads, 1))
            if hint:
                start_values = dense(hint, formulation.num_variables)
                idx = np.arange(start_values.size, dtype=np.int32)
                if not isinstance(hint, Values):  # a partial start: only the values given
                    idx = np.array(list(hint), dtype=np.int32)
                    start_values = start_values[idx]
                h.setSolution(idx.size, idx, start_values)
            # HiGHS checks its own time limit between phases and nodes, not within its root's
            # presolve and cuts (a 3 s call answered after 3.37 s, "0 nodes"); its interrupt
            # callbacks are polled inside the simplex, so the limit is enforced there too.
            stop_on_request(h, stop_at(start + options.time_limit, options.stop))
            detail = "on HiGHS's existing thread pool" if run_on_pool(h) else ""
            return self._outcome(h, formulation, start, detail)
        finally:
            h.clear()

    def _outcome(self, h: highspy.Highs, f: Formulation, start: float, detail: str) -> ExactOutcome:
        model_status = h.getModelStatus()
        info = h.getInfo()
        status = _STATUS.get(model_status, SolverStatus.ERROR)
        if status is SolverStatus.ERROR:
            detail = f"HiGHS model status {h.modelStatusToString(model_status)}"
        values = None
        if info.primal_solution_status == _FEASIBLE_SOLUTION or model_status == _EMPTY:
            values = tuple(h.getSolution().col_value) if f.num_variables else ()
        has_integers = bool(f.bounds()[2].any())
        bound = dual_bound(h, has_integers, status)
        proven = has_integers and info.mip_node_count >= 0 and math.isfinite(info.mip_gap)
        gap = f"gap {info.mip_gap:.2g}, " if proven else ""
        nodes = f"{gap}{max(info.mip_node_count, 0)} nodes"
        detail = f"{nodes}; {detail}" if detail else nodes
        return outcome(status, values, bound, time.monotonic() - start, detail)


_NOTSET = highspy.HighsModelStatus.kNotset
_EMPTY = highspy.HighsModelStatus.kModelEmpty
_FEASIBLE_SOLUTION = 2
"""HiGHS's kSolutionStatusFeasible."""
_STATUS: dict[highspy.HighsModelStatus, SolverStatus] = {
    highspy.HighsModelStatus.kOptimal: SolverStatus.OPTIMAL,
    _EMPTY: SolverStatus.OPTIMAL,
    highspy.HighsModelStatus.kInfeasible: SolverStatus.INFEASIBLE,
    # Every variable is bounded, so "unbounded or infeasible" is infeasible.
    highspy.HighsModelStatus.kUnboundedOrInfeasible: SolverStatus.INFEASIBLE,
    # Limits: FEASIBLE with a solution, NO_SOLUTION without (backends.outcome).
    highspy.HighsModelStatus.kTimeLimit: SolverStatus.FEASIBLE,
    highspy.HighsModelStatus.kIterationLimit: SolverStatus.FEASIBLE,
    highspy.HighsModelStatus.kSolutionLimit: SolverStatus.FEASIBLE,
    highspy.HighsModelStatus.kInterrupt: SolverStatus.FEASIBLE,
    highspy.HighsModelStatus.kObjectiveBound: SolverStatus.FEASIBLE,
    highspy.HighsModelStatus.kObjectiveTarget: SolverStatus.FEASIBLE,
}
"""HiGHS model status -> shared status; anything else is ERROR."""
