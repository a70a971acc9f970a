"""Where the parts of a decomposed solve (and the runs of a batch) run: one interface, and the
runs in this process or on a local process pool (Ray: ``solver.runtime.ray``; the choice
between them: ``solver.runtime.executors``).

Each task is a picklable call of a top-level function. Local workers are capped to one thread
each (BLAS and the solvers), so that N workers use N cores and never oversubscribe the machine.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import (
    FIRST_EXCEPTION,
    CancelledError,
    Future,
    ProcessPoolExecutor,
    wait,
)
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol, TypeVar

from solver.runtime import crashes, memory
from solver.runtime.cores import available_cores, one_thread
from solver.runtime.workers import WorkerLost

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

class Stopped(RuntimeError):
    """A map was stopped on request (a cancelled call, a shutdown): its tasks were dropped."""


Stop = Callable[[], bool]
"""Polled while a map runs: true once its caller no longer wants the results."""
STOP_POLL_SECONDS = 0.05
"""How often a running map polls its stop request."""


class Executor(Protocol):
    """Runs independent tasks in parallel and returns their results in order."""

    @property
    def name(self) -> str:
        """For notes and logs: "inline", "local", "ray"."""
        ...

    @property
    def workers(self) -> int:
        """Tasks it runs at once."""
        ...

    def map(self, fn: Callable[[T], R], items: Sequence[T], stop: Stop | None = None) -> list[R]:
        """fn over items, in order; Stopped once `stop()` is true, WorkerLost if a worker
        died."""
        ...

    def close(self) -> None: ...


class InlineExecutor:
    """Runs tasks one after another in this process (one worker; tests and tiny problems)."""

    name = "inline"
    workers = 1

    def map(self, fn: Callable[[T], R], items: Sequence[T], stop: Stop | None = None) -> list[R]:
        out = []
        for x in items:
            if stop is not None and stop():
                raise Stopped("stopped on request")
            out.append(fn(x))
        return out

    def close(self) -> None:
        pass


class LocalExecutor:
    """A pool of worker processes on this machine (spawned: safe beside gRPC's threads)."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or available_cores()
        self._pool: ProcessPoolExecutor | None = None

    def _ensure(self) -> ProcessPoolExecutor:
        if self._pool is not None and getattr(self._pool, "_broken", False):
            # A worker died while the pool was idle (killed, out of memory): replace the pool
            # before this call rather than fail it. (CPython marks a broken pool so.)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            crashes.record("pool")
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=one_thread,
            )
        return self._pool

    def map(self, fn: Callable[[T], R], items: Sequence[T], stop: Stop | None = None) -> list[R]:
        pool = self._ensure()
        try:
            with memory.watching(lambda: _worker_pids(pool)) as killed:
                futures = [pool.submit(fn, x) for x in items]
                if stop is not None and _stopped_while_waiting(futures, stop):
                    self._abandon(pool, futures)
                    raise Stopped("stopped on request: the pool's workers were killed")
                return [f.result() for f in futures]
        except CancelledError as e:  # the pool was closed under this map (shutdown)
            raise WorkerLost("the solve worker pool was closed") from e
        except BrokenProcessPool as e:
            # A worker died (killed, out of memory): this pool is unusable. The next map
            # starts a new one; this one's caller decides what to answer.
            broken, self._pool = self._pool, None
            if broken is not None:
                broken.shutdown(wait=False, cancel_futures=True)
                crashes.record("pool")
            why = killed[0] if killed else f"a solve worker process died ({e})"
            raise WorkerLost(why) from e

    def _abandon(self, pool: ProcessPoolExecutor, futures: list[Future[Any]]) -> None:
        """Drop a stopped map: its queued tasks are cancelled and its running ones killed with
        their workers (they would hold cores for the rest of their time); the next map starts
        a new pool. Not a crash: the crash-loop count is left alone."""
        for f in futures:
            f.cancel()
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        if self._pool is pool:
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _stopped_while_waiting(futures: Sequence[Future[Any]], stop: Stop) -> bool:
    """Wait for `futures` (or the first failure), polling `stop`; whether it said stop."""
    pending: set[Future[Any]] = set(futures)
    while pending:
        if stop():
            return True
        done, pending = wait(pending, timeout=STOP_POLL_SECONDS, return_when=FIRST_EXCEPTION)
        if any(not f.cancelled() and f.exception() is not None for f in done):
            return False
    return False


def _worker_pids(pool: ProcessPoolExecutor) -> list[int]:
    """The pool's worker processes now (CPython keeps them in ``_processes``)."""
    processes = getattr(pool, "_processes", None) or {}
    return list(processes)


__all__ = [
    "Executor",
    "InlineExecutor",
    "LocalExecutor",
    "Stop",
    "Stopped",
    "WorkerLost",
]
