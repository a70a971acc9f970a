"""An admitted Solve in a solve worker, and what the server answers whatever becomes of it.

The server thread only waits: it relays the call's stop (a cancelled call, a shutdown) to the
worker, kills the worker once it is past the instant it said it would answer by (plus a grace)
or over its memory limit, and answers:

- with the worker's response (its bytes, relayed undecoded), or its request's violations;
- when the worker died by itself or was killed from outside with time left
  (``RETRY_MIN_SECONDS``): with the answer of a second worker, which runs the call again until
  the same due instant;
- when the worker died or was killed otherwise (or the second one too): with the last plan
  sent ahead (a first, or a better one settled for the power margin), relabelled a FALLBACK
  with the reason; or, before any plan, with the quick plan made here (running jobs kept,
  queued ones placed until the deadline), also a FALLBACK;
- when the solve raised: with the last plan it sent ahead, a FALLBACK naming the server log
  entry that holds the traceback; before any plan, an internal error (logged the same way).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import result_to_proto
from solver.core.deadline import Clock, Deadline, finish_seconds
from solver.runtime.workerpool import WorkerPool
from solver.runtime.workers import CallFailed, WorkerLost, run_call
from solver.service.admission import Running
from solver.service.worker import (
    PRELOAD,
    Answer,
    Due,
    PlanAhead,
    SolveCall,
    fallback_stats,
    solve_call,
    summary,
)

log = logging.getLogger(__name__)

RETRY_MIN_SECONDS = 0.5
"""A solve whose worker died by itself or was killed from outside runs once more on another
worker when this much of its time is left (a warm worker answers a first plan in tens of
milliseconds to 0.3 s at 1,000 jobs). Before, a worker killed 0.01 s into an 8 s call left the
answer to the server's quick plan, made in the grace after the death: 312 running jobs kept,
none of the 688 waiting started."""

COLD_START_SECONDS = 1.5
"""Added to ``RETRY_MIN_SECONDS`` when no warm worker is idle: a new one imports its solvers
for about a second before it takes the call, and one that cannot answer before the due instant
would only hold back the plan the lost worker sent ahead."""

STOP_GRACE_SECONDS = 0.5
"""After a stop request, the time a worker has to answer before it is killed (a solve answers
within tens of milliseconds of its stop; killing costs a worker start, about a second)."""

_shared_pool: WorkerPool | None = None
_shared_lock = threading.Lock()


def new_pool() -> WorkerPool:
    """A pool of solve workers, two kept warm."""
    return WorkerPool("solve", preload=PRELOAD, keep=2)


def shared_pool() -> WorkerPool:
    """The process's pool of solve workers (one per process: servers in one process, as in
    tests, share warm workers)."""
    global _shared_pool
    with _shared_lock:
        if _shared_pool is None:
            _shared_pool = new_pool()
        return _shared_pool


class SolveFailed(RuntimeError):
    """The solve raised in its worker; the message is what it raised, with its traceback."""


@dataclass(frozen=True)
class Outcome:
    answer: Answer
    fallback: str = ""
    """Why the answer is a fallback made without the worker's result ("" when it has one)."""


class SolveRunner:
    """Runs calls in the pool's workers; `kill_grace` past a solve's due instant, it is killed."""

    def __init__(self, pool: WorkerPool, kill_grace: float) -> None:
        self.pool = pool
        self.kill_grace = kill_grace

    def run(self, call: SolveCall, running: Running) -> Outcome:
        """The call's outcome (SolveFailed when the solve raised). A worker lost by itself or
        from outside with ``RETRY_MIN_SECONDS`` of the call's time left (and a cold start's
        more when no warm worker is idle): the call runs once more, on another worker, until
        the same due instant."""
        ahead: list[PlanAhead] = []  # the last one sent, by either worker
        try:
            return self._attempt(call, running, ahead)
        except WorkerLost as e:
            left = running.due - time.monotonic()
            need = RETRY_MIN_SECONDS + (0.0 if self.pool.idle() else COLD_START_SECONDS)
            if not e.retry or running.stop.is_set() or left < need:
                return self._without_worker(call, running, str(e), ahead)
            log.warning("%s; the solve runs again on another worker (%.2f s left)", e, left)
            lost = str(e)
        try:
            outcome = self._attempt(call, running, ahead)
        except WorkerLost as e:
            return self._without_worker(call, running, str(e), ahead)
        return Outcome(_noted(outcome.answer, f"{lost}; the solve ran again on another worker"))

    def _attempt(self, call: SolveCall, running: Running, ahead: list[PlanAhead]) -> Outcome:
        """The call on one worker; WorkerLost (the worker discarded) when it is lost."""

        def on_report(value: object) -> None:
            if isinstance(value, Due):
                running.due = value.end
            elif isinstance(value, PlanAhead):
                ahead[:] = [value]

        worker = self.pool.take()
        try:
            answer: Answer = run_call(
                worker,
                solve_call,
                call,
                kill_at=lambda: running.due + self.kill_grace,
                stop=running.stop.is_set,
                stop_grace=STOP_GRACE_SECONDS,
                on_report=on_report,
            )
        except WorkerLost as e:
            self.pool.discard(worker, str(e), crash=e.crash)
            raise
        except CallFailed as e:
            self.pool.give_back(worker)
            if not ahead:
                raise SolveFailed(str(e)) from e
            # A checked plan exists: the scheduler's round goes on with it, the defect is logged.
            ref = uuid.uuid4().hex[:12]
            log.error("the solve failed after a plan was sent ahead [ref %s]: %s", ref, e)
            why = f"the solve failed (server log reference {ref})"
            return Outcome(self._sent_ahead(call, why, ahead[0]), why)
        self.pool.give_back(worker)
        return Outcome(answer)

    @staticmethod
    def _sent_ahead(call: SolveCall, why: str, plan: PlanAhead) -> Answer:
        detail = f"{why}; {plan.what}, sent ahead by the worker"
        return Answer(response=plan.response + fallback_stats(detail, call.arrival))

    def _without_worker(
        self, call: SolveCall, running: Running, why: str, ahead: list[PlanAhead]
    ) -> Outcome:
        """The answer when the worker is gone: the last plan it sent ahead, or the quick plan
        made here; none when the caller has gone too (a cancelled call's worker killed after
        its stop: a quick plan for nobody would hold the slot for seconds on a loaded host)."""
        if running.gone:
            return Outcome(Answer(response=b""), why)
        if ahead:
            return Outcome(self._sent_ahead(call, why, ahead[0]), why)
        try:
            request = pipeline.prepare(pb.SolveRequest.FromString(call.data), call.profile)
        except (DecodeError, ValueError) as e:
            name = pb.SolveRequest.DESCRIPTOR.full_name
            return Outcome(Answer(violations=(("request", f"not a valid {name} ({e})"),)), why)
        try:
            problem = pipeline.to_problem(request, call.limits)
        except pipeline.InvalidRequest as e:
            violations = tuple((v.field, v.description) for v in e.violations)
            return Outcome(Answer(violations=violations), why)
        now = time.monotonic()
        # The quick plan keeps the running jobs and places what it reaches by the call's due
        # instant (a moment past it when that has passed): a worker lost early, its second
        # too, leaves it most of the budget (2,048 jobs: every waiting job started, where a
        # moment started none).
        end = max(running.due - finish_seconds(call.solver.settings, len(problem.jobs)), now)
        clock = Clock(Deadline(call.arrival, end + self.kill_grace, 0.0))
        result = call.solver.quick(problem, clock, f"{why} before any plan")
        response = result_to_proto(result, problem).SerializeToString()
        return Outcome(Answer(response=response, summary=summary(result, problem)), why)


def _noted(answer: Answer, note: str) -> Answer:
    """`answer` with `note` before its detail (a response decoded and encoded again: done only
    for a call that ran twice, so that its caller sees why it took a second worker)."""
    if answer.response is None:
        return answer
    response = pb.SolveResponse.FromString(answer.response)
    detail = response.stats.detail
    response.stats.detail = f"{note}; {detail}" if detail else note
    return dataclasses.replace(answer, response=response.SerializeToString())
