"""Typed errors of the DSFRO client: one class per failure a scheduler handles differently.

Every error carries the gRPC status code, the server's message, the request id the call was
sent with (to find it in the server's log) and how many attempts were made.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


class FieldViolation(NamedTuple):
    """One problem of an invalid request: the field path (``jobs[3].max_gpus``) and what is
    wrong with it."""

    field: str
    description: str


class DsfroError(Exception):
    """A call the service failed (or that could not reach it)."""

    def __init__(
        self, code: grpc.StatusCode, message: str, request_id: str, attempts: int = 1
    ) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id
        self.attempts = attempts


class InvalidRequest(DsfroError):
    """INVALID_ARGUMENT: the request is wrong; ``violations`` say where (never retried)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        request_id: str,
        attempts: int = 1,
        violations: list[FieldViolation] | None = None,
    ) -> None:
        super().__init__(code, message, request_id, attempts)
        self.violations: list[FieldViolation] = violations or []


class Unauthenticated(DsfroError):
    """UNAUTHENTICATED: no bearer token, or one the server does not accept."""


class PermissionDenied(DsfroError):
    """PERMISSION_DENIED: the client certificate's name is not allowed to call."""


class Overloaded(DsfroError):
    """RESOURCE_EXHAUSTED with a retry hint, still refused when the attempts or the deadline
    ran out; ``retry_delay`` is the server's last hint in seconds."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        request_id: str,
        attempts: int = 1,
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(code, message, request_id, attempts)
        self.retry_delay = retry_delay


class Unavailable(DsfroError):
    """UNAVAILABLE: the server could not be reached or is shutting down, after the retries.
    ``hint``: what a failure to connect most likely means and what to change ("" when gRPC's
    message says nothing more)."""

    hint = ""

    def __str__(self) -> str:
        said = super().__str__()
        return f"{said} ({self.hint})" if self.hint else said


class DeadlineExceeded(DsfroError):
    """DEADLINE_EXCEEDED: no answer within the call's timeout (over all attempts)."""


_BY_CODE: dict[grpc.StatusCode, type[DsfroError]] = {
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def rich_details(error: grpc.RpcError) -> list[Any]:
    """The google.rpc.Status details (``Any`` messages) of a failed call; [] when it carries
    none or they don't match the call's code."""
    try:
        status = rpc_status.from_call(error)
    except (ValueError, AttributeError):
        return []
    return list(status.details) if status is not None else []


def retry_delay_of(details: list[Any]) -> float | None:
    """Seconds of the google.rpc.RetryInfo among the details, or None without one."""
    for detail in details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            nanos: int = info.retry_delay.ToNanoseconds()
            return max(0.0, nanos / 1e9)
    return None


def violations_of(details: list[Any]) -> list[FieldViolation]:
    """The google.rpc.BadRequest field violations among the details."""
    found: list[FieldViolation] = []
    for detail in details:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            found.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    return found


def error_from_rpc(error: grpc.RpcError, request_id: str, attempts: int) -> DsfroError:
    """The typed error of a failed call (a grpc.Call: code, details, trailing metadata)."""
    code: grpc.StatusCode = error.code()
    message: str = error.details() or ""
    if code is grpc.StatusCode.INVALID_ARGUMENT:
        violations = violations_of(rich_details(error))
        return InvalidRequest(code, message, request_id, attempts, violations)
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        delay = retry_delay_of(rich_details(error))
        if delay is not None:
            return Overloaded(code, message, request_id, attempts, delay)
    return _BY_CODE.get(code, DsfroError)(code, message, request_id, attempts)


def connect_hint(message: str, tls: bool, client_certificate: bool) -> str:
    """What gRPC's message for a connection that failed means, for a client that used TLS or
    not, with a client certificate or not; "" for other failures. gRPC names only the
    transport's error (a closed socket, an SSL reason code)."""
    if "failed to connect" not in message:
        return ""
    if "Connection refused" in message:
        return "nothing listens at that address: is the service running, on this host and port?"
    if "WRONG_VERSION_NUMBER" in message:
        return (
            "the server answers without TLS: call it without the TLS settings, or start it "
            "with a certificate (--tls-cert, --tls-key)"
        )
    if "CERTIFICATE_VERIFY_FAILED" in message:
        if "expired" in message or "not yet valid" in message:
            return (
                "the server's certificate is outside its validity period (expired, or not yet "
                "valid, or this machine's clock is off): renew it on the server, which re-reads "
                "it when the file changes"
            )
        if "issuer" in message or "self signed" in message or "self-signed" in message:
            return (
                "the server's certificate is not signed by a CA this client trusts: give the CA "
                "that signed it (--tls-ca; TlsConfig.ca_file)"
            )
        return "the client refused the server's certificate: gRPC's message above says why"
    if "Hostname Verification" in message or "Peer name" in message:
        return (
            "the server's certificate does not name the host called: call a name it carries, "
            "or give that name (--tls-server-name; TlsConfig.server_name)"
        )
    if "Socket closed" in message or "Connection reset" in message:
        if not tls:
            return (
                "the server closed the connection at once: if it serves TLS, call it with TLS "
                "(--tls, or --tls-ca with the CA that signed its certificate)"
            )
        if not client_certificate:
            return (
                "the server closed the TLS connection at once: if it requires client "
                "certificates (mutual TLS), give one (--tls-cert, --tls-key)"
            )
        return (
            "the server closed the TLS connection at once: it may not accept this client "
            "certificate (is it signed by the CA the server trusts, --tls-client-ca?)"
        )
    return ""
