"""A pool of kept worker interpreters (``solver.runtime.workers``) of one kind: warm ones ready
for the next call, lost ones replaced in the background, crashes counted."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from solver.runtime import crashes
from solver.runtime.workers import READY_SECONDS, Worker, WorkerLost

log = logging.getLogger(__name__)


class WorkerPool:
    """Workers kept for calls: ``take`` gives an idle one (or starts one), ``give_back`` takes
    it back after a clean answer, ``discard`` after it died or was killed (counted in
    ``crashes``). The pool keeps ``warm`` workers alive, idle or busy: a lost one is replaced in
    the background; a busy one is not (it comes back). Workers beyond what the pool keeps are
    closed in the background, never on a caller's time."""

    def __init__(
        self,
        kind: str,
        *,
        preload: Sequence[str] = (),
        keep: int = 4,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.preload = tuple(preload)
        self.env = dict(env or {})
        self.keep = keep
        """Idle workers kept at most."""
        self._idle: list[Worker] = []
        self._live = 0
        """Workers of this pool alive now: idle, busy, or starting."""
        self._lock = threading.Lock()
        self._warm = 0
        self._closed = False

    def warm(self, count: int) -> None:
        """Keep at least `count` workers alive from now on; starts the missing ones in the
        background (each takes about a second to import)."""
        with self._lock:
            self._warm = max(self._warm, count)
            self.keep = max(self.keep, count)
        self._top_up()

    def warm_now(self, count: int) -> None:
        """As warm, and wait until `count` workers are idle and ready."""
        with self._lock:
            self._warm = max(self._warm, count)
            self.keep = max(self.keep, count)
            missing = max(count - len(self._idle), 0)
            self._live += missing
        fresh = [Worker(self.preload, self.env) for _ in range(missing)]
        for worker in fresh:
            try:
                ready = worker.wait_ready(READY_SECONDS)
            except WorkerLost as e:
                self._lost_start()
                raise OSError(f"a {self.kind} worker died while it started: {e}") from e
            if not ready:
                worker.kill()
                self._lost_start()
                raise OSError(f"a {self.kind} worker did not start within {READY_SECONDS:.0f}s")
            self._give(worker)

    def idle(self) -> int:
        """Idle workers usable now: one killed or stopped from outside while idle is not
        counted (a call that lost its worker runs again only if a warm one can take it; a cold
        start takes about a second)."""
        with self._lock:
            return sum(1 for w in self._idle if w.usable())

    def idle_pids(self) -> list[int]:
        with self._lock:
            return [w.pid for w in self._idle]

    def take(self) -> Worker:
        """An idle usable worker (alive, not stopped), or a new one (started now: about a
        second); a stopped one is closed (killed after its grace) and replaced."""
        dead: list[Worker] = []
        with self._lock:
            found: Worker | None = None
            while self._idle and found is None:
                worker = self._idle.pop()
                if worker.usable():
                    found = worker
                else:
                    dead.append(worker)
                    self._live -= 1
            if found is None:
                self._live += 1
        for worker in dead:
            if worker.alive():  # stopped: closing kills it after its grace
                log.warning("%s worker %d is stopped; replaced", self.kind, worker.pid)
        _close_later(dead)
        if dead:
            self._top_up()
        return found if found is not None else Worker(self.preload, self.env)

    def give_back(self, worker: Worker) -> None:
        """A worker whose call answered."""
        self._give(worker)

    def _give(self, worker: Worker) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.keep and worker.alive():
                self._idle.append(worker)
                return
            self._live -= 1
        _close_later([worker])

    def discard(self, worker: Worker, reason: str = "", *, crash: bool = True) -> None:
        """A worker that died or was killed: counted (as a crash unless killed on purpose),
        and replaced when the pool keeps some warm."""
        worker.kill()
        with self._lock:
            self._live -= 1
        crashes.record(self.kind, crash=crash)
        if reason:
            log.warning("%s worker replaced: %s", self.kind, reason)
        self._top_up()

    def _lost_start(self) -> None:
        with self._lock:
            self._live -= 1

    def _top_up(self) -> None:
        with self._lock:
            missing = self._warm - self._live
            if missing <= 0 or self._closed:
                return
            self._live += missing
        threading.Thread(
            target=self._start, args=(missing,), name=f"dsfro-{self.kind}-warm", daemon=True
        ).start()

    def _start(self, count: int) -> None:
        for started in range(count):
            try:
                worker = Worker(self.preload, self.env)
                if not worker.wait_ready(READY_SECONDS):
                    worker.kill()
                    raise OSError(f"it did not start within {READY_SECONDS:.0f}s")
            except (OSError, WorkerLost) as e:  # out of processes or memory: later takes retry
                log.error("could not start a %s worker: %s", self.kind, e)
                with self._lock:
                    self._live -= count - started
                return
            self._give(worker)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
        for worker in idle:
            worker.close()


def _close_later(workers: Sequence[Worker]) -> None:
    """Close workers on a thread of their own: a worker takes a moment to exit."""

    def close_all() -> None:
        for worker in workers:
            worker.close()

    if workers:
        threading.Thread(target=close_all, name="dsfro-worker-close", daemon=True).start()
