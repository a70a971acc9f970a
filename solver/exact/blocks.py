"""Assembling a family's variables and rows from parts, in the order the model lists them.

A family often interleaves kinds (per job: its ``tp`` variables, then its ``q`` variables; per
pair: ``node_used`` then ``rack_used``). Each kind is computed on its own with numpy and placed
at given positions of the family's block, so the model keeps one readable order without a
Python loop per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from solver.exact.milp import Formulation
from solver.exact.milp_parts import Keys
from solver.exact.rows import NO_ENFORCE, IntArray, ints, ragged_arange, starts


@dataclass(frozen=True)
class VarPart:
    """Variables of one kind at positions ``at`` of the block."""

    kind: str
    at: IntArray
    lb: npt.ArrayLike
    ub: npt.ArrayLike
    keys: Keys


@dataclass(frozen=True)
class RowPart:
    """Rows of one kind at positions ``at`` of the block; terms given row after row
    (``counts`` per row)."""

    kind: str
    at: IntArray
    counts: IntArray
    indices: IntArray
    coefs: IntArray
    lo: npt.ArrayLike
    hi: npt.ArrayLike
    keys: Keys
    enforce: IntArray | None = None


def merged_keys(total: int, parts: list[tuple[IntArray, Keys]]) -> Keys:
    def keys() -> list[str]:
        out = [""] * total
        for at, part in parts:
            for p, k in zip(at.tolist(), part(), strict=True):
                out[p] = k
        return out

    return keys


def add_var_parts(f: Formulation, parts: list[VarPart]) -> list[IntArray]:
    """Add the parts as one block; returns each part's variable indices."""
    total = sum(p.at.size for p in parts)
    lb = np.empty(total)
    ub = np.empty(total)
    kind = np.empty(total, dtype=np.int8)
    for code, p in enumerate(parts):
        lb[p.at] = p.lb
        ub[p.at] = p.ub
        kind[p.at] = code
    first = f.num_variables
    f.add_vars(
        tuple(p.kind for p in parts),
        lb,
        ub,
        merged_keys(total, [(p.at, p.keys) for p in parts]),
        kind=kind if len(parts) > 1 else None,
    )
    return [ints(first + p.at) for p in parts]


def add_row_parts(f: Formulation, family: str, parts: list[RowPart]) -> None:
    """Add the parts as one block of rows."""
    total = sum(p.at.size for p in parts)
    lengths = np.zeros(total, dtype=np.int64)
    lo = np.empty(total)
    hi = np.empty(total)
    kind = np.empty(total, dtype=np.int8)
    for code, p in enumerate(parts):
        lengths[p.at] = p.counts
        lo[p.at] = p.lo
        hi[p.at] = p.hi
        kind[p.at] = code
    indptr = starts(lengths)
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    coefs = np.empty(int(indptr[-1]), dtype=np.int64)
    for p in parts:
        if p.at.size and p.counts.min() == p.counts.max():  # k terms per row: column by column
            k = int(p.counts[0])
            first = indptr[p.at]
            for c in range(k):
                indices[first + c], coefs[first + c] = p.indices[c::k], p.coefs[c::k]
        else:
            positions = np.repeat(indptr[p.at], p.counts) + ragged_arange(p.counts)
            indices[positions] = p.indices
            coefs[positions] = p.coefs
    enforce = None
    if any(p.enforce is not None for p in parts):
        enforce = np.full(total, NO_ENFORCE, dtype=np.int64)
        for p in parts:
            if p.enforce is not None:
                enforce[p.at] = p.enforce
    f.add_rows(
        family,
        tuple(p.kind for p in parts),
        indptr,
        indices,
        coefs,
        lo,
        hi,
        merged_keys(total, [(p.at, p.keys) for p in parts]),
        kind=kind if len(parts) > 1 else None,
        enforce=enforce,
    )


def interleave(counts: list[IntArray]) -> list[IntArray]:
    """Positions when, group after group, each part k contributes counts[k][g] items in turn:
    part 0's items of group 0, part 1's of group 0, ..., part 0's of group 1, ..."""
    per_group = np.sum(counts, axis=0)
    group_start = starts(ints(per_group))[:-1]
    out = []
    before = np.zeros_like(per_group)
    for c in counts:
        out.append(ints(np.repeat(group_start + before, c) + ragged_arange(ints(c))))
        before = before + c
    return out


def names_of(values: IntArray, table: list[str]) -> list[str]:
    return [table[v] for v in values.tolist()]


def job_keys(names: list[str], jobs: IntArray, *rest: list[str] | IntArray) -> Keys:
    """``job,rest...`` keys, made on demand."""

    def keys() -> list[str]:
        cols = [names_of(jobs, names)] + [
            r if isinstance(r, list) else [str(v) for v in r.tolist()] for r in rest
        ]
        return [",".join(parts) for parts in zip(*cols, strict=True)]

    return keys


def ones(n: int) -> IntArray:
    return np.ones(n, dtype=np.int64)


def placement(f: Formulation) -> IntArray:
    """The x variables per candidate pair; a family that needs them fails without them."""
    if f.index.x is None:
        raise ValueError("this family needs the placement variables (add_placement_vars)")
    return f.index.x
