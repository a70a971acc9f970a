"""Shared fixtures: a small valid SolveRequest, a real gRPC server on loopback, test
certificates, and the two default simulation scenarios.

Fixtures only: helpers that tests import live in ``tests/factories.py`` and the
``tests/*_helpers.py`` modules.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from tests.factories import make_request
from tests.tls_certs import Pki, make_pki

if TYPE_CHECKING:  # imported lazily: validation tests must not need the solver modules
    from solver.service.server import SchedulerServer
    from solver.simulate.scenario import Scenario
    from tests.slurm_cluster_helpers import Cluster, MakeAdapter


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """The root logger as it was before the test: a CLI's main (dsfro-slurm's, dsfro's)
    installs a stderr handler on a stream capsys closes after the test, and every later
    test's log record then fails to write ("--- Logging error ---")."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        if h not in before and type(h).__module__.split(".")[0] != "_pytest":
            root.removeHandler(h)
    for h in before:
        if h not in root.handlers and type(h).__module__.split(".")[0] != "_pytest":
            root.addHandler(h)
    root.setLevel(level)


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


@pytest.fixture(scope="session")
def slurm_session() -> Iterator[Cluster]:
    """A real one-machine Slurm (tests/slurm_cluster_helpers.py); SLURM_CONF points at it."""
    from tests.slurm_cluster_helpers import session_cluster

    with session_cluster() as cluster:
        before = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = cluster.env["SLURM_CONF"]
        try:
            yield cluster
        finally:
            if before is None:
                os.environ.pop("SLURM_CONF", None)
            else:
                os.environ["SLURM_CONF"] = before


@pytest.fixture
def slurm(slurm_session: Cluster) -> Cluster:
    """The Slurm cluster with no job left and every node up."""
    slurm_session.reset()
    return slurm_session


@pytest.fixture(scope="module")
def dsfro() -> Iterator[str]:
    """A real DSFRO service on an ephemeral loopback port; its address."""
    from tests.factories import running_server

    with running_server() as srv:
        yield f"127.0.0.1:{srv.port}"


@pytest.fixture
def make_adapter(tmp_path: Path) -> Iterator[MakeAdapter]:
    """Builds adapters on the real Slurm; their clients are closed after the test."""
    from solver.client import Client
    from solver.slurm.apply import Applier
    from solver.slurm.commands import Runner, Slurm, run_subprocess
    from solver.slurm.loop import Adapter, Settings
    from solver.slurm.observe import Metrics
    from solver.slurm.site import Site
    from tests.slurm_cluster_helpers import BUDGET

    clients: list[Client] = []

    def make(
        address: str, *, site: Site | None = None, runner: Runner = run_subprocess, **settings: Any
    ) -> Adapter:
        slurm = Slurm(runner, timeout=20)
        client = Client(address)
        clients.append(client)
        applier = Applier(slurm, plan_dir=tmp_path / "plans", workers=4)
        s = Settings(**{"budget": BUDGET, **settings})
        return Adapter(slurm, client, site or Site(), s, applier, Metrics())

    (tmp_path / "plans").mkdir()
    (tmp_path / "out").mkdir()
    yield make
    for c in clients:
        c.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Says it loudly when the Slurm end-to-end tests did not run, and how to run them."""
    from tests.slurm_cluster_helpers import HOW_TO_RUN, SKIPPED

    if SKIPPED:
        terminalreporter.write_sep("=", "Slurm end-to-end tests SKIPPED", yellow=True, bold=True)
        terminalreporter.write_line(f"why: {SKIPPED[0]}")
        terminalreporter.write_line(f"to run them: {HOW_TO_RUN}")
