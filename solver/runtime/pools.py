"""Where the parts of a decomposed solve (and the runs of a batch) run: one interface, and the
runs in this process or on a local process pool (Ray: ``solver.runtime.ray``; the choice
between them: ``solver.runtime.executors``).

Each task is a picklable call of a top-level function. Local workers are capped to one thread
each (BLAS and the solvers), so that N workers use N cores and never oversubscribe the machine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from solver.runtime.cores import THREAD_VARIABLES, available_cores
from solver.runtime.memory import check_workers_fit
from solver.runtime.workerpool import WorkerPool
from solver.runtime.workers import (
    CallContext,
    CallFailed,
    Worker,
    WorkerLost,
    run_call,
)

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)


class Stopped(RuntimeError):
    """A map was stopped on request (a cancelled call, a shutdown): its tasks were dropped."""


Stop = Callable[[], bool]
"""Polled while a map runs: true once its caller no longer wants the results."""
STOP_POLL_SECONDS = 0.05
"""How often a running map polls its stop request."""
OFFLINE_RETRIES = 1
"""How often an offline run (a batch solve, a sweep point, a simulation) whose worker died -
killed, out of memory - runs again before its command gives up: one kill should not cost the
other runs, but a run that kills its worker each time would only repeat."""


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

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        """fn over items, in order; Stopped once `stop()` is true. A task whose worker died is
        run again on a fresh worker up to `retries` times (only for tasks that can run twice
        without harm); past that, WorkerLost gives the task's index."""
        ...

    def close(self) -> None: ...


class InlineExecutor:
    """Runs tasks one after another in this process (one worker; tests and tiny problems)."""

    name = "inline"
    workers = 1

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        out = []
        for x in items:
            if stop is not None and stop():
                raise Stopped("stopped on request")
            out.append(fn(x))
        return out

    def close(self) -> None:
        pass


class LocalExecutor:
    """Kept worker processes on this machine (solver.runtime.workers), one task at a time
    each, capped to one thread each. A stopped map kills its running tasks' workers at once
    (the pool replaces them in the background); a task whose worker dies runs again on a
    fresh one while its retries last, and fails the map with WorkerLost after. Each worker
    has its own pipes: a kill never leaves the caller waiting on a half-sent message, as a
    process pool's shared queues can."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        """TooManyWorkers when `workers` processes would not fit in memory."""
        self.workers = workers or available_cores()
        check_workers_fit(self.workers, available_cores())
        caps = dict.fromkeys(THREAD_VARIABLES, "1")
        self._pool = WorkerPool("pool", env=caps, keep=self.workers)

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        results: list[Any] = [None] * len(items)
        todo = list(range(len(items)))
        todo.reverse()
        lost = [0] * len(items)
        failed: list[BaseException] = []
        halted = threading.Event()
        lock = threading.Lock()

        def halt() -> bool:
            if not halted.is_set() and (failed or (stop is not None and stop())):
                halted.set()
            return halted.is_set()

        def lane() -> None:
            worker: Worker | None = None
            while not halt():
                with lock:
                    if not todo:
                        break
                    k = todo.pop()
                if worker is None:
                    worker = self._pool.take()
                try:
                    results[k] = run_call(
                        worker,
                        _plain,
                        (fn, items[k]),
                        kill_at=lambda: float("inf"),
                        stop=halt,
                        stop_grace=0.0,
                    )
                except WorkerLost as e:
                    self._pool.discard(
                        worker,
                        "" if halted.is_set() else str(e),
                        crash=e.crash and not halted.is_set(),
                    )
                    worker = None
                    if halted.is_set():
                        continue
                    lost[k] += 1
                    if lost[k] <= retries:
                        log.warning(
                            "task %d of %d lost its worker (%s): running it again (%d of %d)",
                            k + 1,
                            len(items),
                            e,
                            lost[k],
                            retries,
                        )
                        with lock:
                            todo.append(k)
                    else:
                        failed.append(
                            WorkerLost(
                                f"task {k + 1} of {len(items)} lost its worker"
                                f"{_times(lost[k])}: {e}",
                                crash=e.crash,
                                task=k,
                            )
                        )
                except CallFailed as e:
                    failed.append(e)
            if worker is not None:
                self._pool.give_back(worker)

        lanes = [
            threading.Thread(target=lane, name=f"dsfro-pool-{i}", daemon=True)
            for i in range(min(self.workers, len(items)))
        ]
        for thread in lanes:
            thread.start()
        for thread in lanes:
            thread.join()
        # Workers start on first use; from then on the pool keeps them, replacing lost ones in
        # the background, so a later map never waits for an interpreter to import the solver
        # (a second or more under load).
        self._pool.warm(self.workers)
        if failed:
            error = failed[0]
            if isinstance(error, CallFailed):
                raise RuntimeError(f"a task failed in a pool worker: {error}")
            raise error
        if halted.is_set():
            raise Stopped("stopped on request: the pool's running tasks were killed")
        return results

    def worker_pids(self) -> list[int]:
        """The pool's idle workers (for tests)."""
        pids: list[int] = self._pool.idle_pids()
        return pids

    def close(self) -> None:
        self._pool.close()


def map_or_lost(
    executor: Executor,
    fn: Callable[[T], R],
    items: Sequence[T],
    lost: Callable[[T, WorkerLost], R],
    retries: int = OFFLINE_RETRIES,
) -> list[R]:
    """fn over items as ``executor.map`` with `retries`; an item whose worker died on every
    try gets ``lost(item, error)`` in its place, and the others are run again (the failed map
    kept none of their results): for batches whose runs are independent."""
    try:
        return executor.map(fn, items, retries=retries)
    except WorkerLost as e:
        if e.task is None:
            raise
        log.warning("task %d of %d lost its worker for good: %s", e.task + 1, len(items), e)
        others = [x for k, x in enumerate(items) if k != e.task]
        rest = map_or_lost(executor, fn, others, lost, retries)
        return [*rest[: e.task], lost(items[e.task], e), *rest[e.task :]]


def lost_for_good(error: WorkerLost) -> str:
    """What an offline command records for a run whose worker died on every try."""
    times = OFFLINE_RETRIES + 1
    return f"its worker process died {times} times (killed, or out of memory): {error}"


def _times(n: int) -> str:
    return "" if n == 1 else f" {n} times"


def _plain(task: tuple[Callable[[Any], Any], Any], call: CallContext) -> Any:
    """A task of the Executor interface (fn(item)) as a worker call."""
    fn, item = task
    return fn(item)


__all__ = [
    "OFFLINE_RETRIES",
    "Executor",
    "InlineExecutor",
    "LocalExecutor",
    "Stop",
    "Stopped",
    "WorkerLost",
    "lost_for_good",
    "map_or_lost",
]
