"""Where sub-problems run: one interface, a local process pool by default, Ray when given.

Each task is a picklable call of a top-level function. Workers are capped to one thread each
(BLAS and the solvers), so that N workers use N cores and never oversubscribe the machine.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
import os
import threading
import time
from collections import deque
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

from solver.extras import MissingExtraError
from solver.runtime import memory as supervise

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

RAY_ADDRESS_ENV = "DSFRO_RAY_ADDRESS"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


_pools_replaced = 0
"""Local process pools replaced after a worker died."""
_replaced_at: deque[float] = deque(maxlen=64)
"""When (time.monotonic()) the latest replacements happened."""


def pool_restarts() -> int:
    """Local process pools replaced so far in this process (the service's metrics)."""
    return _pools_replaced


def recent_pool_restarts(window_seconds: float) -> int:
    """Pools replaced within the last `window_seconds` (the service's health)."""
    since = time.monotonic() - window_seconds
    return sum(t >= since for t in list(_replaced_at))


def _count_pool_replaced() -> None:
    global _pools_replaced
    _pools_replaced += 1
    _replaced_at.append(time.monotonic())


class WorkerLost(RuntimeError):
    """A worker process died while running a task; the executor replaces it on next use."""


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


CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"
"""cgroup v2's CPU quota of this container: "<quota> <period>" or "max <period>"."""


def available_cores() -> int:
    """Cores this process may use: its CPU affinity, capped by the container's CPU quota (a
    Kubernetes CPU limit sets a quota, not an affinity)."""
    try:
        cores = max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        cores = max(os.cpu_count() or 1, 1)
    quota = cgroup_cpu_quota(CGROUP_CPU_MAX)
    return cores if quota is None else max(1, min(cores, math.ceil(quota - 1e-9)))


def cgroup_cpu_quota(path: str) -> float | None:
    """CPUs allowed by a cgroup v2 ``cpu.max`` file, or None without a quota or file."""
    try:
        with open(path) as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _one_thread() -> None:
    """Worker initializer: one core per worker."""
    for var in THREAD_VARIABLES:
        os.environ[var] = "1"


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
            _count_pool_replaced()
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_one_thread,
            )
        return self._pool

    def map(self, fn: Callable[[T], R], items: Sequence[T], stop: Stop | None = None) -> list[R]:
        pool = self._ensure()
        try:
            with supervise.watching(lambda: _worker_pids(pool)) as killed:
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
                _count_pool_replaced()
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


class RayExecutor:
    """Tasks on a Ray cluster: `address` as for ray.init ("auto", "ray://host:10001", or
    "local" to start one on this machine); one CPU per task."""

    name = "ray"

    def __init__(self, address: str) -> None:
        try:
            import ray
        except ImportError as e:
            raise MissingExtraError("ray", f"the Ray executor (address {address!r})") from e

        self._ray: Any = ray
        if not ray.is_initialized():
            ray.init(
                address=None if address == "local" else address,
                include_dashboard=False,
                log_to_driver=False,
            )
        resources: dict[str, float] = ray.cluster_resources()  # type: ignore[no-untyped-call]
        self.workers = max(int(resources.get("CPU", 1)), 1)
        self._remote: dict[Callable[..., Any], Any] = {}

    def map(self, fn: Callable[[T], R], items: Sequence[T], stop: Stop | None = None) -> list[R]:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(
                num_cpus=1, runtime_env={"env_vars": dict.fromkeys(THREAD_VARIABLES, "1")}
            )(fn)
        refs = [remote.remote(x) for x in items]
        pending = list(refs)
        while stop is not None and pending:
            if stop():
                for ref in refs:
                    with contextlib.suppress(Exception):
                        self._ray.cancel(ref, force=True)
                raise Stopped("stopped on request: the Ray tasks were cancelled")
            _, pending = self._ray.wait(
                pending, num_returns=len(pending), timeout=STOP_POLL_SECONDS
            )
        results: list[R] = self._ray.get(refs)
        return results

    def close(self) -> None:
        """Leaves the Ray cluster running: it belongs to whoever started it."""


def make_executor(ray_address: str | None = None, workers: int | None = None) -> Executor:
    """Ray when an address is given (argument, else $DSFRO_RAY_ADDRESS), else local processes."""
    address = ray_address or os.environ.get(RAY_ADDRESS_ENV) or None
    if address:
        return RayExecutor(address)
    return LocalExecutor(workers)


class LazyExecutor:
    """The executor make_executor gives, made on first use and then kept: a server or a
    command holds one without starting a pool or joining Ray until a solve decomposes."""

    def __init__(self, ray_address: str | None = None, workers: int | None = None) -> None:
        self._ray_address = ray_address
        self._workers = workers
        self._inner: Executor | None = None
        self._lock = threading.Lock()

    def _get(self) -> Executor:
        with self._lock:
            if self._inner is None:
                self._inner = make_executor(self._ray_address, self._workers)
            return self._inner

    @property
    def name(self) -> str:
        return self._get().name

    @property
    def workers(self) -> int:
        return self._get().workers

    def map(self, fn: Callable[[T], R], items: Sequence[T], stop: Stop | None = None) -> list[R]:
        return self._get().map(fn, items, stop)

    def close(self) -> None:
        with self._lock:
            inner, self._inner = self._inner, None
        if inner is not None:
            inner.close()
