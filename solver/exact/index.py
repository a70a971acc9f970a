"""Where each kind of variable is: index arrays over the layout, and the readable maps.

The families record their variables' indices as arrays (``Indices``: per configuration, per
candidate pair, per job ...); ``hint`` and ``extract`` work on those. The maps by name
(``f.y[job, i]``, ``f.x[job, node]``) are made from them only when read (``LazyMap``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from solver.domain import Node
from solver.exact.layout import Layout
from solver.exact.rows import FloatArray, IntArray, floats, ints

_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass
class Indices:
    """Variable indices of each kind as arrays over the layout (set by the families)."""

    y: IntArray = field(default_factory=lambda: _EMPTY)
    """Per configuration (the layout's flat order)."""
    x: IntArray | None = None
    """Per candidate pair; None without add_placement_vars."""
    tp_job: IntArray = field(default_factory=lambda: _EMPTY)
    tp_degree: IntArray = field(default_factory=lambda: _EMPTY)
    tp: IntArray = field(default_factory=lambda: _EMPTY)
    q: IntArray | None = None
    """Per pair, -1 where the job has no tensor degree above 1."""
    z: IntArray | None = None
    """Per pair (locality)."""
    r_job: IntArray = field(default_factory=lambda: _EMPTY)
    r_rack: IntArray = field(default_factory=lambda: _EMPTY)
    r: IntArray = field(default_factory=lambda: _EMPTY)
    keep: IntArray | None = None
    """Per job, -1 where none."""
    w_job: IntArray = field(default_factory=lambda: _EMPTY)
    w_rack: IntArray = field(default_factory=lambda: _EMPTY)
    w_config: IntArray = field(default_factory=lambda: _EMPTY)
    """Flat configuration index."""
    w: IntArray = field(default_factory=lambda: _EMPTY)
    floor_node: IntArray = field(default_factory=lambda: _EMPTY)
    """Layout codes of the nodes whose floor is priced (solver.exact.node_floor)."""
    busy: IntArray = field(default_factory=lambda: _EMPTY)
    free: IntArray = field(default_factory=lambda: _EMPTY)
    quota_claims: list[tuple[int, IntArray, IntArray]] = field(default_factory=list)
    """Per cohort and queue: its claim variable, and the usage it covers (y indices and
    coefficients)."""
    epigraphs: list[tuple[int, list[tuple[int, IntArray, IntArray]]]] = field(default_factory=list)
    """Per fairness epigraph variable: its rows var <= rhs + coefs . y (rhs, y indices,
    coefficients)."""
    drf_rows: list[tuple[IntArray, list[tuple[int, list[tuple[IntArray, IntArray]]]]]] = field(
        default_factory=list
    )
    """Per DRF entity: the binaries that pick its resource (-1: the only one), and per row
    variable (its row, its share of the mean) the resources' shares (y indices, coefficients)."""


K = TypeVar("K")


class LazyMap(Mapping[K, int]):
    """A read-only dict made on first use: the index maps (``f.y[job, i]``) cost nothing
    unless a test or a debugging session reads them."""

    def __init__(self, make: Callable[[], dict[K, int]]) -> None:
        self._make = make
        self._dict: dict[K, int] | None = None

    def _get(self) -> dict[K, int]:
        if self._dict is None:
            self._dict = self._make()
        return self._dict

    def __getitem__(self, key: K) -> int:
        return self._get()[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __contains__(self, key: object) -> bool:
        return key in self._get()


class Values(Mapping[int, float]):
    """Values of every variable (a dense array) as a read-only mapping: a complete start."""

    def __init__(self, array: FloatArray) -> None:
        self.array = array

    def __getitem__(self, v: int) -> float:
        if not 0 <= v < self.array.size:
            raise KeyError(v)
        return float(self.array[v])

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.array.size))

    def __len__(self) -> int:
        return int(self.array.size)


def dense(values: Mapping[int, float] | Sequence[float] | FloatArray, n: int) -> FloatArray:
    """Values by variable index as a dense array (0 where a mapping has none)."""
    if isinstance(values, Values):
        return values.array
    if isinstance(values, Mapping):
        out = np.zeros(n, dtype=np.float64)
        if values:
            out[ints(list(values.keys()))] = floats(list(values.values()))
        return out
    return floats(values)


def _at(table: list[str], codes: IntArray) -> list[str]:
    return [table[c] for c in codes.tolist()]


def index_map(lay: Layout, ix: Indices, kind: str) -> dict[Any, int]:
    """The variables of one kind by name: ``{(job, i): index}`` for y, and so on."""
    jobs = lay.job_names
    columns: Callable[[], list[list[Any]]]
    values: IntArray | None
    if kind == "y":
        columns, values = lambda: [_at(jobs, lay.cfg_job), lay.cfg_local.tolist()], ix.y
    elif kind in ("x", "z", "q"):
        values = {"x": ix.x, "z": ix.z, "q": ix.q}[kind]
        columns = lambda: [_at(jobs, lay.pair_job), _at(lay.node_names, lay.pair_node)]  # noqa: E731
    elif kind == "tp":
        columns, values = lambda: [_at(jobs, ix.tp_job), ix.tp_degree.tolist()], ix.tp
    elif kind == "r":
        columns, values = lambda: [_at(jobs, ix.r_job), _at(lay.rack_names, ix.r_rack)], ix.r
    elif kind == "w":
        values = ix.w
        columns = lambda: [  # noqa: E731
            _at(jobs, ix.w_job),
            _at(lay.rack_names, ix.w_rack),
            lay.cfg_local[ix.w_config].tolist(),
        ]
    elif kind == "keep":
        if ix.keep is None:
            return {}
        return {jobs[j]: v for j, v in enumerate(ix.keep.tolist()) if v >= 0}
    else:
        raise KeyError(kind)
    if values is None:
        return {}
    return {
        key: v
        for key, v in zip(zip(*columns(), strict=True), values.tolist(), strict=True)
        if v >= 0
    }


def candidates(lay: Layout, ix: Indices) -> dict[str, list[Node]]:
    """The candidate nodes of each job with configurations (once x is made)."""
    if ix.x is None:
        return {}
    out: dict[str, list[Node]] = {}
    for j in np.flatnonzero(lay.has_configs()).tolist():
        a, b = int(lay.pair_start[j]), int(lay.pair_start[j + 1])
        out[lay.job_names[j]] = [lay.nodes[n] for n in lay.pair_node[a:b].tolist()]
    return out
