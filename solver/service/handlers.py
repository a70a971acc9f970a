"""Wrapping a gRPC method handler's behaviour, whatever its kind (unary or streaming): the
server's interceptors, which leave health checks alone."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import grpc

Behavior = Callable[[Any, grpc.ServicerContext], Any]
KINDS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")


def map_behaviors(
    handler: grpc.RpcMethodHandler, wrap: Callable[[Behavior], Behavior], **replaced: Any
) -> grpc.RpcMethodHandler:
    """`handler` with each behaviour it has passed through `wrap`, and `replaced` fields."""
    for kind in KINDS:
        behavior = getattr(handler, kind)
        if behavior is not None:
            replaced[kind] = wrap(behavior)
    # grpcio's method handlers are namedtuples.
    return handler._replace(**replaced)


HEALTH_SERVICE_PREFIX = "/grpc.health.v1.Health/"
"""Methods no interceptor touches: probes carry no credentials, ids or traces."""


class CallInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Wraps the handler of every call but health checks (`intercept`)."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        if handler is None or details.method.startswith(HEALTH_SERVICE_PREFIX):
            return handler
        return self.intercept(handler, details)

    @abc.abstractmethod
    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        """`handler` wrapped for this call."""


def final_code(context: grpc.ServicerContext, raised: bool) -> grpc.StatusCode:
    """How a finished call ended: the code it set, else UNKNOWN if its behaviour raised (grpcio
    answers so), else what its caller saw if it left before the answer (CANCELLED, or
    DEADLINE_EXCEEDED once its deadline passed), else OK."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if raised:
        return grpc.StatusCode.UNKNOWN
    if not context.is_active():
        left = context.time_remaining()
        expired = left is not None and left <= 0
        return grpc.StatusCode.DEADLINE_EXCEEDED if expired else grpc.StatusCode.CANCELLED
    return grpc.StatusCode.OK
