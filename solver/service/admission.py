"""Which Solve calls run, which wait a little, and which are refused with a hint.

At most ``max_concurrent_solves`` run at once, one per solve worker. A call that finds every
slot taken may wait for one, for at most ``queue_wait_share`` of its own time budget (its
budget counts from its arrival, so the wait is spent from it) and only while fewer than
``max_queued_solves`` calls wait; otherwise, or when its wait runs out, it is refused with
RESOURCE_EXHAUSTED and ``google.rpc.RetryInfo`` saying when the next slot should free up (the
earliest end of a running solve). The running solves' stop events and due instants are kept
here too: shutdown stops them, and health sees a solve that outlived its due time.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

MIN_RETRY_SECONDS = 0.05
MAX_RETRY_SECONDS = 5.0
"""The retry hint lies within these bounds: a solve that should have ended already still
takes a moment to hand its slot over, and a client is never told to go away for long."""


@dataclass
class Running:
    """One admitted solve: how to stop it and when it must be done."""

    stop: threading.Event
    due: float
    """time.monotonic() by which its answer is due (moved when its worker says so)."""
    concurrent: int = 1
    """Solves running when it was admitted, itself included: its share of the cores."""
    gone: bool = False
    """Its caller has gone (cancelled, or past its deadline): no answer is wanted."""

    def caller_gone(self) -> None:
        """The call has ended before its answer (grpcio's callback on the call's end, which
        comes after the answer otherwise): stop, and make no answer for nobody."""
        self.gone = True
        self.stop.set()


class Refused(Exception):
    """No slot: the message says why, `retry_after` when to try again (seconds)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Admission:
    """Slots for solves, a short queue before them, and the solves in flight."""

    def __init__(self, slots: int, max_queued: int, queue_wait_share: float) -> None:
        self.slots = slots
        self.max_queued = max_queued
        self.queue_wait_share = queue_wait_share
        self._free = slots
        self._waiting = 0
        self._cond = threading.Condition()
        self._running: list[Running] = []
        self._draining = False

    def admit(self, budget_seconds: float, arrival: float, due: float) -> Running:
        """A slot for a call that arrived at `arrival` with this budget, due at `due`; Refused
        when none frees up within its share of the budget (or the queue is full). Waiting
        counts in the call's budget: it arrived when it arrived."""
        wait_until = arrival + self.queue_wait_share * budget_seconds
        with self._cond:
            if self._draining:
                raise Refused("the server is shutting down", MAX_RETRY_SECONDS)
            if self._free == 0:
                if self._waiting >= self.max_queued or time.monotonic() >= wait_until:
                    raise self._refusal()
                self._waiting += 1
                try:
                    while self._free == 0 and not self._draining:
                        left = wait_until - time.monotonic()
                        if left <= 0:
                            raise self._refusal()
                        self._cond.wait(left)
                finally:
                    self._waiting -= 1
                if self._draining:
                    raise Refused("the server is shutting down", MAX_RETRY_SECONDS)
            self._free -= 1
            running = Running(threading.Event(), due, len(self._running) + 1)
            self._running.append(running)
            return running

    def release(self, running: Running) -> None:
        with self._cond:
            if running in self._running:
                self._running.remove(running)
                self._free += 1
                self._cond.notify()

    def _refusal(self) -> Refused:
        now = time.monotonic()
        soonest = min((r.due for r in self._running), default=now)
        delay = min(max(soonest - now, MIN_RETRY_SECONDS), MAX_RETRY_SECONDS)
        n = self.slots
        return Refused(
            f"{n} solves are already running (max_concurrent_solves={n}); retry later", delay
        )

    def drain(self) -> None:
        """Admit nothing more, and tell every running solve to answer with what it has."""
        with self._cond:
            self._draining = True
            running = list(self._running)
            self._cond.notify_all()
        for r in running:
            r.stop.set()

    def late(self, after_seconds: float) -> list[float]:
        """How long past their due time the solves are that outlived it by `after_seconds`."""
        now = time.monotonic()
        with self._cond:
            return sorted(now - r.due for r in self._running if now - r.due > after_seconds)

    def in_flight(self) -> int:
        with self._cond:
            return len(self._running)
