"""The gRPC server: the service, health and reflection on one port; health says SERVING only
once the models have loaded; SIGTERM drains running calls within the grace period."""

from __future__ import annotations

import argparse
import faulthandler
import ipaddress
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import FrameType
from typing import Any
from wsgiref.simple_server import WSGIServer

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

import solver
from solver import perfmodel
from solver._proto.dsfro.v1 import scheduler_pb2
from solver.core.solver import Solver
from solver.runtime import collector
from solver.runtime import memory as supervise
from solver.service import tracing
from solver.service.config import (
    ConfigError,
    ServerConfig,
    add_server_arguments,
    config_from_args,
)
from solver.service.logs import RequestLogInterceptor, configure_logging
from solver.service.metrics import serve_metrics
from solver.service.reflection import enable_server_reflection
from solver.service.security import AuthInterceptor, Refusal, TokenSource, server_credentials
from solver.service.servicer import SERVICE_NAME, SchedulerServicer

log = logging.getLogger(__name__)

SIGNAL_POLL_SECONDS = 0.2
"""How often the main thread wakes to run signal handlers (SIGTERM, SIGINT)."""
HEALTH_WATCH_SECONDS = 1.0
"""How often the service's health status is brought up to date."""

CLOSE_WAIT_SECONDS = 5.0
"""After the drain, how long the process waits for its solve workers to be closed (a worker
stops within about a second of its stop) before it exits anyway."""

NO_PORT_SHARING = (("grpc.so_reuseport", 0),)
"""gRPC on Linux lets a second server bind a port another one serves (SO_REUSEPORT): a second
replica, or a stale server, then took half the calls with its own credentials. Off: the second
one fails to start, "cannot listen"."""

CONNECTION_HYGIENE = (
    ("grpc.server_handshake_timeout_ms", 10_000),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
)
"""A connection that has not finished its TLS and HTTP/2 handshake in 10 s is closed (gRPC's
default waits 120 s: 200 connections that never spoke held a server with 128 descriptors
unreachable for two minutes), and each connection is pinged after a minute without traffic, so
that one whose client host died is closed within 80 s, cancelling its solve (by default
nothing would notice until the answer was sent). A live client answers the pings itself."""


class SchedulerServer(grpc.Server):  # type: ignore[misc]
    """A grpc.Server with the service, health and reflection, bound to ``port``.

    ``stop`` reports NOT_SERVING first, then lets running calls finish within the grace period.
    """

    def __init__(self, config: ServerConfig, solver: Solver | None = None) -> None:
        """`solver` answers the Solves (default: one made from the config's settings)."""
        self.config = config
        supervise.set_worker_memory_limit(config.worker_memory_bytes)
        self.servicer = SchedulerServicer(config, solver)
        self._stopping = threading.Event()
        self._metrics_server: WSGIServer | None = None
        self._closer: threading.Thread | None = None
        self.metrics_port: int | None = None
        self.health = health.HealthServicer()
        for name in ("", SERVICE_NAME):
            self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        n = config.max_message_bytes
        interceptors: list[grpc.ServerInterceptor] = [RequestLogInterceptor()]
        self._tracer_provider = tracing.tracer_provider() if config.tracing else None
        if self._tracer_provider is not None:
            tracer = self._tracer_provider.get_tracer(tracing.INSTRUMENTATION)
            interceptors.append(tracing.TracingInterceptor(tracer))
        if config.authenticates or config.allowed_clients:
            tokens = TokenSource(config.token, config.token_file) if config.authenticates else None
            interceptors.append(
                AuthInterceptor(tokens, config.allowed_clients, self._count_refusal)
            )
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=config.grpc_workers, thread_name_prefix="dsfro-rpc"),
            options=[
                ("grpc.max_receive_message_length", n),
                ("grpc.max_send_message_length", n),
                *NO_PORT_SHARING,
                *CONNECTION_HYGIENE,
            ],
            interceptors=interceptors,
        )
        add_service_taking_bytes(self.servicer, self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self._server)
        if config.reflection:
            enable_server_reflection(
                (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name),
                self._server,
            )
        self.address = _address(config.host, config.port)
        credentials = server_credentials(config.tls) if config.tls is not None else None
        self.port = _listen(self._server, self.address, credentials)
        self._health_server: grpc.Server | None = None
        self.health_port: int | None = None
        if config.health_port is not None:
            # Its own threads: probes are answered however busy the service's threads are.
            self._health_server = grpc.server(
                ThreadPoolExecutor(max_workers=2, thread_name_prefix="dsfro-health"),
                options=[
                    ("grpc.max_receive_message_length", 4096),
                    *NO_PORT_SHARING,
                    *CONNECTION_HYGIENE,
                ],
            )
            health_pb2_grpc.add_HealthServicer_to_server(self.health, self._health_server)
            self.health_port = _listen(
                self._health_server, _address(config.host, config.health_port), None
            )

    def _watch_health(self) -> None:
        """Every HEALTH_WATCH_SECONDS, the service's health status follows whether it can
        serve (servicer.health_problems); the overall status stays SERVING while the process
        answers, so a liveness probe restarts it only when it does not."""
        serving = True
        while not self._stopping.wait(HEALTH_WATCH_SECONDS):
            problems = self.servicer.health_problems()
            if (not problems) == serving or self._stopping.is_set():
                continue
            serving = not problems
            if serving:
                log.info("serving again")
                self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
            else:
                log.error("not serving: %s", "; ".join(problems))
                self.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING)

    def _count_refusal(self, refusal: Refusal) -> None:
        self.servicer.metrics.rejected(refusal.reason)

    def start(self, freeze: bool = False) -> None:
        """Load and validate models/ (CatalogError naming a missing or bad file) and start the
        solve workers, then serve; health stays NOT_SERVING until then. With `freeze` (a
        serving process, not a test's), what starting made is frozen before the port serves:
        never scanned again, where each full collection had taken about 80 ms under 32
        clients (solver.runtime.collector)."""
        perfmodel.load_all()
        self.servicer.warm_up()
        if freeze:
            collector.freeze_imports()
        if self.config.metrics_port is not None:
            try:
                self._metrics_server, self.metrics_port = serve_metrics(
                    self.servicer.metrics, self.config.host, self.config.metrics_port
                )
            except OSError as e:
                where = f"{self.config.host}:{self.config.metrics_port}"
                raise OSError(f"cannot serve metrics on {where} (DSFRO_METRICS_PORT): {e}") from e
        self._server.start()
        if self._health_server is not None:
            self._health_server.start()
        threading.Thread(target=self._watch_health, name="dsfro-health-watch", daemon=True).start()
        for name in ("", SERVICE_NAME):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "dsfro %s listening on %s:%d (%s)",
            solver.__version__,
            self.config.host,
            self.port,
            _security_summary(self.config),
        )
        if self.health_port is not None:
            log.info("health checks in plaintext on %s:%d", self.config.host, self.health_port)
        if self.metrics_port is not None:
            log.info("metrics on http://%s:%d/metrics", self.config.host, self.metrics_port)
        if not is_loopback(self.config.host) and self.config.tls is None:
            exposed = (
                "bearer tokens travel in the clear"
                if self.config.authenticates
                else "anyone who can reach it can read and submit snapshots"
            )
            log.warning(
                "listening on %s port %d beyond loopback in plaintext: %s. Serve TLS "
                "(--tls-cert, --tls-key; --tls-client-ca for mutual TLS), bind to 127.0.0.1, "
                "or put the service behind a proxy that authenticates and encrypts.",
                self.config.host,
                self.port,
                exposed,
            )

    def stop(self, grace: float | None) -> threading.Event:
        """Stop admitting calls; solves in flight return their best plan so far at once, so
        their callers are answered within the grace period."""
        self._stopping.set()
        self.health.enter_graceful_shutdown()
        self.servicer.finish_solves()
        done: threading.Event = self._server.stop(grace)

        # The solver pools close once the calls have ended: closing them now would cancel
        # the parts of a decomposed solve that is still answering.
        def close_when_done() -> None:
            done.wait()
            self.servicer.close()

        self._closer = threading.Thread(target=close_when_done, name="dsfro-close", daemon=True)
        self._closer.start()
        if self._health_server is not None:
            self._health_server.stop(None)
        if self._tracer_provider is not None:
            done.wait(grace)  # the calls' spans end before they are flushed
            self._tracer_provider.shutdown()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server = None
        return done

    def wait_closed(self, timeout: float) -> None:
        """After ``stop``: wait (at most `timeout`) for the solve workers to be closed, so that
        the process exits after them, not beside them."""
        if self._closer is not None:
            self._closer.join(timeout)

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


# ---------------------------------------------------------------- registration


def add_service_taking_bytes(servicer: SchedulerServicer, server: Any) -> None:
    """Register the service as the generated code does, but with each request handed over as
    its bytes: the servicer takes its slot before decoding (a refusal costs no parsing, however
    large the snapshot), and answers bytes that are no request INVALID_ARGUMENT."""
    methods = scheduler_pb2.DESCRIPTOR.services_by_name["SchedulerService"].methods_by_name
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=None,  # bytes as they came
            response_serializer=_serialize,
        )
        for name in methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)


def _serialize(response: Any) -> bytes:
    """A response's bytes: Solve answers with the worker's bytes as they came."""
    return response if isinstance(response, bytes) else bytes(response.SerializeToString())


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _listen(server: grpc.Server, address: str, credentials: grpc.ServerCredentials | None) -> int:
    """Bind `address` (TLS with `credentials`, else plaintext); the port bound."""
    try:
        if credentials is None:
            port: int = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError as e:
        raise OSError(f"cannot listen on {address}: {e}") from e
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return port


def _security_summary(config: ServerConfig) -> str:
    if config.tls is None:
        transport = "plaintext"
    elif config.tls.client_ca is None:
        transport = "TLS"
    else:
        transport = "mutual TLS"
        if config.allowed_clients:
            transport += " for " + ", ".join(sorted(config.allowed_clients))
    return transport + (", bearer tokens" if config.authenticates else ", no tokens")


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or name the server binds) only accepts local connections."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def build_server(config: ServerConfig, solver: Solver | None = None) -> SchedulerServer:
    """A ready-to-start server bound to config.host:config.port (port 0: any free port);
    `solver` answers its Solves (default: one made from the config's settings)."""
    return SchedulerServer(config, solver)


def serve(config: ServerConfig) -> None:
    """Run until SIGTERM, SIGINT or SIGHUP, then shut down gracefully."""
    server = build_server(config)
    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Only an append, which takes no lock: the handler runs between two bytecodes of the
        # main thread, which may hold any lock then. It used to set an Event: a second SIGTERM
        # (`timeout` passes its own on) ran inside the first's Event.set and waited for the
        # lock that set held, and the server went on serving.
        received.append(signum)

    stops = [signal.SIGTERM, signal.SIGINT]
    # A hangup (the terminal of a foreground server closed) killed the process at once, its
    # calls cut; now it drains as SIGTERM does. Under nohup (SIGHUP ignored) it keeps serving.
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        stops.append(signal.SIGHUP)
    previous = {s: signal.signal(s, on_signal) for s in stops}
    # `kill -USR1 <pid>` prints every thread's stack to stderr: what a stuck server is doing.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        server.start(freeze=True)
        # Woken now and then: a signal the kernel hands to another thread only sets a flag,
        # and the main thread runs the handler when it next runs Python code.
        while not received:
            time.sleep(SIGNAL_POLL_SECONDS)
        log.info("received %s: shutting down", signal.Signals(received[0]).name)
        log.info("draining for up to %gs", config.grace_period_seconds)
        server.stop(config.grace_period_seconds).wait()
        server.wait_closed(CLOSE_WAIT_SECONDS)
        log.info("stopped")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """``python server.py [flags]``: serve until SIGTERM/SIGINT/SIGHUP; 2 on a bad setting."""
    parser = argparse.ArgumentParser(prog="server.py", description="Run the DSFRO gRPC service.")
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    return run_server(args, os.environ if environ is None else environ)


def run_server(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Serve with parsed flags; shared by server.py and ``dsfro serve``."""
    try:
        config = config_from_args(args, environ)
    except (ConfigError, ValueError) as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        return 2
    # Only now: a call that does not serve (a bad setting) leaves logging as it found it.
    log_format = (args.log_format or environ.get("DSFRO_LOG_FORMAT") or "text").strip().lower()
    try:
        configure_logging(args.log_level, log_format)
    except ValueError as e:
        print(f"dsfro: error: --log-level, --log-format (DSFRO_LOG_FORMAT): {e}", file=sys.stderr)
        return 2
    config = replace(config, log_level=args.log_level.upper(), log_format=log_format)
    try:
        serve(config)
    except (OSError, perfmodel.CatalogError) as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        return 2
    return 0
