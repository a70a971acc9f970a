"""Sparse rows as numpy arrays (CSR) and the big-M rewriting of indicator rows.

The formulation keeps its constraints as CSR blocks (``solver.exact.milp``); backends load
them in bulk. Helpers here gather rows and rewrite indicator rows as plain linear rows with the
tightest M the variable bounds allow. Variable indices are int32 (what HiGHS takes, and half
the memory: on large models the cost is in touching memory, not in arithmetic).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
VarArray = npt.NDArray[np.int32]
"""Variable indices in rows."""
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NO_ENFORCE = -1
"""``enforce`` of a row that always holds."""

PLAIN, UPPER, LOWER = 0, 1, 2
"""``Rows.side``: a row as it is, or the upper or lower big-M side of an indicator row."""


def ints(values: npt.ArrayLike) -> IntArray:
    return np.asarray(values, dtype=np.int64)


def var_ints(values: npt.ArrayLike) -> VarArray:
    return np.asarray(values, dtype=np.int32)


def floats(values: npt.ArrayLike) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def starts(counts: IntArray) -> IntArray:
    """CSR pointer (length n + 1) of groups of the given sizes."""
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def ragged_arange(counts: IntArray) -> IntArray:
    """0 .. counts[k] - 1 for each k, concatenated: positions within consecutive groups."""
    total = int(counts.sum())
    out = np.ones(total, dtype=np.int64)
    nonempty = counts > 0
    first = starts(counts)[:-1][nonempty]
    if first.size:
        # Each group restarts at 0: the step into its first item undoes the previous group.
        out[first[1:]] = 1 - counts[nonempty][:-1]
        out[0] = 0
        np.cumsum(out, out=out)
    return out


def gather(indptr: IntArray, rows: IntArray) -> tuple[IntArray, IntArray]:
    """(new indptr, positions into the old entry arrays) of the rows `rows`, in that order."""
    counts = indptr[rows + 1] - indptr[rows]
    new_indptr = starts(counts)
    positions = np.repeat(indptr[rows] - new_indptr[:-1], counts)
    positions += np.arange(positions.size, dtype=np.int64)
    return new_indptr, positions


@dataclass(frozen=True)
class Rows:
    """Rows ``lo <= sum(coefs * x[indices]) <= hi`` in CSR form, each only when its ``enforce``
    binary is 1 (``NO_ENFORCE``: always). ``source`` is the constraint each row comes from and
    ``side`` says how (PLAIN, or the UPPER/LOWER big-M side of an indicator)."""

    indptr: IntArray
    indices: VarArray
    coefs: IntArray
    lo: FloatArray
    hi: FloatArray
    enforce: IntArray
    source: IntArray
    side: npt.NDArray[np.int8]

    @property
    def num_rows(self) -> int:
        return int(self.lo.size)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def terms(self, row: int) -> tuple[tuple[int, int], ...]:
        a, b = int(self.indptr[row]), int(self.indptr[row + 1])
        return tuple(zip(self.indices[a:b].tolist(), self.coefs[a:b].tolist(), strict=True))

    @staticmethod
    def concat(parts: list[Rows]) -> Rows:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return empty_rows()
        counts = np.concatenate([np.diff(p.indptr) for p in parts])
        return Rows(
            starts(counts),
            np.concatenate([p.indices for p in parts], dtype=np.int32),
            np.concatenate([p.coefs for p in parts], dtype=np.int64),
            np.concatenate([p.lo for p in parts], dtype=np.float64),
            np.concatenate([p.hi for p in parts], dtype=np.float64),
            np.concatenate([p.enforce for p in parts], dtype=np.int64),
            np.concatenate([p.source for p in parts], dtype=np.int64),
            np.concatenate([p.side for p in parts]).astype(np.int8),
        )


def empty_rows() -> Rows:
    none = np.zeros(0, dtype=np.int64)
    return Rows(
        np.zeros(1, dtype=np.int64),
        var_ints(none),
        none,
        floats(none),
        floats(none),
        none,
        none,
        none.astype(np.int8),
    )


def by_length(rows: IntArray, lengths: IntArray) -> list[tuple[int, IntArray]]:
    """`rows` split by their length (lengths[k] is rows[k]'s), each part in the given order."""
    order = np.argsort(lengths, kind="stable")
    values, first, count = np.unique(lengths[order], return_index=True, return_counts=True)
    return [
        (int(v), ints(rows[order[a : a + c]]))
        for v, a, c in zip(values.tolist(), first.tolist(), count.tolist(), strict=True)
    ]


def big_m(
    rows: Rows, lb: FloatArray, ub: FloatArray, names: Callable[[], list[str]] | None = None
) -> Rows:
    """Every row as plain linear rows, indicators rewritten with big-M.

    ``enforce = b`` and ``lo <= e <= hi`` become ``e + (U - hi) b <= U`` (side UPPER) and
    ``e - (lo - L) b >= L`` (side LOWER), where [L, U] is the range of ``e`` over the variable
    bounds: the tightest big-M that the bounds allow. A side the bounds already imply gives no
    row. Rows keep their order, an upper side before its lower side. Without indicators the
    rows are returned as they are (no copy). Rows are handled a column of terms at a time, per
    row length: short temporaries, which is what makes this fast on large models.
    """
    indicator = rows.enforce != NO_ENFORCE
    if not indicator.any():
        return rows
    n = rows.num_rows
    lengths = np.diff(rows.indptr)
    first = rows.indptr[:-1]
    low, high = np.zeros(n), np.zeros(n)
    groups = by_length(ints(np.flatnonzero(indicator)), lengths[indicator])
    for length, group in groups:
        at, enforce = first[group], rows.enforce[group]
        lo_sum, hi_sum = np.zeros(group.size), np.zeros(group.size)
        for c in range(length):  # term by term, in row order, as a Python loop would add them
            v, k = rows.indices[at + c], rows.coefs[at + c]
            if np.any(v == enforce):  # the indicator is in its own row: terms to merge
                return _big_m_merging(rows, *expression_ranges(rows, lb, ub))
            lo_sum += k * np.where(k > 0, lb[v], ub[v])
            hi_sum += k * np.where(k > 0, ub[v], lb[v])
        low[group], high[group] = lo_sum, hi_sum
    bad = indicator & ~(np.isfinite(low) & np.isfinite(high))
    if bad.any():
        which = int(rows.source[np.flatnonzero(bad)[0]])
        name = names()[which] if names is not None else f"row {which}"
        raise ValueError(f"{name}: an indicator needs bounded variables for big-M")
    up = indicator & (rows.hi < high)
    down = indicator & (rows.lo > low)
    m_up = np.ceil(high - rows.hi, where=up, out=np.zeros(n))  # integer coefficients: = U - hi
    m_down = np.ceil(rows.lo - low, where=down, out=np.zeros(n))
    src = np.repeat(np.arange(n), np.where(indicator, up.astype(np.int64) + down, 1))
    second = np.zeros(src.size, dtype=bool)
    second[1:] = src[1:] == src[:-1]
    side = np.where(~indicator[src], PLAIN, np.where(up[src] & ~second, UPPER, LOWER))
    extra = side != PLAIN
    indptr = starts(lengths[src] + extra)
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    coefs = np.empty(int(indptr[-1]), dtype=np.int64)
    plain = np.flatnonzero(~extra)
    if plain.size:  # copied as they are
        count = lengths[src[plain]]
        within = ragged_arange(count)
        to = np.repeat(indptr[plain], count) + within
        taken = np.repeat(first[src[plain]], count) + within
        indices[to], coefs[to] = rows.indices[taken], rows.coefs[taken]
    sides = ints(np.flatnonzero(extra))
    for length, out in by_length(sides, lengths[src[sides]]):
        r, at = src[out], indptr[out]
        for c in range(length):
            indices[at + c], coefs[at + c] = rows.indices[first[r] + c], rows.coefs[first[r] + c]
        indices[at + length] = rows.enforce[r]
        coefs[at + length] = np.where(side[out] == UPPER, m_up[r], -m_down[r])
    lo = np.where(side == UPPER, -np.inf, rows.lo[src] - np.where(side == LOWER, m_down[src], 0))
    hi = np.where(side == LOWER, np.inf, rows.hi[src] + np.where(side == UPPER, m_up[src], 0))
    return Rows(
        indptr,
        indices,
        coefs,
        floats(lo),
        floats(hi),
        ints(np.broadcast_to(np.int64(NO_ENFORCE), (src.size,))),  # plain rows: no indicator
        rows.source[src],
        side.astype(np.int8),
    )


def expression_ranges(rows: Rows, lb: FloatArray, ub: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Smallest and largest value of each row's sum(coef * var) over the variables' bounds."""
    coef = rows.coefs.astype(np.float64)
    positive = rows.coefs > 0
    low_end = np.where(positive, lb[rows.indices], ub[rows.indices])
    high_end = np.where(positive, ub[rows.indices], lb[rows.indices])
    row_of = np.repeat(np.arange(rows.num_rows), np.diff(rows.indptr))
    low = np.bincount(row_of, weights=coef * low_end, minlength=rows.num_rows)
    high = np.bincount(row_of, weights=coef * high_end, minlength=rows.num_rows)
    return floats(low), floats(high)


def _big_m_merging(rows: Rows, low: FloatArray, high: FloatArray) -> Rows:
    """big_m where an indicator appears in its own row: one row at a time, terms merged."""
    parts: list[tuple[list[tuple[int, int]], float, float, int, int]] = []
    for r in range(rows.num_rows):
        terms = list(rows.terms(r))
        lo, hi, b = float(rows.lo[r]), float(rows.hi[r]), int(rows.enforce[r])
        source = int(rows.source[r])
        if b == NO_ENFORCE:
            parts.append((terms, lo, hi, source, PLAIN))
            continue
        if hi < high[r]:
            m = int(np.ceil(high[r] - hi))
            parts.append((_merge(terms, b, m), -np.inf, hi + m, source, UPPER))
        if lo > low[r]:
            m = int(np.ceil(lo - low[r]))
            parts.append((_merge(terms, b, -m), lo - m, np.inf, source, LOWER))
    indptr = starts(ints([len(t) for t, *_ in parts]))
    return Rows(
        indptr,
        var_ints([v for t, *_ in parts for v, _ in t]),
        ints([c for t, *_ in parts for _, c in t]),
        floats([p[1] for p in parts]),
        floats([p[2] for p in parts]),
        np.full(len(parts), NO_ENFORCE, dtype=np.int64),
        ints([p[3] for p in parts]),
        np.asarray([p[4] for p in parts], dtype=np.int8),
    )


def _merge(terms: list[tuple[int, int]], var: int, coef: int) -> list[tuple[int, int]]:
    out = dict(terms)
    out[var] = out.get(var, 0) + coef
    return [(v, c) for v, c in out.items() if c]
