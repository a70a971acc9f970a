"""Logs a scheduler's operator can follow: text or JSON lines, each carrying the request id of
the call it belongs to, and one access line per call (accepted, refused or failed).

The request id is the caller's ``x-request-id`` metadata when it sends a usable one, a fresh id
otherwise; it is sent back in the response's initial metadata, so both sides log the same id.
"""

from __future__ import annotations

import contextvars
import logging
import re
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from pythonjsonlogger.json import JsonFormatter

from solver.service.handlers import Behavior, CallInterceptor, final_code, map_behaviors

REQUEST_ID_HEADER = "x-request-id"
LOG_FORMATS = ("text", "json")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
"""A caller's request id is kept if it is 1-128 characters of this class: it goes into every
log line, so it must not carry newlines, quotes or a megabyte."""

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dsfro_request_id", default=None
)
"""The id of the call being served by this thread (or by the solve it started)."""

log = logging.getLogger("solver.service.access")


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` (or None) to every record that does not carry one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s%(rid)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        rid = getattr(record, "request_id", None)
        record.rid = f" [{rid}]" if rid else ""
        return super().format(record)


def json_formatter() -> logging.Formatter:
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id, and
    the extra fields a call passes (method, code, seconds, peer)."""
    return JsonFormatter(
        "{asctime}{levelname}{name}{message}{request_id}",
        style="{",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        timestamp=False,
        datefmt="%Y-%m-%dT%H:%M:%S%z",
        json_ensure_ascii=False,
    )


class ServerLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The server's handler on the root logger, told apart so that configuring again replaces
    it. A plain stream handler on sys.stderr: Pyomo's output capture recognises those and
    sends them to the original file descriptor while it redirects sys.stderr."""


def configure_logging(level: str, fmt: str = "text") -> None:
    """Log to stderr at `level` in `fmt` ("text" or "json"); a ValueError names a bad one."""
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {fmt!r}")
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log level must be DEBUG, INFO, WARNING or ERROR, got {level!r}")
    handler = ServerLogHandler(sys.stderr)
    handler.setFormatter(json_formatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, ServerLogHandler)]:
        root.removeHandler(old)  # configured again (a second server in one process)
    root.setLevel(numeric)
    root.addHandler(handler)


_worker_logging: tuple[str, str] | None = None


def configure_worker_logging(level: str, fmt: str) -> None:
    """In a solve worker: log to stderr (the server's) as the server does, once per setting."""
    global _worker_logging
    if _worker_logging != (level, fmt):
        configure_logging(level, fmt)
        _worker_logging = (level, fmt)


def accepted_request_id(metadata: Any) -> str:
    """The caller's request id if usable, else a fresh one."""
    for key, value in metadata or ():
        if key == REQUEST_ID_HEADER and isinstance(value, str) and _REQUEST_ID.fullmatch(value):
            return value
    return uuid.uuid4().hex


@contextmanager
def bound_request_id(rid: str) -> Iterator[None]:
    token = request_id.set(rid)
    try:
        yield
    finally:
        request_id.reset(token)


class RequestLogInterceptor(CallInterceptor):
    """Gives every call a request id (logged with all it logs, sent back as metadata) and logs
    one access line when it ends; health checks are neither tagged nor logged."""

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        rid = accepted_request_id(details.invocation_metadata)
        method = details.method

        def wrap(behavior: Behavior) -> Behavior:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                start = time.monotonic()
                raised = False
                with bound_request_id(rid):
                    context.send_initial_metadata(((REQUEST_ID_HEADER, rid),))
                    try:
                        return behavior(request, context)
                    except BaseException:
                        raised = True
                        raise
                    finally:
                        code = final_code(context, raised)
                        _access(method, rid, context, time.monotonic() - start, code)

            return call

        return map_behaviors(handler, wrap)


def _access(
    method: str, rid: str, context: grpc.ServicerContext, seconds: float, code: grpc.StatusCode
) -> None:
    """One line per call."""
    name = code.name
    level = logging.WARNING if name in ("INTERNAL", "UNKNOWN", "DATA_LOSS") else logging.INFO
    log.log(
        level,
        "%s %s in %.3fs",
        method,
        name,
        seconds,
        extra={
            "request_id": rid,
            "method": method,
            "code": name,
            "seconds": round(seconds, 6),
            "peer": context.peer(),
        },
    )


__all__ = [
    "LOG_FORMATS",
    "REQUEST_ID_HEADER",
    "RequestLogInterceptor",
    "configure_logging",
    "request_id",
]
