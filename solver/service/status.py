"""gRPC statuses the service answers with: field violations (google.rpc.BadRequest), refusals
with a retry hint (google.rpc.RetryInfo), and internal errors that never leak a traceback."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from solver.app.validation import FieldViolation

log = logging.getLogger("solver.service.servicer")

MAX_DETAIL_BYTES = 4096
"""BadRequest details travel in trailing metadata, which clients cap (8 KiB by default)."""

T = TypeVar("T")
M = TypeVar("M", bound=Message)


def decode(message: type[M], data: bytes, context: grpc.ServicerContext) -> M:
    """The request decoded, or INVALID_ARGUMENT (field ``request``) for bytes that are not one
    (rather than grpcio's INTERNAL "Exception deserializing request")."""
    try:
        return message.FromString(data)
    except Exception as e:  # DecodeError, and whatever else bad bytes may raise
        name = message.DESCRIPTOR.full_name
        log.info("rejected undecodable %s: %s", name, e)
        abort_invalid(context, [FieldViolation("request", f"not a valid {name} ({e})")])


def guard(context: grpc.ServicerContext, what: str, fn: Callable[[], T]) -> T:
    """fn(), with any exception turned into INTERNAL (logged, never sent as a traceback)."""
    try:
        return fn()
    except Exception as e:
        abort_internal(context, what, e)


def abort_internal(context: grpc.ServicerContext, what: str, exc: BaseException | str) -> NoReturn:
    ref = uuid.uuid4().hex[:12]
    if isinstance(exc, BaseException):
        log.error("internal error while %s [ref %s]", what, ref, exc_info=exc)
    else:
        log.error("internal error while %s [ref %s]: %s", what, ref, exc)
    context.abort(
        grpc.StatusCode.INTERNAL, f"internal error while {what} (server log reference {ref})"
    )
    raise AssertionError("unreachable: abort raises")


def abort_invalid(context: grpc.ServicerContext, violations: Sequence[FieldViolation]) -> NoReturn:
    context.abort_with_status(bad_request_status(violations))
    raise AssertionError("unreachable: abort_with_status raises")


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


def retry_status(message: str, seconds: float) -> Any:
    """RESOURCE_EXHAUSTED with google.rpc.RetryInfo (when to try again), as a grpc.Status."""
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromMilliseconds(round(seconds * 1000))
    status = status_pb2.Status(code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0], message=message)
    status.details.add().Pack(retry)
    return rpc_status.to_status(status)
