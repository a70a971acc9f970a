"""The cyclic garbage collector held off while solves run.

A solve allocates hundreds of thousands of objects that live until it ends (configurations,
the search's tables, plans). CPython's generational collector, set off by allocation counts,
scans them again and again on the solve's clock and finds nothing to free: a solve makes no
reference cycles (collections after 5 s and 10 s solves of 1,000 and 1,600 jobs found no
unreachable object), and reference counting frees its garbage as always. On a 1,000-job MIG
snapshot a full collection of 60-70 ms fell inside the first plan in two calls of three
(docs/benchmarks.md, "Rerun 2026-12-06, night: the garbage collector off during solves").

So solves run with the collector off (``collector_paused``), and it is on again once no solve
runs in the process, unless the process had turned it off itself. A worker process freezes
what its imports made (``gc.freeze``: never scanned again) and collects between its calls,
when nothing waits on it (``collect_between_calls``).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_holders = 0
"""Blocks of ``collector_paused`` running now, in every thread."""
_restore = False
"""Whether the collector was on when the first of them began."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """The block runs with cyclic garbage collection off. Nested and concurrent blocks count:
    the collector is on again after the last of them ends, where it was on before the first."""
    global _holders, _restore
    with _lock:
        if _holders == 0:
            _restore = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _restore:
                gc.enable()


def paused_collection(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` with every call run in ``collector_paused``."""

    @wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with collector_paused():
            return fn(*args, **kwargs)

    return paused


def freeze_imports() -> None:
    """Move every object tracked now (modules, functions, the catalog) to the collector's
    permanent generation: a worker's collections then scan only what its calls left."""
    gc.collect()
    gc.freeze()


def collect_between_calls() -> None:
    """Collect what a call may have left in cycles, while nothing waits on this process."""
    if gc.isenabled():
        gc.collect()


def _forgotten_in_child() -> None:
    """A process forked while a solve held the collector off does not run that solve: its
    collector is on again as the parent's was before."""
    global _holders, _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    if _holders and _restore:
        gc.enable()
    _holders = 0


os.register_at_fork(after_in_child=_forgotten_in_child)
