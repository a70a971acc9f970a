"""The small 0-1 programs of the baselines' own papers (Gavel's and Sia's allocation problems),
solved with HiGHS."""

from __future__ import annotations

import math
from collections.abc import Sequence

import highspy
import numpy as np

from solver.exact.backends.highs import new_highs, run_on_pool


def solve_max(
    gains: Sequence[float],
    rows: Sequence[tuple[Sequence[int], Sequence[float], float]],
    *,
    integer: bool = False,
    interior: bool = False,
    relative_gap: float = 0.0,
    time_limit_s: float = math.inf,
    upper: Sequence[float] | None = None,
) -> list[float] | None:
    """Maximise gains . x over 0 <= x <= 1 (``upper`` instead of 1 where given) and rows
    (columns, coefficients, right-hand side) of ``sum <= rhs`` with HiGHS; x binary if
    `integer` (to `relative_gap`). `interior`: the interior-point method without presolve or
    crossover, whose answer on a tied optimum is a central point of the optimal face rather
    than a vertex. None without a solution (the time
    limit reached before HiGHS found one)."""
    n = len(gains)
    if n == 0:
        return []
    h = new_highs()
    try:
        ub = np.ones(n) if upper is None else np.asarray(upper, dtype=np.float64)
        h.addVars(n, np.zeros(n), ub)
        h.changeColsCost(n, np.arange(n, dtype=np.int32), np.asarray(gains, dtype=np.float64))
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        if integer:
            h.changeColsIntegrality(
                n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger)
            )
        for cols, coefs, rhs in rows:
            if cols:
                h.addRow(
                    -highspy.kHighsInf,
                    rhs,
                    len(cols),
                    np.asarray(cols, dtype=np.int32),
                    np.asarray(coefs, dtype=np.float64),
                )
        if math.isfinite(time_limit_s):
            h.setOptionValue("time_limit", max(time_limit_s, 0.001))
        h.setOptionValue("mip_rel_gap", relative_gap)
        if interior:
            for option, value in (("solver", "ipm"), ("run_crossover", "off"), ("presolve", "off")):
                h.setOptionValue(option, value)
        run_on_pool(h)
        if h.getInfo().primal_solution_status != _FEASIBLE_SOLUTION:
            return None
        return [float(v) for v in h.getSolution().col_value]
    finally:
        h.clear()


_FEASIBLE_SOLUTION = 2
"""HiGHS's kSolutionStatusFeasible."""
