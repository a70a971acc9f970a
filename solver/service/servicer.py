"""The gRPC service: admission, solves in worker processes, checks, health.

Each Solve takes a slot (``admission``: a short wait counted in its budget, else
RESOURCE_EXHAUSTED with RetryInfo) before its request is decoded, then runs in a solve worker
(``solves``): the RPC thread only waits, relays cancellation and kills on deadline, so solves
never share the server's interpreter. ValidateSnapshot and EvaluatePlan run on the RPC thread,
at most ``check_slots`` at a time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata

import grpc

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app import pipeline
from solver.app.convert import (
    allocations_from_proto,
    duration_to_proto,
    margin_to_proto,
    objective_to_proto,
    problem_from_proto,
)
from solver.app.convert_mig import changes_from_proto
from solver.app.convert_power import actions_from_proto, power_limits_from_proto
from solver.app.evaluate import evaluate_plan
from solver.app.validation import FieldViolation, validate_plan, validate_request
from solver.core.solver import Solver
from solver.runtime import crashes
from solver.runtime.cores import available_cores
from solver.runtime.memory import overflow, private_bytes, resident_bytes, worker_memory_limit
from solver.runtime.workerpool import WorkerPool
from solver.scoring.power import power_margin
from solver.service import head, logs, tracing
from solver.service.admission import Admission, Refused
from solver.service.config import ServerConfig
from solver.service.metrics import Metrics
from solver.service.solves import SolveFailed, SolveRunner, new_pool, shared_pool
from solver.service.status import (
    abort_internal,
    abort_invalid,
    decode,
    guard,
    retry_status,
)
from solver.service.worker import Answer, SolveCall

log = logging.getLogger(__name__)

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["SchedulerService"].full_name
CRASH_WINDOW_SECONDS = 60.0
CRASH_LOOP_RESTARTS = 3
"""Workers replaced this many times within the window: a crash loop, not bad luck (one kill
costs one replacement)."""
RETRY_AFTER_SECONDS = 1.0
"""The retry delay a refused check is told (google.rpc.RetryInfo): about a short solve."""


class SchedulerServicer(scheduler_pb2_grpc.SchedulerServiceServicer):
    """The four RPCs of dsfro.v1.SchedulerService."""

    def __init__(
        self, config: ServerConfig, solver: Solver | None = None, pool: WorkerPool | None = None
    ) -> None:
        """`solver` answers every Solve in the workers (default: one made from the config's
        settings); `pool` holds the workers (default: the process's shared one, unless the
        solver joins a Ray cluster: its workers then keep that connection, and Ray ends them
        60 s after its cluster stops, so they are this servicer's own and closed with it)."""
        self._config = config
        self._limits = config.limits
        self.solver = solver or Solver(config.solver_settings, ray_address=config.ray_address)
        self._own_pool = pool is None and self.solver.ray_address is not None
        if pool is None:
            pool = new_pool() if self._own_pool else shared_pool()
        self.pool = pool
        self.admission = Admission(
            config.max_concurrent_solves, config.max_queued_solves, config.queue_wait_share
        )
        self.runner = SolveRunner(self.pool, self.solver.settings.kill_grace_seconds)
        self.metrics = Metrics()
        self._cores = available_cores()
        """Shared by the solves running at once (``SolveCall.cores``)."""
        self._checks = _Slots(check_slots(config))
        """ValidateSnapshot and EvaluatePlan in flight: bounded so that they cannot take every
        gRPC worker thread and starve health checks and solves."""

    def warm_up(self) -> None:
        """Start a solve worker per slot, and one spare, before the server says SERVING; an
        OSError, before starting them all, when they cannot fit: the workers' memory limit is
        below what one uses idle (every solve would lose its worker), or the container's memory
        is below what the slots' idle workers take (the kernel would kill the server)."""
        workers = self._config.max_concurrent_solves + 1
        self.pool.warm_now(1)
        pids = self.pool.idle_pids()
        idle = max((resident_bytes(pid) or 0 for pid in pids), default=0)
        limit = worker_memory_limit()
        if limit is not None and idle >= limit:
            raise OSError(
                f"DSFRO_WORKER_MEMORY_MIB (--worker-memory-mib) is {limit // 2**20} MiB, and a "
                f"solve worker uses {-(-idle // 2**20)} MiB before it solves anything: every "
                f"solve would lose its worker and answer with the quick plan; give it more "
                f"(docs/operations.md, sizing: 1,024 MiB for snapshots up to xl)"
            )
        own = max((private_bytes(pid) or 0 for pid in pids), default=0)
        if (why := overflow(workers, own)) is not None:
            raise OSError(
                f"DSFRO_MAX_CONCURRENT_SOLVES (--max-concurrent-solves) is "
                f"{self._config.max_concurrent_solves}, one solve worker a slot and a spare: "
                f"{why}; give one slot per core (docs/operations.md, sizing)"
            )
        self.pool.warm_now(workers)

    def finish_solves(self) -> None:
        """Shutting down: admit no more solves, and make the running ones return their best
        plan so far now (their callers get it as an ordinary answer)."""
        self.admission.drain()

    def health_problems(self) -> list[str]:
        """Why the service cannot serve now, if it cannot: solves stuck well past their due
        time (they hold slots and cores), or worker processes dying again and again."""
        late = self.admission.late(self._config.stuck_after_seconds)
        problems = [f"a solve is {s:.0f}s past its due time" for s in late]
        replaced = crashes.recent(CRASH_WINDOW_SECONDS)
        if replaced >= CRASH_LOOP_RESTARTS:
            problems.append(
                f"solve worker processes replaced {replaced} times in the last "
                f"{CRASH_WINDOW_SECONDS:.0f}s"
            )
        return problems

    def close(self) -> None:
        """Release what this servicer made: its solver, and its own worker pool if it has one
        (the shared pool stays for the process)."""
        self.solver.close()
        if self._own_pool:
            self.pool.close()

    # ------------------------------------------------------------ Solve

    def Solve(self, data: bytes, context: grpc.ServicerContext) -> bytes:
        """Admission first, on the raw bytes: a refusal costs no decoding, however large the
        snapshot. The answer's bytes come from the worker as they are."""
        arrival = time.monotonic()
        budget = head.budget_seconds(data, self._config.profile, self._limits)
        remaining = context.time_remaining()
        caller_end = None if remaining is None else arrival + remaining
        due = arrival + budget if caller_end is None else min(arrival + budget, caller_end)
        try:
            running = self.admission.admit(budget, arrival, due)
        except Refused as e:
            reason = "shutting_down" if "shutting down" in str(e) else "solve_slots"
            self.metrics.rejected(reason)
            if reason == "shutting_down":
                context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
            context.abort_with_status(retry_status(str(e), e.retry_after))
        context.add_callback(running.caller_gone)  # the call ended (cancelled, expired)
        call = SolveCall(
            data,
            arrival,
            caller_end,
            self.solver,
            self._config.profile,
            self._limits,
            logs.request_id.get(),
            self._config.log_level,
            self._config.log_format,
            cores=max(1, self._cores // running.concurrent),
            budget=budget,
        )
        self.metrics.in_flight.inc()
        try:
            outcome = self.runner.run(call, running)
        except SolveFailed as e:
            abort_internal(context, "solving", str(e))
        finally:
            self.metrics.in_flight.dec()
            self.admission.release(running)
        if running.gone:  # nobody reads it: neither counted nor logged as solved
            return b""
        if outcome.fallback:
            self.metrics.fallbacks.inc()
        return self._respond(outcome.answer, context)

    def _respond(self, answer: Answer, context: grpc.ServicerContext) -> bytes:
        if answer.violations:
            self.metrics.rejected("invalid_argument")
            abort_invalid(context, [FieldViolation(f, d) for f, d in answer.violations])
        assert answer.response is not None
        s = answer.summary
        if s is not None:
            self.solver.note_pace(s.first_plan_seconds, s.resolve_seconds, s.jobs)  # next call's
            self.metrics.solved(s.backend, s.termination.name, s.wall_seconds, s.relative_gap)
            tracing.annotate(
                {
                    "dsfro.jobs": s.jobs,
                    "dsfro.nodes": s.nodes,
                    "dsfro.backend": s.backend,
                    "dsfro.termination": s.termination.name,
                    "dsfro.objective": s.objective,
                    "dsfro.solve_seconds": s.wall_seconds,
                }
            )
            log.info(
                "solved %d jobs on %d nodes: %s by %s, objective %.6g in %.3fs",
                s.jobs,
                s.nodes,
                s.termination.name,
                s.backend,
                s.objective,
                s.wall_seconds,
            )
        return answer.response

    # ------------------------------------------------------------ checks

    def ValidateSnapshot(
        self, data: bytes, context: grpc.ServicerContext
    ) -> pb.ValidateSnapshotResponse:
        with self._check_slot(context):
            request = decode(pb.ValidateSnapshotRequest, data, context)
            return guard(
                context,
                "validating the snapshot",
                lambda: pipeline.validate_snapshot(
                    request.request, self._limits, self._config.profile
                ),
            )

    def EvaluatePlan(self, data: bytes, context: grpc.ServicerContext) -> pb.EvaluatePlanResponse:
        with self._check_slot(context):
            message = decode(pb.EvaluatePlanRequest, data, context)
            # The snapshot as Solve reads it: the server's profile fills what it leaves unset.
            request = pipeline.prepare(message.request, self._config.profile)
            violations = validate_request(request, self._limits)
            if not violations:
                violations = validate_plan(request, message.plan, self._limits)
            if violations:
                abort_invalid(context, violations)
            problem = guard(
                context,
                "converting the request",
                lambda: problem_from_proto(request, self._limits),
            )
            allocations = allocations_from_proto(message.plan)
            changes = changes_from_proto(message.plan)
            actions = actions_from_proto(message.plan)
            limits = power_limits_from_proto(message.plan)
            settings = self.solver.settings
            ev = guard(
                context,
                "evaluating the plan",
                lambda: evaluate_plan(
                    problem, allocations, changes, actions, limits, settings=settings
                ),
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
                params = self.solver.settings.guard_params()
                if (m := power_margin(problem, ev.plan.assignments, params)) is not None:
                    response.power_margin.CopyFrom(margin_to_proto(m))
            return response

    @contextmanager
    def _check_slot(self, context: grpc.ServicerContext) -> Iterator[None]:
        """A slot for a ValidateSnapshot or EvaluatePlan call, or RESOURCE_EXHAUSTED at once."""
        if not self._checks.take():
            self.metrics.rejected("check_slots")
            n = self._checks.size
            context.abort_with_status(
                retry_status(f"{n} checks are already running; retry later", RETRY_AFTER_SECONDS)
            )
        self.metrics.checks_in_flight.inc()
        try:
            yield
        finally:
            self.metrics.checks_in_flight.dec()
            self._checks.give()

    def GetServerInfo(self, data: bytes, context: grpc.ServicerContext) -> pb.GetServerInfoResponse:
        decode(pb.GetServerInfoRequest, data, context)
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
            max_profile_points=c.limits.max_profile_points,
            max_rule_node_pairs=c.limits.max_rule_node_pairs,
            max_concurrent_solves=c.max_concurrent_solves,
            max_message_bytes=c.max_message_bytes,
            solver_versions={
                name: _version(name)
                for name in ("ortools", "highspy", "pyomo", "ray", "protobuf", "grpcio")
            },
        )


class _Slots:
    def __init__(self, size: int) -> None:
        import threading

        self.size = size
        self._sem = threading.BoundedSemaphore(size)

    def take(self) -> bool:
        return self._sem.acquire(blocking=False)

    def give(self) -> None:
        self._sem.release()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def check_slots(config: ServerConfig) -> int:
    """How many ValidateSnapshot and EvaluatePlan calls run at once: the gRPC workers left
    after the solves, the calls waiting for a solve slot, and two kept for health checks and
    refusals."""
    taken = config.max_concurrent_solves + config.max_queued_solves + 2
    return max(1, config.grpc_workers - taken)


__all__ = ["SERVICE_NAME", "SchedulerServicer", "check_slots"]
