"""Making and moving hundreds of thousands of configurations at once.

Every `Config` is a tracked object, and allocating 250,000 of them (the xl family) next to a
large snapshot sets off full cyclic garbage collections over the whole heap, which cost more
than the configurations themselves (1.2 s against 0.5 s for xl's enumeration). They hold no
reference cycles, so the collector is paused while they are made (`collector_paused`). A
decomposed solve sends each part's configurations back to the caller: as a few arrays per part
(`to_columns`) instead of one pickled object per configuration, and remade with the collector
paused (`from_columns`; `to_columns` pauses it while it reads them).
"""

from __future__ import annotations

import gc
import operator
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from itertools import islice
from typing import Any

import numpy as np

from solver.domain import Config


class _Collector:
    """Pauses the cyclic collector for the outermost of nested or concurrent users and
    restores it (if it was enabled) when the last one leaves."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._was_enabled = False

    @contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0 and self._was_enabled:
                    gc.enable()


_COLLECTOR = _Collector()
collector_paused = _COLLECTOR.paused
"""Context manager: no cyclic collection inside (reference counting still frees memory)."""

Columns = tuple[Any, ...]


_FIELDS = operator.attrgetter(
    "job",
    "shape",
    "sm_clock_mhz",
    "min_nodes",
    "min_racks",
    "measured",
    "kept_only",
    "samples_per_second",
    "watts",
    "memory_per_gpu_gib",
)


def to_columns(by_job: Mapping[str, tuple[Config, ...]]) -> Columns:
    """The configurations by job as arrays (bit-exact floats), shapes and names listed once."""
    with collector_paused():
        rows = [_FIELDS(c) for cs in by_job.values() for c in cs]
    jobs, shapes, *numbers = zip(*rows, strict=True) if rows else ((), (), *[()] * 8)
    names: dict[str, int] = {}
    name_of = [names.setdefault(j, len(names)) for j in jobs]
    distinct: dict[int, int] = {}  # by identity: configurations share their shape objects
    shape_of = [distinct.setdefault(id(s), len(distinct)) for s in shapes]
    unique = {distinct[id(s)]: s for s in shapes}
    return (
        list(by_job),
        [len(cs) for cs in by_job.values()],
        list(names),
        [unique[i] for i in range(len(unique))],
        np.array(name_of, dtype=np.int64),
        np.array(shape_of, dtype=np.int64),
        np.array(numbers[:5], dtype=np.int64).reshape(5, -1),
        np.array(numbers[5:], dtype=np.float64).reshape(3, -1),
    )


def from_columns(columns: Columns) -> dict[str, tuple[Config, ...]]:
    """The inverse of `to_columns`."""
    keys, counts, names, shapes, name_of, shape_of, ints, floats = columns
    with collector_paused():
        by_job: dict[str, tuple[Config, ...]] = {}
        rows = zip(
            name_of.tolist(), shape_of.tolist(), ints.T.tolist(), floats.T.tolist(), strict=True
        )
        for key, count in zip(keys, counts, strict=True):
            made = []
            for n, s, (clock, nodes, racks, measured, kept), (sps, watts, memory) in islice(
                rows, count
            ):
                made.append(
                    Config(
                        names[n],
                        shapes[s],
                        clock,
                        sps,
                        watts,
                        memory,
                        nodes,
                        racks,
                        bool(measured),
                        bool(kept),
                    )
                )
            by_job[key] = tuple(made)
        return by_job
