"""solver.client against a scripted server (solver.client.client, retry): request ids that
retries keep, UNAVAILABLE retried within one timeout, final errors not retried, the default
solve deadline, the bearer token each call carries (re-read from a rotated file), and
full-jitter backoff."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.client import (
    REQUEST_ID_KEY,
    TRANSFER_ALLOWANCE_SECONDS,
    Client,
    DeadlineExceeded,
    DsfroError,
    InvalidRequest,
    PermissionDenied,
    RetryPolicy,
    Unauthenticated,
    Unavailable,
)
from tests.client_helpers import FAST, TOKEN
from tests.factories import make_request
from tests.service_helpers import WAIT


class Scripted(scheduler_pb2_grpc.SchedulerServiceServicer):
    """Fails calls with the scripted codes in turn, then answers; records what it saw."""

    def __init__(self) -> None:
        self.script: list[grpc.StatusCode] = []
        self.metadata: list[dict[str, str]] = []
        self.time_left: list[float] = []

    def _serve(self, context: grpc.ServicerContext) -> None:
        self.metadata.append(dict(context.invocation_metadata()))
        self.time_left.append(context.time_remaining())
        if self.script:
            code = self.script.pop(0)
            context.abort(code, f"scripted {code.name}")

    def Solve(self, request: pb.SolveRequest, context: grpc.ServicerContext) -> pb.SolveResponse:
        self._serve(context)
        return pb.SolveResponse(plan=pb.Plan(assignments=[pb.JobAssignment(job="scripted")]))

    def GetServerInfo(
        self, request: pb.GetServerInfoRequest, context: grpc.ServicerContext
    ) -> pb.GetServerInfoResponse:
        self._serve(context)
        return pb.GetServerInfoResponse(version="scripted")


@pytest.fixture
def scripted() -> Iterator[tuple[Scripted, str]]:
    from concurrent.futures import ThreadPoolExecutor

    from grpc_health.v1 import health, health_pb2_grpc

    servicer = Scripted()
    srv = grpc.server(ThreadPoolExecutor(max_workers=4))
    scheduler_pb2_grpc.add_SchedulerServiceServicer_to_server(  # type: ignore[no-untyped-call]
        servicer, srv
    )
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield servicer, f"127.0.0.1:{port}"
    srv.stop(None).wait(WAIT)


def test_every_call_carries_a_request_id_that_its_retries_keep(
    scripted: tuple[Scripted, str],
) -> None:
    servicer, address = scripted
    with Client(address, retry=FAST) as client:
        servicer.script = [grpc.StatusCode.UNAVAILABLE] * 2
        assert client.server_info(request_id="ask-7").version == "scripted"
        assert client.server_info().version == "scripted"
        assert client.server_info().version == "scripted"
    ids = [m[REQUEST_ID_KEY] for m in servicer.metadata]
    assert ids[:3] == ["ask-7"] * 3  # two UNAVAILABLE, then the answer
    assert len(ids) == 5 and ids[3] != ids[4]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids[3:])  # uuid4 hex
    assert all("authorization" not in m for m in servicer.metadata)


def test_unavailable_is_retried_until_the_attempts_run_out(
    scripted: tuple[Scripted, str],
) -> None:
    servicer, address = scripted
    servicer.script = [grpc.StatusCode.UNAVAILABLE] * 10
    with Client(address, retry=FAST) as client, pytest.raises(Unavailable) as info:
        client.server_info()
    assert info.value.attempts == FAST.max_attempts
    assert len(servicer.metadata) == FAST.max_attempts
    assert info.value.message == "scripted UNAVAILABLE"


def test_the_timeout_covers_every_attempt(scripted: tuple[Scripted, str]) -> None:
    servicer, address = scripted
    servicer.script = [grpc.StatusCode.UNAVAILABLE] * 1000
    patient = RetryPolicy(max_attempts=1000, initial_backoff=0.05, max_backoff=0.1)
    start = time.monotonic()
    with Client(address, retry=patient) as client, pytest.raises(Unavailable) as info:
        client.server_info(timeout=0.6)
    assert time.monotonic() - start < 0.6 + 0.3
    assert 3 <= info.value.attempts < 100
    # Each attempt had only what was left of the 0.6 s.
    assert servicer.time_left[0] <= 0.6 + 0.2  # gRPC rounds the deadline it sends up
    assert servicer.time_left[-1] < servicer.time_left[0] - 0.2


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidRequest),
        (grpc.StatusCode.UNAUTHENTICATED, Unauthenticated),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied),
        (grpc.StatusCode.INTERNAL, DsfroError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceeded),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, DsfroError),  # no RetryInfo: a size limit
    ],
)
def test_final_errors_are_not_retried(
    scripted: tuple[Scripted, str], code: grpc.StatusCode, error: type[DsfroError]
) -> None:
    servicer, address = scripted
    servicer.script = [code]
    with Client(address, retry=FAST) as client, pytest.raises(DsfroError) as info:
        client.solve(make_request(), request_id="final-1")
    assert type(info.value) is error
    assert (info.value.code, info.value.attempts, info.value.request_id) == (code, 1, "final-1")
    assert len(servicer.metadata) == 1


def test_the_default_solve_deadline_is_the_budget_plus_the_transfer_allowance(
    scripted: tuple[Scripted, str],
) -> None:
    servicer, address = scripted
    request = make_request()
    request.options.time_budget.FromMilliseconds(2500)
    with Client(address) as client:
        assert [a.job for a in client.solve(request).plan.assignments] == ["scripted"]
        unset = make_request()
        unset.options.ClearField("time_budget")  # the server's default 5 s
        client.solve(unset)
        client.solve(request, timeout=3.0)
    # gRPC rounds the deadline it sends up a little.
    budgeted, default, given = servicer.time_left
    assert budgeted == pytest.approx(2.5 + TRANSFER_ALLOWANCE_SECONDS, abs=0.5)
    assert default == pytest.approx(5.0 + TRANSFER_ALLOWANCE_SECONDS, abs=0.5)
    assert given == pytest.approx(3.0, abs=0.5)


def test_a_token_is_sent_on_every_call_but_health(scripted: tuple[Scripted, str]) -> None:
    servicer, address = scripted
    with Client(address, token=TOKEN) as client:
        client.server_info()
        client.solve(make_request())
        assert client.health()
    assert [m["authorization"] for m in servicer.metadata] == [f"Bearer {TOKEN}"] * 2


def test_a_token_file_is_re_read_when_it_changes(
    scripted: tuple[Scripted, str], tmp_path: Path
) -> None:
    servicer, address = scripted
    path = tmp_path / "token"
    path.write_text("# rotated by the operator\nfirst-token-0000000001\n")
    with Client(address, token_file=path) as client:
        client.server_info()
        path.write_text("second-token-000000002\n")
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        client.server_info()
        path.write_text("")  # a rotation caught half-way: the last token stays
        client.server_info()
    assert [m["authorization"] for m in servicer.metadata] == [
        "Bearer first-token-0000000001",
        "Bearer second-token-000000002",
        "Bearer second-token-000000002",
    ]


def test_backoff_is_full_jitter_under_a_growing_cap() -> None:
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=0.5, multiplier=2.0)
    rng = random.Random(7)
    for attempt, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)]:
        waits = [policy.backoff(attempt, rng) for _ in range(200)]
        assert all(0 <= w <= cap for w in waits)
        assert max(waits) > 0.8 * cap and min(waits) < 0.2 * cap  # spread over [0, cap]
