"""Server reflection on a real loopback server (solver.service.reflection): v1alpha and v1 list
and describe the service, v1 reports an unknown symbol, and reflection can be switched off."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from solver._proto.grpc.reflection.v1 import reflection_pb2 as reflection_v1
from solver._proto.grpc.reflection.v1 import reflection_pb2_grpc as reflection_v1_grpc
from solver.service.config import ConfigError, config_from_args
from tests.service_helpers import WAIT, _args, serving


def test_reflection_v1alpha_lists_and_describes_the_service(channel: grpc.Channel) -> None:
    db = ProtoReflectionDescriptorDatabase(channel)
    assert {
        "dsfro.v1.SchedulerService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= set(db.get_services())
    file = db.FindFileContainingSymbol("dsfro.v1.SchedulerService")
    assert (file.name, file.package) == ("dsfro/v1/scheduler.proto", "dsfro.v1")


def _reflect_v1(
    channel: grpc.Channel, *requests: reflection_v1.ServerReflectionRequest
) -> list[reflection_v1.ServerReflectionResponse]:
    # Generated gRPC code is unannotated.
    stub = reflection_v1_grpc.ServerReflectionStub(channel)  # type: ignore[no-untyped-call]
    return list(stub.ServerReflectionInfo(iter(requests), timeout=WAIT))


def _files(response: reflection_v1.ServerReflectionResponse) -> dict[str, Any]:
    assert response.WhichOneof("message_response") == "file_descriptor_response", response
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(b)
        for b in response.file_descriptor_response.file_descriptor_proto
    ]
    return {f.name: f for f in files}


def test_reflection_v1_lists_and_describes_the_service(channel: grpc.Channel) -> None:
    listed, scheduler, itself = _reflect_v1(
        channel,
        reflection_v1.ServerReflectionRequest(list_services=""),
        reflection_v1.ServerReflectionRequest(file_containing_symbol="dsfro.v1.SchedulerService"),
        reflection_v1.ServerReflectionRequest(
            file_containing_symbol="grpc.reflection.v1.ServerReflection"
        ),
    )
    assert {
        "dsfro.v1.SchedulerService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= {s.name for s in listed.list_services_response.service}
    files = _files(scheduler)
    proto = files["dsfro/v1/scheduler.proto"]
    assert proto.package == "dsfro.v1"
    [service] = proto.service
    assert service.name == "SchedulerService"
    assert "GetServerInfo" in {m.name for m in service.method}
    assert "google/protobuf/duration.proto" in files  # dependencies come along
    assert _files(itself)["grpc/reflection/v1/reflection.proto"].package == "grpc.reflection.v1"


def test_reflection_v1_reports_an_unknown_symbol(channel: grpc.Channel) -> None:
    [response] = _reflect_v1(
        channel, reflection_v1.ServerReflectionRequest(file_containing_symbol="no.such.Service")
    )
    assert response.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert response.original_request.file_containing_symbol == "no.such.Service"


def test_reflection_can_be_switched_off() -> None:
    assert config_from_args(_args("--reflection", "off"), {}).reflection is False
    assert config_from_args(_args(), {"DSFRO_REFLECTION": "off"}).reflection is False
    assert config_from_args(_args(), {}).reflection is True
    with pytest.raises(ConfigError, match="--reflection must be on or off"):
        config_from_args(_args("--reflection", "maybe"), {})
    with (
        serving(reflection=False) as (srv, _),
        grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
        pytest.raises(grpc.RpcError) as info,
    ):
        _reflect_v1(ch, reflection_v1.ServerReflectionRequest(list_services=""))
    assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED
