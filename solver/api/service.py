"""The gRPC service: validated input, bounded solving, health, reflection, graceful shutdown.

Solves run on their own bounded worker pool, never on an RPC thread, and at most
``max_concurrent_solves`` at a time: a call beyond that gets RESOURCE_EXHAUSTED at once rather
than queueing behind solves that may take minutes. Each solve must answer before the RPC
deadline (minus a margin), whatever its time budget says.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from importlib import metadata
from types import FrameType
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_status import rpc_status

import solver
from solver import extras
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.api import pipeline
from solver.api.convert import (
    allocations_from_proto,
    duration_to_proto,
    objective_to_proto,
    problem_from_proto,
    result_to_proto,
)
from solver.api.profile import Profile, ProfileError, load_profile
from solver.api.reflection import enable_server_reflection
from solver.api.settings import MAX_MESSAGE_BYTES, Limits
from solver.api.validation import FieldViolation, validate_plan, validate_request
from solver.domain import SolveResult
from solver.model import catalog
from solver.scoring import evaluation
from solver.search.executor import RAY_ADDRESS_ENV, LazyExecutor

log = logging.getLogger(__name__)

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["SchedulerService"].full_name
MAX_DETAIL_BYTES = 4096
"""BadRequest details travel in trailing metadata, which clients cap (8 KiB by default)."""
_NO_DEADLINE = 1e7
"""time_remaining() above this many seconds: the call has no deadline."""

T = TypeVar("T")


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 50051
    max_concurrent_solves: int = 2
    max_message_bytes: int = MAX_MESSAGE_BYTES
    limits: Limits = field(default_factory=Limits)
    rpc_deadline_margin_seconds: float = 0.2
    """Time kept back from the RPC deadline to convert and send the answer."""
    grpc_workers: int = 16
    """RPC threads; more than max_concurrent_solves so other calls are served during solves."""
    grace_period_seconds: float = 10.0
    ray_address: str | None = None
    """Decomposed solves run their sub-problems on this Ray cluster; None: local processes."""
    profile: Profile | None = None
    """Operator weights and solver settings that fill what a request leaves unset."""
    """On shutdown, how long running calls may take to finish."""


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

    def close(self) -> None:
        """Accept no more solves; running ones finish on their own threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._executor.close()

    def Solve(self, request: pb.SolveRequest, context: grpc.ServicerContext) -> pb.SolveResponse:
        request = pipeline.prepare(request, self._config.profile)
        violations = validate_request(request, self._limits)
        if violations:
            _abort_invalid(context, violations)
        if not self._slots.acquire(blocking=False):
            n = self._config.max_concurrent_solves
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{n} solves are already running (max_concurrent_solves={n}); retry later",
            )
        deadline = self._deadline(context)
        try:
            problem = problem_from_proto(request, self._limits)
        except Exception as e:
            self._slots.release()
            _abort_internal(context, "converting the request", e)
        try:
            future = self._pool.submit(
                pipeline.solve, problem, deadline=deadline, executor=self._executor
            )
        except RuntimeError:  # the pool is shut down
            self._slots.release()
            context.abort(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        future.add_done_callback(lambda _: self._slots.release())
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
        except Exception as e:
            _abort_internal(context, "solving", e)
        s = result.stats
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

    def _deadline(self, context: grpc.ServicerContext) -> float | None:
        """The monotonic instant the answer is due: the RPC deadline minus the margin.

        The margin is at most half the time left, so that a short deadline still leaves the
        solver some time rather than none.
        """
        remaining: float | None = context.time_remaining()
        if remaining is None or not math.isfinite(remaining) or remaining > _NO_DEADLINE:
            return None
        margin = min(self._config.rpc_deadline_margin_seconds, remaining / 2)
        return time.monotonic() + remaining - margin

    def ValidateSnapshot(
        self, request: pb.ValidateSnapshotRequest, context: grpc.ServicerContext
    ) -> pb.ValidateSnapshotResponse:
        return _guard(
            context,
            "validating the snapshot",
            lambda: pipeline.validate_snapshot(request.request, self._limits, self._config.profile),
        )

    def EvaluatePlan(
        self, request: pb.EvaluatePlanRequest, context: grpc.ServicerContext
    ) -> pb.EvaluatePlanResponse:
        violations = validate_request(request.request, self._limits)
        if not violations:
            violations = validate_plan(request.request, request.plan)
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

    def GetServerInfo(
        self, request: pb.GetServerInfoRequest, context: grpc.ServicerContext
    ) -> pb.GetServerInfoResponse:
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


def _abort_invalid(context: grpc.ServicerContext, violations: Sequence[FieldViolation]) -> NoReturn:
    context.abort_with_status(bad_request_status(violations))
    raise AssertionError("unreachable: abort_with_status raises")


# ---------------------------------------------------------------- server


class SchedulerServer(grpc.Server):  # type: ignore[misc]
    """A grpc.Server with the service, health and reflection, bound to ``port``.

    ``stop`` reports NOT_SERVING first, then lets running calls finish within the grace period.
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.servicer = SchedulerServicer(config)
        self.health = health.HealthServicer()
        for name in ("", SERVICE_NAME):
            self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        n = config.max_message_bytes
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=config.grpc_workers, thread_name_prefix="dsfro-rpc"),
            options=[("grpc.max_receive_message_length", n), ("grpc.max_send_message_length", n)],
        )
        # Generated code is untyped.
        scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(  # type: ignore[no-untyped-call]
            self.servicer, self._server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        enable_server_reflection(
            (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name),
            self._server,
        )
        host = f"[{config.host}]" if ":" in config.host else config.host
        self.address = f"{host}:{config.port}"
        try:
            port: int = self._server.add_insecure_port(self.address)
        except RuntimeError as e:
            raise OSError(f"cannot listen on {self.address}: {e}") from e
        if port == 0:
            raise OSError(f"cannot listen on {self.address}")
        self.port = port

    def start(self) -> None:
        """Load and validate models/ (CatalogError naming a missing or bad file), then serve;
        health stays NOT_SERVING until the models have loaded."""
        catalog.load_all()
        self._server.start()
        for name in ("", SERVICE_NAME):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("dsfro %s listening on %s:%d", solver.__version__, self.config.host, self.port)

    def stop(self, grace: float | None) -> threading.Event:
        self.health.enter_graceful_shutdown()
        done: threading.Event = self._server.stop(grace)
        self.servicer.close()
        return done

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return bool(self._server.wait_for_termination(timeout))

    def add_generic_rpc_handlers(self, generic_rpc_handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(generic_rpc_handlers)

    def add_registered_method_handlers(self, service_name: str, method_handlers: Any) -> None:
        self._server.add_registered_method_handlers(service_name, method_handlers)

    def add_insecure_port(self, address: str) -> int:
        return int(self._server.add_insecure_port(address))

    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        return int(self._server.add_secure_port(address, server_credentials))


def build_server(config: ServerConfig) -> SchedulerServer:
    """A ready-to-start server bound to config.host:config.port (port 0: any free port)."""
    return SchedulerServer(config)


def serve(config: ServerConfig) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    server = build_server(config)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.start()
        stop.wait()
        log.info("draining for up to %gs", config.grace_period_seconds)
        server.stop(config.grace_period_seconds).wait()
        log.info("stopped")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# ---------------------------------------------------------------- configuration


class ConfigError(ValueError):
    """A bad server setting; the message names the flag or environment variable."""


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's flags; each overrides its environment variable."""
    parser.add_argument("--host", help="address to listen on (DSFRO_HOST; 127.0.0.1)")
    parser.add_argument("--port", help="port, 0 for any free one (DSFRO_PORT; 50051)")
    parser.add_argument(
        "--max-concurrent-solves",
        help="solves at once; more get RESOURCE_EXHAUSTED (DSFRO_MAX_CONCURRENT_SOLVES; 2)",
    )
    parser.add_argument(
        "--max-message-bytes", help="largest request/response (DSFRO_MAX_MESSAGE_BYTES; 256 MiB)"
    )
    parser.add_argument(
        "--max-time-budget-seconds",
        help="largest time budget accepted (DSFRO_MAX_TIME_BUDGET_SECONDS; 300)",
    )
    parser.add_argument("--workers", help="gRPC worker threads (16)")
    parser.add_argument("--grace-period-seconds", help="shutdown grace period (10)")
    parser.add_argument("--log-level", default="INFO", help="logging level (INFO)")
    parser.add_argument(
        "--ray-address",
        help="Ray cluster for decomposed solves (DSFRO_RAY_ADDRESS; none: local processes)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="TOML profile of weights and solver settings for requests that leave them unset "
        "(DSFRO_PROFILE)",
    )


def _setting(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    attr: str,
    env: str | None,
) -> tuple[str, str] | None:
    """(value, where it came from) of one setting: the flag wins over the environment."""
    flag = getattr(args, attr, None)
    if flag is not None:
        return str(flag), "--" + attr.replace("_", "-")
    if env is not None and env in environ:
        return environ[env], env
    return None


def _int(value: tuple[str, str], low: int, high: int) -> int:
    raw, where = value
    try:
        n = int(raw)
    except ValueError:
        n = low - 1
    if not low <= n <= high:
        raise ConfigError(f"{where} must be an integer in [{low}, {high}], got {raw!r}")
    return n


def _seconds(value: tuple[str, str]) -> float:
    raw, where = value
    try:
        x = float(raw)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise ConfigError(f"{where} must be a positive number of seconds, got {raw!r}")
    return x


def config_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> ServerConfig:
    """The server configuration from flags (see add_server_arguments) and environment."""
    env: Mapping[str, str] = environ if environ is not None else {}
    c = ServerConfig()
    if (v := _setting(args, env, "host", "DSFRO_HOST")) is not None:
        if not v[0]:
            raise ConfigError(f"{v[1]} must not be empty")
        c = replace(c, host=v[0])
    if (v := _setting(args, env, "port", "DSFRO_PORT")) is not None:
        c = replace(c, port=_int(v, 0, 65535))
    v = _setting(args, env, "max_concurrent_solves", "DSFRO_MAX_CONCURRENT_SOLVES")
    if v is not None:
        c = replace(c, max_concurrent_solves=_int(v, 1, 1024))
    if (v := _setting(args, env, "max_message_bytes", "DSFRO_MAX_MESSAGE_BYTES")) is not None:
        c = replace(c, max_message_bytes=_int(v, 4 * 1024 * 1024, 2**31 - 1))
    v = _setting(args, env, "max_time_budget_seconds", "DSFRO_MAX_TIME_BUDGET_SECONDS")
    if v is not None:
        top = _seconds(v)
        default = min(c.limits.default_time_budget_seconds, top)
        c = replace(
            c,
            limits=replace(
                c.limits, max_time_budget_seconds=top, default_time_budget_seconds=default
            ),
        )
    if (v := _setting(args, env, "profile", "DSFRO_PROFILE")) is not None:
        try:
            c = replace(c, profile=load_profile(v[0]))
        except ProfileError as e:
            raise ConfigError(f"{v[1]}: {e}") from e
    if (v := _setting(args, env, "ray_address", RAY_ADDRESS_ENV)) is not None:
        c = replace(c, ray_address=v[0] or None)
        if c.ray_address and not extras.available("ray"):
            raise ConfigError(f"{v[1]} needs ray, which is not installed: pip install 'dsfro[ray]'")
    if (v := _setting(args, env, "grace_period_seconds", None)) is not None:
        c = replace(c, grace_period_seconds=_seconds(v))
    workers = _setting(args, env, "workers", None)
    low = c.max_concurrent_solves + 2
    if workers is not None:
        c = replace(c, grpc_workers=_int(workers, low, 4096))
    elif c.grpc_workers < low:
        c = replace(c, grpc_workers=low + 8)
    return c


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """``python server.py [flags]``: serve until SIGTERM/SIGINT; 2 on a bad setting."""
    parser = argparse.ArgumentParser(prog="server.py", description="Run the DSFRO gRPC service.")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    return run_server(args, os.environ if environ is None else environ)


def run_server(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Serve with parsed flags; shared by server.py and ``dsfro serve``."""
    try:
        configure_logging(args.log_level)
        config = config_from_args(args, environ)
    except (ConfigError, ValueError) as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        return 2
    try:
        serve(config)
    except (OSError, catalog.CatalogError) as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "ConfigError",
    "SchedulerServer",
    "SchedulerServicer",
    "ServerConfig",
    "add_server_arguments",
    "bad_request_status",
    "build_server",
    "config_from_args",
    "main",
    "serve",
]
