"""The gRPC service: validated input, bounded solving, health, reflection, graceful shutdown.

Solves run on their own bounded worker pool, never on an RPC thread, and at most
``max_concurrent_solves`` at a time: a call beyond that gets RESOURCE_EXHAUSTED at once rather
than queueing behind solves that may take minutes. Each solve must answer before the RPC
deadline (minus a margin), whatever its time budget says.
"""

from __future__ import annotations

import contextvars
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from importlib import metadata
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app import pipeline
from solver.app.convert import (
    allocations_from_proto,
    duration_to_proto,
    objective_to_proto,
    problem_from_proto,
    result_to_proto,
)
from solver.app.validation import FieldViolation, validate_plan, validate_request
from solver.domain import Problem, SolveResult
from solver.runtime.pools import LazyExecutor, WorkerLost, recent_pool_restarts
from solver.scoring import evaluation
from solver.search.quick import finish_seconds
from solver.service import tracing
from solver.service.config import ServerConfig
from solver.service.metrics import Metrics

log = logging.getLogger(__name__)

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["SchedulerService"].full_name
MAX_DETAIL_BYTES = 4096
"""BadRequest details travel in trailing metadata, which clients cap (8 KiB by default)."""
_NO_DEADLINE = 1e7
"""time_remaining() above this many seconds: the call has no deadline."""

RESPOND_SECONDS = 0.005
RESPOND_SECONDS_PER_JOB = 1e-5
"""Time kept from the budget to turn the plan into the response and send it: measured 10 ms
for large's 2,048 jobs (result_to_proto and serialising), kept twice over."""
READ_SECONDS = 0.005
READ_SECONDS_PER_JOB = 4.5e-5
"""Time to decode, validate and convert a request on an idle machine: measured 22 ms for
medium's 256 jobs and 92 ms for large's 2,048."""
MIN_READ_SECONDS_TO_GAUGE = 0.01
"""Requests read faster than this say too little about the machine's pace: slowdown 1."""
MAX_SLOWDOWN = 4.0


def slowdown(read_seconds: float, jobs: int) -> float:
    """How much slower than on an idle machine this call's request was read, in [1,
    MAX_SLOWDOWN]: concurrent solves share the interpreter and the cores, and every
    per-job time the solver keeps back stretches alike."""
    expected = READ_SECONDS + READ_SECONDS_PER_JOB * jobs
    if expected < MIN_READ_SECONDS_TO_GAUGE:
        return 1.0
    return min(max(read_seconds / expected, 1.0), MAX_SLOWDOWN)


CRASH_WINDOW_SECONDS = 60.0
CRASH_LOOP_RESTARTS = 3
"""Worker pools replaced this many times within the window: a crash loop, not bad luck (one
kill costs one replacement)."""

T = TypeVar("T")


# ---------------------------------------------------------------- servicer


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    """The four RPCs of dsfro.v1.SchedulerService."""

    def __init__(self, config: ServerConfig) -> None:
        self._config = config
        self._limits = config.limits
        self._slots = threading.BoundedSemaphore(config.max_concurrent_solves)
        self._executor = LazyExecutor(config.ray_address)
        """Runs decomposed solves' parts; joins Ray or starts processes on first use only."""
        self._pool = ThreadPoolExecutor(
            max_workers=config.max_concurrent_solves, thread_name_prefix="dsfro-solve"
        )
        self.metrics = Metrics()
        self._checks = threading.BoundedSemaphore(check_slots(config))
        """ValidateSnapshot and EvaluatePlan in flight: bounded so that they cannot take every
        gRPC worker thread and starve health checks and solves."""
        self._running: dict[threading.Event, float] = {}
        """The stop events of the solves in flight, and when each is due (time.monotonic())."""
        self._running_lock = threading.Lock()
        self._draining = False

    def finish_solves(self) -> None:
        """Shutting down: admit no more solves, and make the running ones return their best
        plan so far now (their callers get it as an ordinary answer)."""
        with self._running_lock:
            self._draining = True
            for stop in self._running:
                stop.set()

    def health_problems(self) -> list[str]:
        """Why the service cannot serve now, if it cannot: solves stuck well past their due
        time (they hold slots and cores), or worker processes dying again and again."""
        now = time.monotonic()
        late = self._config.stuck_after_seconds
        with self._running_lock:
            stuck = [now - due for due in self._running.values() if now - due > late]
        problems = [f"a solve is {s:.0f}s past its due time" for s in sorted(stuck)]
        crashes = recent_pool_restarts(CRASH_WINDOW_SECONDS)
        if crashes >= CRASH_LOOP_RESTARTS:
            problems.append(
                f"solve worker pool replaced {crashes} times in the last "
                f"{CRASH_WINDOW_SECONDS:.0f}s"
            )
        return problems

    def close(self) -> None:
        """Accept no more solves; running ones finish on their own threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._executor.close()

    def Solve(self, data: bytes, context: grpc.ServicerContext) -> pb.SolveResponse:
        """Admission first, on the raw bytes: a refusal costs no decoding, however large the
        snapshot. The slot is released on every early exit, or handed to the solve."""
        arrival = time.monotonic()
        if not self._slots.acquire(blocking=False):
            self.metrics.rejected("solve_slots")
            n = self._config.max_concurrent_solves
            context.abort_with_status(
                retry_status(
                    f"{n} solves are already running (max_concurrent_solves={n}); retry later",
                    RETRY_AFTER_SECONDS,
                )
            )
        handed = False
        try:
            problem, deadline, cancel = self._admitted_solve(data, context, arrival)
            try:
                future = self._pool.submit(
                    contextvars.copy_context().run,  # the solve logs with the call's request id
                    pipeline.solve,
                    problem,
                    deadline=deadline,
                    executor=self._executor,
                    cancel=cancel,
                )
            except RuntimeError:  # the pool is shut down
                self._forget(cancel)
                context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
            future.add_done_callback(lambda _: self._slots.release())
            handed = True
        finally:
            if not handed:
                self._slots.release()
        self.metrics.in_flight.inc()
        future.add_done_callback(lambda _: self.metrics.in_flight.dec())
        future.add_done_callback(lambda _: self._forget(cancel))
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        context.add_callback(done.set)  # also wake up when the call ends (cancel, deadline)
        done.wait()
        if not future.done():
            log.warning("solve abandoned: the call ended before the solver returned")
            return pb.SolveResponse()
        try:
            result: SolveResult = future.result()
            response = result_to_proto(result)
        except WorkerLost as e:  # before any plan existed; the pool is replaced on next use
            log.error("solve failed: %s", e)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{e} before any plan existed; retry")
        except Exception as e:
            _abort_internal(context, "solving", e)
        s = result.stats
        self.metrics.solved(s)
        tracing.annotate(
            {
                "dsfro.jobs": len(problem.jobs),
                "dsfro.nodes": len(problem.cluster.nodes),
                "dsfro.backend": s.backend_used.name,
                "dsfro.termination": s.termination.name,
                "dsfro.objective": s.objective,
                "dsfro.solve_seconds": s.wall_seconds,
            }
        )
        log.info(
            "solved %d jobs on %d nodes: %s by %s, objective %.6g in %.3fs",
            len(problem.jobs),
            len(problem.cluster.nodes),
            s.termination.name,
            s.backend_used.name,
            s.objective,
            s.wall_seconds,
        )
        return response

    def _admitted_solve(
        self, data: bytes, context: grpc.ServicerContext, arrival: float
    ) -> tuple[Problem, float, threading.Event]:
        """The decoded, validated problem of an admitted call, its deadline, and the event that
        stops its solve; the call aborted if the request is bad or the server is stopping."""
        request = pipeline.prepare(_decode(pb.SolveRequest, data, context), self._config.profile)
        violations = validate_request(request, self._limits)
        if violations:
            self.metrics.rejected("invalid_argument")
            _abort_invalid(context, violations)
        try:
            problem = problem_from_proto(request, self._limits)
        except Exception as e:
            _abort_internal(context, "converting the request", e)
        deadline = self._deadline(context, arrival, problem)
        cancel = threading.Event()
        context.add_callback(cancel.set)  # the call ended (cancelled, expired): stop solving
        with self._running_lock:
            if self._draining:
                self.metrics.rejected("shutting_down")
                context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
            self._running[cancel] = deadline
        return problem, deadline, cancel

    @contextmanager
    def _check_slot(self, context: grpc.ServicerContext) -> Iterator[None]:
        """A slot for a ValidateSnapshot or EvaluatePlan call, or RESOURCE_EXHAUSTED at once."""
        if not self._checks.acquire(blocking=False):
            self.metrics.rejected("check_slots")
            n = check_slots(self._config)
            context.abort_with_status(
                retry_status(f"{n} checks are already running; retry later", RETRY_AFTER_SECONDS)
            )
        self.metrics.checks_in_flight.inc()
        try:
            yield
        finally:
            self.metrics.checks_in_flight.dec()
            self._checks.release()

    def _forget(self, stop: threading.Event) -> None:
        with self._running_lock:
            self._running.pop(stop, None)

    def _deadline(self, context: grpc.ServicerContext, arrival: float, problem: Problem) -> float:
        """The monotonic instant the solver must stop: the budget counted from the call's
        arrival (decoding, validation and conversion spend it too), less the time to convert
        and send the answer, and never past the RPC deadline minus the margin.

        The margin is the configured one, cut for short deadlines to a tenth of the time left,
        yet never below the time to send this answer: a short deadline keeps most of its time
        for solving.
        """
        slow = slowdown(time.monotonic() - arrival, len(problem.jobs))
        respond = (RESPOND_SECONDS + RESPOND_SECONDS_PER_JOB * len(problem.jobs)) * slow
        # The solver keeps back what it needs to finish its plan, measured on an idle
        # machine; on a slowed one the rest of that comes off its deadline.
        respond += (slow - 1.0) * finish_seconds(problem)
        due = arrival + problem.options.time_budget_seconds - respond
        remaining: float | None = context.time_remaining()
        if remaining is None or not math.isfinite(remaining) or remaining > _NO_DEADLINE:
            return due
        margin = min(self._config.rpc_deadline_margin_seconds, max(respond, remaining / 10))
        return min(due, time.monotonic() + remaining - margin)

    def ValidateSnapshot(
        self, data: bytes, context: grpc.ServicerContext
    ) -> pb.ValidateSnapshotResponse:
        with self._check_slot(context):
            request = _decode(pb.ValidateSnapshotRequest, data, context)
            return _guard(
                context,
                "validating the snapshot",
                lambda: pipeline.validate_snapshot(
                    request.request, self._limits, self._config.profile
                ),
            )

    def EvaluatePlan(self, data: bytes, context: grpc.ServicerContext) -> pb.EvaluatePlanResponse:
        with self._check_slot(context):
            return self._evaluate_plan(_decode(pb.EvaluatePlanRequest, data, context), context)

    def _evaluate_plan(
        self, request: pb.EvaluatePlanRequest, context: grpc.ServicerContext
    ) -> pb.EvaluatePlanResponse:
        violations = validate_request(request.request, self._limits)
        if not violations:
            violations = validate_plan(request.request, request.plan, self._limits)
        if violations:
            _abort_invalid(context, violations)
        problem = _guard(
            context,
            "converting the request",
            lambda: problem_from_proto(request.request, self._limits),
        )
        allocations = allocations_from_proto(request.plan)
        ev = _guard(
            context,
            "evaluating the plan",
            lambda: evaluation.evaluate_allocations(problem, allocations),
        )
        response = pb.EvaluatePlanResponse(
            valid=not ev.violations and ev.plan is not None,
            violations=[
                pb.PlanViolation(constraint=v.constraint, job=v.job, message=v.message)
                for v in ev.violations
            ],
        )
        if response.valid and ev.plan is not None:
            response.objective.CopyFrom(objective_to_proto(ev.plan.objective))
        return response

    def GetServerInfo(self, data: bytes, context: grpc.ServicerContext) -> pb.GetServerInfoResponse:
        _decode(pb.GetServerInfoRequest, data, context)
        c = self._config
        return pb.GetServerInfoResponse(
            version=solver.__version__,
            backends=[
                pb.BACKEND_AUTO,
                pb.BACKEND_CPSAT,
                pb.BACKEND_HIGHS,
                pb.BACKEND_PYOMO,
                pb.BACKEND_AGGREGATE,
                pb.BACKEND_DECOMPOSED,
                pb.BACKEND_HEURISTIC,
            ],
            max_time_budget=duration_to_proto(c.limits.max_time_budget_seconds),
            max_nodes=c.limits.max_nodes,
            max_jobs=c.limits.max_jobs,
            max_concurrent_solves=c.max_concurrent_solves,
            max_message_bytes=c.max_message_bytes,
            solver_versions={
                name: _version(name)
                for name in ("ortools", "highspy", "pyomo", "ray", "protobuf", "grpcio")
            },
        )


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


M = TypeVar("M", bound=Message)


def _decode(message: type[M], data: bytes, context: grpc.ServicerContext) -> M:
    """The request decoded, or INVALID_ARGUMENT (field ``request``) for bytes that are not one
    (rather than grpcio's INTERNAL "Exception deserializing request")."""
    try:
        return message.FromString(data)
    except Exception as e:  # DecodeError, and whatever else bad bytes may raise
        name = message.DESCRIPTOR.full_name
        log.info("rejected undecodable %s: %s", name, e)
        _abort_invalid(context, [FieldViolation("request", f"not a valid {name} ({e})")])


def _violation_to_proto(v: FieldViolation) -> pb.FieldViolation:
    return pb.FieldViolation(field=v.field, description=v.description)


def _guard(context: grpc.ServicerContext, what: str, fn: Callable[[], T]) -> T:
    """fn(), with any exception turned into INTERNAL (logged, never sent as a traceback)."""
    try:
        return fn()
    except Exception as e:
        _abort_internal(context, what, e)


def _abort_internal(context: grpc.ServicerContext, what: str, exc: BaseException) -> NoReturn:
    ref = uuid.uuid4().hex[:12]
    log.error("internal error while %s [ref %s]", what, ref, exc_info=exc)
    context.abort(
        grpc.StatusCode.INTERNAL, f"internal error while {what} (server log reference {ref})"
    )
    raise AssertionError("unreachable: abort raises")


def bad_request_status(violations: Sequence[FieldViolation]) -> Any:
    """INVALID_ARGUMENT with google.rpc.BadRequest details, as a grpc.Status.

    Only as many violations as fit in MAX_DETAIL_BYTES are attached; ValidateSnapshot returns
    them all.
    """
    bad = error_details_pb2.BadRequest()
    for v in violations:
        bad.field_violations.add(field=v.field, description=v.description)
        if bad.ByteSize() > MAX_DETAIL_BYTES:
            del bad.field_violations[-1]
            break
    shown = "; ".join(f"{v.field}: {v.description}" for v in violations[:3])
    more = len(violations) - 3
    message = f"invalid request ({len(violations)} problems): {shown}"
    if more > 0:
        message += f"; and {more} more"
    if len(bad.field_violations) < len(violations):
        message += f" (details list the first {len(bad.field_violations)})"
    detail = any_pb2.Any()
    detail.Pack(bad)
    status = status_pb2.Status(
        code=code_pb2.INVALID_ARGUMENT, message=message[:1000], details=[detail]
    )
    return rpc_status.to_status(status)


RETRY_AFTER_SECONDS = 1.0
"""The retry delay a refused call is told (google.rpc.RetryInfo): about a short solve."""


def check_slots(config: ServerConfig) -> int:
    """How many ValidateSnapshot and EvaluatePlan calls run at once: the gRPC workers left
    after the solves and two kept for health checks and refusals."""
    return max(1, config.grpc_workers - config.max_concurrent_solves - 2)


def retry_status(message: str, seconds: float) -> Any:
    """RESOURCE_EXHAUSTED with google.rpc.RetryInfo (when to try again), as a grpc.Status."""
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromMilliseconds(round(seconds * 1000))
    status = status_pb2.Status(code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], message=message)
    status.details.add().Pack(retry)
    return rpc_status.to_status(status)


def _abort_invalid(context: grpc.ServicerContext, violations: Sequence[FieldViolation]) -> NoReturn:
    context.abort_with_status(bad_request_status(violations))
    raise AssertionError("unreachable: abort_with_status raises")


__all__ = [
    "SERVICE_NAME",
    "SchedulerServicer",
    "bad_request_status",
]
