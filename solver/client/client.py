"""The DSFRO client: one channel to one service, typed calls, retries within one deadline."""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.client.errors import DsfroError, Unavailable, connect_hint, error_from_rpc
from solver.client.retry import DEFAULT_RETRY, RetryPolicy
from solver.client.security import TlsConfig, TokenFile, checked_token, is_local_target
from solver.wire import message_from_dict, message_from_json

log = logging.getLogger(__name__)

DEFAULT_TIME_BUDGET_SECONDS = 5.0
"""The budget the server gives a request that sets none."""
TRANSFER_ALLOWANCE_SECONDS = 10.0
"""A solve's default deadline beyond its time budget: sending the snapshot, converting it,
and sending the plan back (snapshots of thousands of nodes take seconds)."""
DEFAULT_TIMEOUT_SECONDS = 30.0
"""Default deadline of ValidateSnapshot, EvaluatePlan and GetServerInfo."""
HEALTH_TIMEOUT_SECONDS = 2.0
"""Default deadline of a health check: a probe must answer fast or count as failed."""
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest request or response, as the server's default: large snapshots exceed gRPC's 4 MiB."""
REQUEST_ID_KEY = "x-request-id"
"""Metadata key of the id sent with every call, the same over its retries."""


M = TypeVar("M", bound=Message)

Snapshot = pb.SolveRequest | Mapping[str, Any] | str | bytes
"""A SolveRequest: the message, or its protobuf JSON form as Python data or as text."""
PlanLike = pb.Plan | Mapping[str, Any] | str | bytes
"""A Plan: the message, or its protobuf JSON form as Python data or as text."""


def as_message(value: object, message: type[M], what: str) -> M:
    """`value` as a `message`: the message itself, or parsed from Python data or JSON text;
    solver.wire.RequestFileError (a ValueError) names what is wrong, before any call."""
    if isinstance(value, message):
        return value
    if isinstance(value, str | bytes):
        return message_from_json(value, message, what)
    if isinstance(value, Mapping):
        return message_from_dict(value, message, what)
    raise TypeError(
        f"{what}: expected a {message.DESCRIPTOR.name}, a mapping or JSON text, "
        f"got {type(value).__name__}"
    )


def default_solve_timeout(request: pb.SolveRequest) -> float:
    """The default deadline of a Solve: its time budget (the server's default when unset)
    plus the transfer allowance."""
    if request.options.HasField("time_budget"):
        budget = request.options.time_budget.ToNanoseconds() / 1e9
    else:
        budget = DEFAULT_TIME_BUDGET_SECONDS
    return max(0.0, budget) + TRANSFER_ALLOWANCE_SECONDS


class Client:
    """Calls a DSFRO service; use it as a context manager, or ``close()`` it.

    ``tls``: None or False for plaintext, True for TLS checked against the system roots, or a
    TlsConfig (CA bundle, client certificate for mutual TLS, server name). ``token`` or
    ``token_file``: a bearer token sent with every call but health checks; the file is re-read
    when it changes. A token never goes in plaintext to an address beyond loopback unless
    ``allow_insecure_token`` (a ValueError otherwise). ``max_message_bytes``: the largest
    request or response this side sends or takes (-1: no limit). Failed calls raise
    DsfroError subclasses (solver.client.errors) after the retries ``retry`` allows.

    A Client is safe to share between threads.
    """

    def __init__(
        self,
        address: str,
        *,
        tls: TlsConfig | bool | None = None,
        token: str | None = None,
        token_file: str | Path | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        allow_insecure_token: bool = False,
    ) -> None:
        if not isinstance(address, str) or not address.strip():
            raise ValueError(f"address: expected HOST:PORT (e.g. 127.0.0.1:50051), got {address!r}")
        if token is not None and token_file is not None:
            raise ValueError("give token or token_file, not both")
        tls_config = TlsConfig() if tls is True else (tls or None)
        if (
            (token is not None or token_file is not None)
            and tls_config is None
            and not is_local_target(address)
            and not allow_insecure_token
        ):
            raise ValueError(
                f"refusing to send a bearer token in plaintext to {address}: anyone on the "
                "path could read and reuse it. Use TLS (tls=True or a TlsConfig), or pass "
                "allow_insecure_token=True if the network is trusted."
            )
        self._token: Callable[[], str] | None = None
        if token is not None:
            fixed = checked_token(token, "the token")
            self._token = lambda: fixed
        elif token_file is not None:
            self._token = TokenFile(token_file).token
        self.address = address
        self.retry = retry
        self._tls = (tls_config is not None, tls_config is not None and bool(tls_config.cert_file))
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
        ]
        if tls_config is None:
            self._channel = grpc.insecure_channel(address, options=options)
        else:
            if tls_config.server_name:
                options.append(("grpc.ssl_target_name_override", tls_config.server_name))
            credentials = tls_config.credentials()
            self._channel = grpc.secure_channel(address, credentials, options=options)
        # The generated stub is untyped.
        self._stub = scheduler_pb2_grpc.SchedulerServiceStub(  # type: ignore[no-untyped-call]
            self._channel
        )
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._rng = random.Random()
        self._sleep: Callable[[float], None] = time.sleep
        self._clock: Callable[[], float] = time.monotonic

    # ------------------------------------------------------------ the service's RPCs

    def solve(
        self,
        request: Snapshot,
        *,
        timeout: float | None = None,
        request_id: str | None = None,
    ) -> pb.SolveResponse:
        """A checked plan for the snapshot (a SolveRequest, or its JSON form as Python data or
        text). ``timeout`` bounds all attempts together (default: the time budget plus
        TRANSFER_ALLOWANCE_SECONDS); the server answers within what is left of it, with its
        best plan so far."""
        message = as_message(request, pb.SolveRequest, "request")
        limit = default_solve_timeout(message) if timeout is None else timeout
        response: pb.SolveResponse = self._call(self._stub.Solve, message, limit, request_id)
        return response

    def validate(
        self,
        request: Snapshot,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        request_id: str | None = None,
    ) -> pb.ValidateSnapshotResponse:
        """The snapshot's problems as field violations (``valid`` False), or each job's
        configuration count: problems are the answer here, not an error."""
        message = pb.ValidateSnapshotRequest(
            request=as_message(request, pb.SolveRequest, "request")
        )
        response: pb.ValidateSnapshotResponse = self._call(
            self._stub.ValidateSnapshot, message, timeout, request_id
        )
        return response

    def evaluate(
        self,
        request: Snapshot,
        plan: PlanLike,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        request_id: str | None = None,
    ) -> pb.EvaluatePlanResponse:
        """Checks and scores a plan made elsewhere with the service's checker and objective."""
        message = pb.EvaluatePlanRequest(
            request=as_message(request, pb.SolveRequest, "request"),
            plan=as_message(plan, pb.Plan, "plan"),
        )
        response: pb.EvaluatePlanResponse = self._call(
            self._stub.EvaluatePlan, message, timeout, request_id
        )
        return response

    def server_info(
        self, *, timeout: float = DEFAULT_TIMEOUT_SECONDS, request_id: str | None = None
    ) -> pb.GetServerInfoResponse:
        """The server's version, backends and limits."""
        response: pb.GetServerInfoResponse = self._call(
            self._stub.GetServerInfo, pb.GetServerInfoRequest(), timeout, request_id
        )
        return response

    # ------------------------------------------------------------ health

    def health_status(self, service: str = "", *, timeout: float = HEALTH_TIMEOUT_SECONDS) -> str:
        """The grpc.health.v1 status name of `service` ("" for the whole server): SERVING,
        NOT_SERVING, or SERVICE_UNKNOWN for a service the server doesn't know. No token and
        no retries: a probe answers for this moment. A server that can't be reached raises
        (Unavailable, DeadlineExceeded, ...)."""
        request_id = uuid.uuid4().hex
        try:
            response = self._health.Check(
                health_pb2.HealthCheckRequest(service=service),
                timeout=timeout,
                metadata=((REQUEST_ID_KEY, request_id),),
            )
        except grpc.RpcError as e:
            if e.code() is grpc.StatusCode.NOT_FOUND:
                return "SERVICE_UNKNOWN"
            raise self._error(e, request_id, 1) from None
        name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return name

    def health(self, service: str = "", *, timeout: float = HEALTH_TIMEOUT_SECONDS) -> bool:
        """Whether `service` ("" for the whole server) reports SERVING."""
        return self.health_status(service, timeout=timeout) == "SERVING"

    # ------------------------------------------------------------ calls and retries

    def _metadata(self, request_id: str) -> tuple[tuple[str, str], ...]:
        if self._token is None:
            return ((REQUEST_ID_KEY, request_id),)
        return ((REQUEST_ID_KEY, request_id), ("authorization", f"Bearer {self._token()}"))

    def _error(self, e: grpc.RpcError, request_id: str, attempts: int) -> DsfroError:
        error = error_from_rpc(e, request_id, attempts)
        if isinstance(error, Unavailable):
            error.hint = connect_hint(error.message, *self._tls)
        return error

    def _call(self, method: Any, request: Any, timeout: float, request_id: str | None) -> Any:
        """`method`(request) with retries as the policy allows, all within `timeout` seconds;
        each attempt gets the time left."""
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        request_id = request_id or uuid.uuid4().hex
        deadline = self._clock() + timeout
        attempt = 0
        while True:
            attempt += 1
            try:
                return method(
                    request,
                    timeout=max(deadline - self._clock(), 0.001),
                    metadata=self._metadata(request_id),
                )
            except grpc.RpcError as e:
                error = self._error(e, request_id, attempt)
                error.__cause__ = e
            delay = self.retry.delay(error, self._rng)
            if delay is None or self._clock() + delay >= deadline:
                raise error
            log.info(
                "request %s: attempt %d failed with %s; retrying in %.3fs",
                request_id,
                attempt,
                error.code.name,
                delay,
            )
            self._sleep(delay)

    # ------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "HEALTH_TIMEOUT_SECONDS",
    "MAX_MESSAGE_BYTES",
    "TRANSFER_ALLOWANCE_SECONDS",
    "Client",
    "default_solve_timeout",
]
