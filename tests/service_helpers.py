"""Helpers of the service tests (tests/test_service_*.py and the input-limit tests on a real
server): a started loopback server with non-default settings and its stub, the field
violations of a failed call, server flags parsed, and a snapshot no solver proves in seconds."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.core.solver import Solver
from solver.offline.generate import generate, spec_from_args
from solver.service.config import add_server_arguments
from solver.service.server import SchedulerServer
from tests.factories import running_server

WAIT = 30.0
"""Upper bound of every wait in these tests; none is expected to come close."""

Stub = scheduler_pb2_grpc.SchedulerServiceStub


@contextmanager
def serving(
    solver: Solver | None = None, **overrides: Any
) -> Iterator[tuple[SchedulerServer, Stub]]:
    """A started loopback server with `solver` and non-default settings, and a stub for it."""
    with (
        running_server(solver, **overrides) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        yield srv, Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated


def bad_request(err: grpc.RpcError) -> list[tuple[str, str]]:
    """The google.rpc.BadRequest field violations of a failed call."""
    status = rpc_status.from_call(err)
    assert status is not None
    [detail] = status.details
    bad = error_details_pb2.BadRequest()
    assert detail.Unpack(bad)
    return [(v.field, v.description) for v in bad.field_violations]


def _args(*argv: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(list(argv))


def _unproven_in_seconds() -> pb.SolveRequest:
    """A power-capped 256-node snapshot at a 60 s budget: no solver proves it within seconds,
    so the solve is still searching when the test acts."""
    request = generate(spec_from_args(["--family", "hetero-power-256", "--jobs", "400"]))
    request.options.time_budget.FromSeconds(60)
    return request


ROOT = Path(__file__).resolve().parent.parent


def server_py(**env: str) -> subprocess.Popen[str]:
    """`python server.py --port 0` in a process of its own, its environment without the
    caller's DSFRO_ variables but with `env`; its stderr piped (the log)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DSFRO_")}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "server.py"), "--port", "0"],
        cwd=ROOT,
        env={**clean, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(proc: subprocess.Popen[str]) -> None:
    """Kill `proc` if it still runs, and reap it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
