"""OpenTelemetry spans of a real loopback server, caught in memory."""

from __future__ import annotations

import argparse

import grpc
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from solver._proto.dsfro.v1.scheduler_pb2_grpc import SchedulerServiceStub as Stub
from solver.service import tracing
from solver.service.config import (
    ConfigError,
    ServerConfig,
    add_server_arguments,
    config_from_args,
)
from solver.service.logs import REQUEST_ID_HEADER
from solver.service.server import build_server
from tests.factories import make_request

WAIT = 30.0
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def test_each_call_is_a_server_span_in_the_callers_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    monkeypatch.setattr(tracing, "otlp_processor", lambda: SimpleSpanProcessor(exporter))
    srv = build_server(ServerConfig(host="127.0.0.1", port=0, tracing=True))
    srv.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            stub = Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated
            metadata = (("traceparent", PARENT), (REQUEST_ID_HEADER, "round-3"))
            stub.Solve(make_request(), timeout=WAIT, metadata=metadata)
            bad = make_request()
            bad.jobs[0].weight = -1.0
            with pytest.raises(grpc.RpcError):
                stub.Solve(bad, timeout=WAIT)
    finally:
        srv.stop(None).wait(WAIT)
    solved, refused = exporter.get_finished_spans()
    assert solved.name == "dsfro.v1.SchedulerService/Solve" and solved.kind is SpanKind.SERVER
    assert solved.context is not None and f"{solved.context.trace_id:032x}" == TRACE_ID
    attributes = dict(solved.attributes or {})
    assert attributes["dsfro.request_id"] == "round-3"
    assert attributes["rpc.grpc.status_code"] == 0 and attributes["dsfro.jobs"] == 3
    assert attributes["dsfro.termination"] in ("FEASIBLE", "OPTIMAL")
    assert refused.context is not None and refused.context.trace_id != solved.context.trace_id
    assert dict(refused.attributes or {})["rpc.grpc.status_code"] == 3  # INVALID_ARGUMENT
    assert refused.status.status_code is StatusCode.UNSET  # the caller's fault, not the server's


def test_tracing_is_off_unless_asked_and_needs_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    assert config_from_args(parser.parse_args([]), {}).tracing is False
    assert config_from_args(parser.parse_args(["--tracing", "on"]), {}).tracing is True
    monkeypatch.setattr(tracing, "available", lambda: False)
    with pytest.raises(ConfigError, match=r"DSFRO_TRACING needs OpenTelemetry.*dsfro\[otel\]"):
        config_from_args(parser.parse_args([]), {"DSFRO_TRACING": "on"})
