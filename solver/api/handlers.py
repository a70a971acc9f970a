"""Wrapping a gRPC method handler's behaviour, whatever its kind (unary or streaming), for the
server's interceptors and its decoding guard."""

from __future__ import annotations

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
