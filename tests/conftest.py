"""Shared fixtures: a small valid SolveRequest, a real gRPC server on loopback, test
certificates, and the two default simulation scenarios.

Fixtures only: helpers that tests import live in ``tests/factories.py`` and the
``tests/*_helpers.py`` modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from tests.factories import make_request
from tests.tls_certs import Pki, make_pki

if TYPE_CHECKING:  # imported lazily: validation tests must not need the solver modules
    from solver.service.server import SchedulerServer
    from solver.simulate.scenario import Scenario


@pytest.fixture
def request_msg() -> pb.SolveRequest:
    return make_request()


@pytest.fixture
def server() -> Iterator[SchedulerServer]:
    """A real server on an ephemeral loopback port, stopped after the test."""
    from solver.service.config import ServerConfig
    from solver.service.server import build_server

    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    yield srv
    srv.stop(grace=None).wait(10)


@pytest.fixture
def channel(server: SchedulerServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.Channel) -> scheduler_pb2_grpc.SchedulerServiceStub:
    # The generated gRPC module has no annotations (protoc writes none for *_pb2_grpc.py).
    return scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]


@pytest.fixture(autouse=True)
def fresh_crash_window() -> None:
    """Each test starts with no recent worker replacements: tests that kill workers must not
    turn another test's server NOT_SERVING (the crash-loop window is process-wide)."""
    from solver.runtime import crashes

    crashes.forget_recent()


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Test certificates (tests/tls_certs.py), made once per session."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def philly() -> Scenario:
    from solver.simulate.scenarios import scenario_philly

    return scenario_philly(0)


@pytest.fixture(scope="module")
def llm() -> Scenario:
    from solver.simulate.scenarios import scenario_llm

    return scenario_llm(0)


@pytest.fixture(scope="module")
def cluster() -> pb.ClusterSnapshot:
    from solver.simulate.scenarios import scenario_philly

    return scenario_philly(0).cluster
