"""A linear or mixed-integer program collected as arrays and solved by HiGHS in one load: the
aggregated model's (solver.search.bound) container, kept apart from what it models."""

from __future__ import annotations

import time
from collections.abc import Callable

import highspy
import numpy as np
import numpy.typing as npt

from solver.exact.backends.highs import new_highs, run_on_pool, stop_on_request

INF = highspy.kHighsInf


class ArrayLp:
    """Columns and rows collected as arrays, then loaded into HiGHS in two bulk calls."""

    def __init__(self) -> None:
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.cost: list[float] = []
        self.row_lo: list[float] = []
        self.row_hi: list[float] = []
        self.starts: list[int] = []
        self.index: list[int] = []
        self.value: list[float] = []

    def column(self, cost: float, lower: float = 0.0, upper: float = 1.0) -> int:
        self.lower.append(lower)
        self.upper.append(upper)
        self.cost.append(cost)
        return len(self.cost) - 1

    def row(self, terms: list[tuple[int, float]], lo: float = -INF, hi: float = INF) -> None:
        self.starts.append(len(self.index))
        self.row_lo.append(lo)
        self.row_hi.append(hi)
        for v, c in terms:
            self.index.append(v)
            self.value.append(c)

    def solve(
        self,
        integer: list[int] | None = None,
        until: float | None = None,
        stop: Callable[[], bool] | None = None,
        on_solution: Callable[[npt.NDArray[np.float64], float], None] | None = None,
        on_bound: Callable[[float], None] | None = None,
    ) -> tuple[highspy.HighsModelStatus, float | None, list[float] | None]:
        """Status, proven upper bound (the LP optimum, or the MIP's dual bound) and values
        (None without a solution). `integer`: columns that must be integral (a MIP), whose
        every improving solution goes to `on_solution(values, objective)` as it is found.
        `until` (a time.monotonic() instant) ends the solve, loading the model included:
        HiGHS's time limit counts from its run, and loading a MIP of 1,024 nodes took 0.1 s.
        `on_bound(bound)` is told the MIP's dual bound each time it falls, as HiGHS polls its
        interrupt: proven before the MIP returns, which can be long after its limit (a
        heuristic's sub-MIP polls neither; at 1,024 nodes, 0.5-0.9 s past it).

        A model with a non-finite cost or coefficient is not solved (kModelError, no bound):
        validation keeps requests from making one, and HiGHS could hang on it past any limit.
        """
        if not (
            np.isfinite(self.cost).all()
            and np.isfinite(self.value).all()
            and np.isfinite(self.lower).all()
        ):
            return highspy.HighsModelStatus.kModelError, None, None
        h = new_highs()
        h.setOptionValue("threads", 1)
        n = len(self.cost)
        h.addVars(n, np.array(self.lower), np.array(self.upper))
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(self.cost))
        # Presolve off: the LP runs 3-5x faster. The MIP at 1,024 nodes ran 8.8 s on a 4 s limit
        # with presolve (its first round of cuts polled neither its limit nor its interrupt)
        # and 3.9-4.4 s without, found better choices sooner, and proved the 64-128-node
        # optima 1.3-3x faster (docs/benchmarks.md).
        h.setOptionValue("presolve", "off")
        if integer:
            h.setOptionValue("mip_rel_gap", 0.0)  # a proof, not HiGHS's default 1e-4
            h.setOptionValue("mip_abs_gap", 1e-9)
            cols = np.array(integer, dtype=np.int32)
            kinds = np.full(cols.size, highspy.HighsVarType.kInteger)
            h.changeColsIntegrality(cols.size, cols, kinds)
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        if self.row_lo:
            h.addRows(
                len(self.row_lo),
                np.array(self.row_lo),
                np.array(self.row_hi),
                len(self.index),
                np.array(self.starts, dtype=np.int32),
                np.array(self.index, dtype=np.int32),
                np.array(self.value),
            )
        if stop is not None:
            stop_on_request(h, stop)
        if integer and on_solution is not None:

            def improved(event: highspy.highs.HighsCallbackEvent) -> None:
                out = event.data_out
                if out is not None and out.mip_solution is not None:
                    values = np.array(out.mip_solution, dtype=np.float64, copy=True)
                    on_solution(values, float(out.objective_function_value))

            h.cbMipImprovingSolution.subscribe(improved)
        if integer and on_bound is not None:
            told = [INF]

            def tighter(event: highspy.highs.HighsCallbackEvent) -> None:
                out = event.data_out
                bound = INF if out is None else float(out.mip_dual_bound)
                if bound < told[0]:  # not the +inf before the root's LP
                    told[0] = bound
                    on_bound(bound)

            h.cbMipInterrupt.subscribe(tighter)
        if until is not None:
            h.setOptionValue("time_limit", max(until - time.monotonic(), 0.01))
        run_on_pool(h)
        status = h.getModelStatus()
        info = h.getInfo()
        bound: float | None = None
        if integer:
            if info.mip_node_count >= 0 and np.isfinite(info.mip_dual_bound):
                bound = float(info.mip_dual_bound)
        elif status == highspy.HighsModelStatus.kOptimal:
            bound = float(info.objective_function_value)
        values = list(h.getSolution().col_value) if info.primal_solution_status == 2 else None
        h.clear()
        return status, bound, values
