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
        self.choices: list[list[int]] = []
        """The columns of each `choice` row (at most one of them is taken)."""

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

    def choice(self, columns: list[int]) -> None:
        """A row taking at most one of `columns` (each in [0, 1]; a job's configurations).
        Two of them alike in every row are one choice to the solver: `solve` keeps the one
        worth more (see `undominated`)."""
        self.choices.append(list(columns))
        self.row([(col, 1.0) for col in columns], hi=1.0)

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
        kept = undominated(self, integer or [])
        model = _Compact(self, kept)
        h = new_highs()
        h.setOptionValue("threads", 1)
        n = kept.size
        h.addVars(n, model.lower, model.upper)
        h.changeColsCost(n, np.arange(n, dtype=np.int32), model.cost)
        # Presolve off: the LP runs 3-5x faster. The MIP at 1,024 nodes ran 8.8 s on a 4 s limit
        # with presolve (its first round of cuts polled neither its limit nor its interrupt)
        # and 3.9-4.4 s without, found better choices sooner, and proved the 64-128-node
        # optima 1.3-3x faster (docs/benchmarks.md). What presolve did best, dropping a job's
        # configurations that another of its own matches in every row at a higher value (the
        # `large` family's MIP: 31,120 choices, 6,167 left, proven in 0.5 s where it ran 20 s
        # unproven), `undominated` does before loading.
        h.setOptionValue("presolve", "off")
        if integer:
            h.setOptionValue("mip_rel_gap", 0.0)  # a proof, not HiGHS's default 1e-4
            h.setOptionValue("mip_abs_gap", 1e-9)
            cols = model.columns(integer)
            kinds = np.full(cols.size, highspy.HighsVarType.kInteger)
            h.changeColsIntegrality(cols.size, cols, kinds)
        h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        if self.row_lo:
            h.addRows(
                len(self.row_lo),
                np.array(self.row_lo),
                np.array(self.row_hi),
                model.index.size,
                model.starts,
                model.index,
                model.value,
            )
        if stop is not None:
            stop_on_request(h, stop)
        if integer and on_solution is not None:

            def improved(event: highspy.highs.HighsCallbackEvent) -> None:
                out = event.data_out
                if out is not None and out.mip_solution is not None:
                    values = model.expand(np.array(out.mip_solution, dtype=np.float64))
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
        values = None
        if info.primal_solution_status == 2:
            values = model.expand(np.array(h.getSolution().col_value)).tolist()
        h.clear()
        return status, bound, values


def undominated(lp: ArrayLp, integer: list[int]) -> npt.NDArray[np.int64]:
    """The columns worth loading, ascending: all but those of a `choice` row that another of
    its columns matches (bounds [0, 1], integrality and every row's coefficient) at a cost at
    least as high (at equal cost, the later is dropped).

    Dropping them changes neither the LP's nor the MIP's optimum: both columns are in the
    choice row, so a solution's value on the dropped one moves to its match, every row's
    activity stays and the objective does not fall. Without a power budget a job's
    configurations on one GPU type and count differ only in value (their clocks): in the
    `large` family, four columns of five.
    """
    n = len(lp.cost)
    everything = np.arange(n, dtype=np.int64)
    if not lp.choices:
        return everything
    group = np.full(n, -1, dtype=np.int64)
    for g, columns in enumerate(lp.choices):
        group[columns] = g
    lower, upper, cost = np.array(lp.lower), np.array(lp.upper), np.array(lp.cost)
    is_integer = np.zeros(n, dtype=np.int64)
    is_integer[integer] = 1
    nnz = len(lp.index)
    starts = np.array([*lp.starts, nnz], dtype=np.int64)
    rows = np.repeat(np.arange(len(lp.starts), dtype=np.int64), np.diff(starts))
    cols = np.array(lp.index, dtype=np.int64)
    vals = np.array(lp.value)
    # Fingerprints find the candidates; each drop is then checked coefficient by coefficient.
    weights = np.random.default_rng(0).random((2, len(lp.starts)))
    print1 = np.bincount(cols, weights=vals * weights[0][rows], minlength=n)
    print2 = np.bincount(cols, weights=vals * weights[1][rows], minlength=n)
    count = np.bincount(cols, minlength=n)
    candidate = np.flatnonzero((group >= 0) & (lower == 0.0) & (upper == 1.0))
    if candidate.size < 2:
        return everything
    keys = (group, is_integer, count, print1, print2)
    order = candidate[
        np.lexsort((candidate, -cost[candidate], *(k[candidate] for k in keys[::-1])))
    ]
    same = np.ones(order.size - 1, dtype=bool)
    for key in keys:
        same &= key[order[1:]] == key[order[:-1]]
    if not same.any():
        return everything
    # Each column's match is the first of its run (the highest cost, then the lowest index).
    run_start = np.concatenate(([0], np.flatnonzero(~same) + 1))
    first = np.repeat(order[run_start], np.diff(np.concatenate((run_start, [order.size]))))
    dropped, match = order[order != first], first[order != first]
    by_column = np.argsort(cols, kind="stable")
    col_start = np.concatenate(([0], np.cumsum(count)))
    sizes = count[dropped]
    offsets = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    a = by_column[np.repeat(col_start[dropped], sizes) + offsets]
    b = by_column[np.repeat(col_start[match], sizes) + offsets]
    equal = (rows[a] == rows[b]) & (vals[a] == vals[b])
    pair_equal = np.ones(dropped.size, dtype=bool)
    has_rows = sizes > 0
    if has_rows.any():
        firsts = (np.cumsum(sizes) - sizes)[has_rows]
        pair_equal[has_rows] = np.logical_and.reduceat(equal, firsts)
    keep = np.ones(n, dtype=bool)
    keep[dropped[pair_equal]] = False
    return np.flatnonzero(keep)


class _Compact:
    """`lp`'s arrays over its `kept` columns, renumbered; values mapped back with zeros."""

    def __init__(self, lp: ArrayLp, kept: npt.NDArray[np.int64]) -> None:
        n = len(lp.cost)
        self.n = n
        self.kept = kept
        self.lower = np.array(lp.lower)[kept]
        self.upper = np.array(lp.upper)[kept]
        self.cost = np.array(lp.cost)[kept]
        self.renumber = np.full(n, -1, dtype=np.int64)
        self.renumber[kept] = np.arange(kept.size)
        if kept.size == n:  # nothing dropped (every power-capped model): the rows as they are
            self.starts = np.array(lp.starts, dtype=np.int32)
            self.index = np.array(lp.index, dtype=np.int32)
            self.value = np.array(lp.value)
            return
        index = self.renumber[np.array(lp.index, dtype=np.int64)]
        on = index >= 0
        ends = np.array([*lp.starts, len(lp.index)], dtype=np.int64)
        rows = np.repeat(np.arange(len(lp.starts)), ends[1:] - ends[:-1])
        per_row = np.bincount(rows[on], minlength=len(lp.starts))
        self.starts = np.concatenate(([0], np.cumsum(per_row)[:-1])).astype(np.int32)
        self.index = index[on].astype(np.int32)
        self.value = np.array(lp.value)[on]

    def columns(self, columns: list[int]) -> npt.NDArray[np.int32]:
        """`columns` that were kept, renumbered."""
        mapped = self.renumber[np.array(columns, dtype=np.int64)]
        return mapped[mapped >= 0].astype(np.int32)

    def expand(self, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """A solution of the loaded columns as one of every column (the dropped at 0)."""
        full = np.zeros(self.n)
        full[self.kept] = values
        return full
