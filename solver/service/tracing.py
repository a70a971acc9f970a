"""Optional OpenTelemetry tracing: a server span per call (joined to the caller's trace when it
sends ``traceparent``), with the solve's size and outcome as attributes.

Needs ``pip install 'dsfro[otel]'``; spans go to the OTLP endpoint the standard
``OTEL_EXPORTER_OTLP_*`` variables name, under ``OTEL_SERVICE_NAME`` (default ``dsfro``).
Off, nothing here is imported and calls cost nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import grpc

from solver.service.handlers import Behavior, CallInterceptor, final_code, map_behaviors
from solver.service.logs import request_id

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import Tracer

INSTRUMENTATION = "dsfro.server"


def available() -> bool:
    try:
        import opentelemetry.exporter.otlp.proto.grpc.trace_exporter
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True


def otlp_processor() -> SpanProcessor:
    """Batches spans to the OTLP/gRPC endpoint of the OTEL_EXPORTER_OTLP_* variables."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    return BatchSpanProcessor(OTLPSpanExporter())


def tracer_provider(processor: Callable[[], SpanProcessor] | None = None) -> TracerProvider:
    """The server's own provider (not the process-global one: servers in one process, as in
    tests, keep their spans apart)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    import solver

    resource = Resource.create({"service.version": solver.__version__})
    if "OTEL_SERVICE_NAME" not in os.environ:
        resource = resource.merge(Resource.create({"service.name": "dsfro"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor((processor or otlp_processor)())
    return provider


@cache
def _api() -> Any:
    """OpenTelemetry's trace API, or None when it is not installed (looked up once: every
    Solve asks)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


def annotate(attributes: Mapping[str, str | int | float | bool]) -> None:
    """Set attributes on the current span, if tracing is on and a span is recording."""
    trace = _api()
    if trace is None:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(attributes)


class TracingInterceptor(CallInterceptor):
    """A SERVER span around each call but health checks, child of the caller's trace context."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind, Status, StatusCode

        carrier = {k: v for k, v in details.invocation_metadata or () if isinstance(v, str)}
        parent = propagate.extract(carrier)
        service, _, method = details.method.lstrip("/").partition("/")

        def wrap(behavior: Behavior) -> Behavior:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                with self._tracer.start_as_current_span(
                    details.method.lstrip("/"),
                    context=parent,
                    kind=SpanKind.SERVER,
                    attributes={
                        "rpc.system": "grpc",
                        "rpc.service": service,
                        "rpc.method": method,
                        "dsfro.request_id": request_id.get() or "",
                    },
                    record_exception=False,
                    set_status_on_exception=False,
                ) as span:
                    raised = False
                    try:
                        return behavior(request, context)
                    except BaseException:
                        raised = True
                        raise
                    finally:
                        code = final_code(context, raised)
                        span.set_attribute("rpc.grpc.status_code", code.value[0])
                        if code in _SERVER_FAULTS:
                            span.set_status(Status(StatusCode.ERROR, code.name))

            return call

        return map_behaviors(handler, wrap)


_SERVER_FAULTS = frozenset(
    {
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    }
)
"""Codes that mark a server span as an error (OpenTelemetry's gRPC conventions)."""


__all__ = ["TracingInterceptor", "annotate", "available", "tracer_provider"]
