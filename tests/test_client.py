"""solver.client against real loopback servers: the service itself (plans, rich errors, full
solve slots, TLS, mutual TLS, tokens) and a scripted one (request ids, retries, deadlines)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import grpc
import pytest

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app import limits as settings
from solver.app.convert import load_request_json
from solver.client import (
    DEFAULT_TIME_BUDGET_SECONDS,
    MAX_MESSAGE_BYTES,
    REQUEST_ID_KEY,
    TRANSFER_ALLOWANCE_SECONDS,
    Client,
    DeadlineExceeded,
    DsfroError,
    FieldViolation,
    InvalidRequest,
    Overloaded,
    PermissionDenied,
    RetryPolicy,
    TlsConfig,
    Unauthenticated,
    Unavailable,
    default_solve_timeout,
)
from solver.client.security import is_local_target
from solver.service.config import ServerConfig
from solver.service.security import TlsFiles
from solver.service.server import SchedulerServer
from solver.service.servicer import SERVICE_NAME
from tests.factories import make_request
from tests.factories import running_server as running
from tests.fakes import Held, release, wait_entered
from tests.tls_certs import Pki

ROOT = Path(__file__).resolve().parent.parent
WAIT = 30.0
"""Upper bound of every wait in these tests; none is expected to come close."""
TOKEN = "s3cr3t-token-for-tests-0001"
FAST = RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.02)
"""Retries that don't slow the tests down."""
ONCE = RetryPolicy(max_attempts=1)


def solved_jobs(response: pb.SolveResponse) -> list[str]:
    return sorted(a.job for a in response.plan.assignments)


JOBS = sorted(j.name for j in make_request().jobs)


def solve_quietly(client: Client) -> None:
    """A solve on a thread of its own, which the test cuts short by closing the client."""
    with suppress(DsfroError):
        client.solve(make_request())


# ---------------------------------------------------------------- a light import


def test_importing_the_client_loads_neither_the_solver_nor_its_numerical_libraries() -> None:
    code = (
        "import json, sys, solver.client\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'ortools', 'highspy', 'pyomo') or m.startswith('solver.'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    ).stdout
    loaded = json.loads(out)
    assert loaded, "the subprocess printed nothing"
    public = ("solver.client", "solver._proto", "solver.wire")
    assert [m for m in loaded if not m.startswith(public)] == []


def test_the_client_defaults_are_the_servers() -> None:
    assert settings.Limits().default_time_budget_seconds == DEFAULT_TIME_BUDGET_SECONDS
    assert MAX_MESSAGE_BYTES == settings.MAX_MESSAGE_BYTES == ServerConfig().max_message_bytes


# ---------------------------------------------------------------- the real service


def test_solve_validate_evaluate_and_server_info(server: SchedulerServer) -> None:
    request = make_request()
    with Client(f"127.0.0.1:{server.port}") as client:
        response = client.solve(request)
        assert solved_jobs(response) == JOBS
        assert response.stats.termination in (
            pb.TERMINATION_OPTIMAL,
            pb.TERMINATION_FEASIBLE,
            pb.TERMINATION_FALLBACK,
        )

        evaluated = client.evaluate(request, response.plan)
        assert evaluated.valid and not evaluated.violations
        assert evaluated.objective.total == pytest.approx(response.plan.objective.total)

        checked = client.validate(request)
        assert checked.valid and sorted(j.job for j in checked.jobs) == JOBS
        assert all(j.num_configurations > 0 for j in checked.jobs)
        broken = make_request()
        broken.jobs[2].max_gpus = 1
        problems = client.validate(broken)  # problems are the answer, not an error
        assert not problems.valid
        assert [(v.field, v.description) for v in problems.violations] == [
            ("jobs[2].max_gpus", "must be >= min_gpus (2), got 1")
        ]

        info = client.server_info()
        assert info.version == solver.__version__
        assert info.max_concurrent_solves == 2
        assert pb.BACKEND_HIGHS in info.backends


def test_a_tiny_instance_file_solves_within_its_budget(server: SchedulerServer) -> None:
    request = load_request_json(str(ROOT / "instances" / "tiny-power.json"))
    assert default_solve_timeout(request) == 5.0 + TRANSFER_ALLOWANCE_SECONDS
    with Client(f"localhost:{server.port}") as client:
        response = client.solve(request, request_id="tiny-power-1")
    assert solved_jobs(response) == sorted(j.name for j in request.jobs)
    assert response.stats.wall_time.ToNanoseconds() / 1e9 <= 5.0 + 1.0


def test_health_reports_serving_and_unknown_services(server: SchedulerServer) -> None:
    with Client(f"127.0.0.1:{server.port}") as client:
        assert client.health() is True
        assert client.health(SERVICE_NAME) is True
        assert client.health_status("no.such.Service") == "SERVICE_UNKNOWN"
        assert client.health("no.such.Service") is False
    server.health.enter_graceful_shutdown()  # what SIGTERM does first
    with Client(f"127.0.0.1:{server.port}") as client:
        assert client.health_status() == "NOT_SERVING"
        assert client.health() is False


def test_health_of_an_unreachable_server_raises_unavailable_at_once() -> None:
    start = time.monotonic()
    with Client("127.0.0.1:1") as client, pytest.raises(Unavailable):
        client.health(timeout=5.0)
    assert time.monotonic() - start < 5.0


def test_an_invalid_request_raises_invalid_request_with_the_field_paths(
    server: SchedulerServer,
) -> None:
    request = make_request()
    request.jobs[2].max_gpus = 1
    request.options.seed = -1
    with Client(f"127.0.0.1:{server.port}") as client, pytest.raises(InvalidRequest) as info:
        client.solve(request, request_id="bad-1")
    err = info.value
    assert err.code is grpc.StatusCode.INVALID_ARGUMENT
    assert err.violations == [
        FieldViolation("jobs[2].max_gpus", "must be >= min_gpus (2), got 1"),
        FieldViolation("options.seed", "must be >= 0, got -1"),
    ]
    assert err.violations[0].field == "jobs[2].max_gpus"
    assert err.message.startswith("invalid request (2 problems): jobs[2].max_gpus")
    assert (err.request_id, err.attempts) == ("bad-1", 1)


# ---------------------------------------------------------------- full solve slots


def _budget(seconds: float) -> pb.SolveRequest:
    request = make_request()
    request.options.time_budget.FromMilliseconds(round(seconds * 1000))
    return request


def test_a_refused_solve_is_retried_after_the_hint_until_a_slot_frees(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One slot, no queue: a solve that runs its whole 0.8 s budget holds it; a second call is
    refused with a hint of about what that budget has left, retried then, and solved."""
    caplog.set_level("INFO", logger="solver.client")
    held = Held(tmp_path, until_deadline=True)
    with (
        running(held, max_concurrent_solves=1, max_queued_solves=0) as srv,
        Client(f"127.0.0.1:{srv.port}") as client,
    ):
        first = threading.Thread(target=client.solve, args=(_budget(0.8),))
        first.start()
        assert wait_entered(tmp_path)  # the only slot is taken
        start = time.monotonic()
        response = client.solve(_budget(0.5), timeout=WAIT, request_id="waits-1")
        waited = time.monotonic() - start
        first.join(WAIT)
    assert solved_jobs(response) == JOBS
    assert waited >= 0.4
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) >= 1
    assert all(m.startswith("request waits-1: attempt ") for m in retries)
    assert all("failed with RESOURCE_EXHAUSTED" in m for m in retries)


def test_a_deadline_too_short_to_wait_gives_up_with_overloaded(tmp_path: Path) -> None:
    """The slot's solve has about 4 s left: a call with 0.7 s is refused and told so, and does
    not wait past its own deadline."""
    try:
        with (
            running(Held(tmp_path), max_concurrent_solves=1, max_queued_solves=0) as srv,
            Client(f"127.0.0.1:{srv.port}") as client,
        ):
            threading.Thread(target=solve_quietly, args=(client,), daemon=True).start()
            assert wait_entered(tmp_path)
            start = time.monotonic()
            with pytest.raises(Overloaded) as info:
                client.solve(make_request(), timeout=0.7)
            elapsed = time.monotonic() - start
    finally:
        release(tmp_path)
    err = info.value
    assert err.attempts == 1  # a hint longer than the whole timeout: no retry
    assert elapsed < 0.7
    assert err.retry_delay is not None and 3.0 < err.retry_delay <= 5.0
    assert "max_concurrent_solves=1" in err.message


# ---------------------------------------------------------------- a scripted server


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


# ---------------------------------------------------------------- settings refused up front


@pytest.mark.parametrize(
    ("target", "local"),
    [
        ("127.0.0.1:50051", True),
        ("127.1.2.3:50051", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("dns:///localhost:50051", True),
        ("ipv4:127.0.0.1:50051", True),
        ("unix:/run/dsfro.sock", True),
        ("10.0.0.7:50051", False),
        ("[2001:db8::1]:50051", False),
        ("dsfro.example.com:443", False),
        ("dns:///dsfro.example.com:443", False),
        ("localhost.evil.example:50051", False),
    ],
)
def test_which_targets_are_local(target: str, local: bool) -> None:
    assert is_local_target(target) is local


def test_a_token_is_refused_in_plaintext_beyond_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"refusing to send a bearer token in plaintext"):
        Client("10.0.0.7:50051", token=TOKEN)
    path = tmp_path / "token"
    path.write_text(TOKEN)
    with pytest.raises(ValueError, match=r"plaintext to dsfro\.example:443"):
        Client("dsfro.example:443", token_file=path)
    # Allowed: over TLS, to loopback, or when the caller says the network is trusted.
    Client("dsfro.example:443", token=TOKEN, tls=True).close()
    Client("127.0.0.1:50051", token=TOKEN).close()
    Client("10.0.0.7:50051", token=TOKEN, allow_insecure_token=True).close()
    Client("10.0.0.7:50051").close()


def test_bad_client_settings_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="token or token_file, not both"):
        Client("127.0.0.1:1", token=TOKEN, token_file=tmp_path / "t")
    with pytest.raises(ValueError, match=r"token file .*missing"):
        Client("127.0.0.1:1", token_file=tmp_path / "missing")
    (tmp_path / "empty").write_text("# nothing yet\n")
    with pytest.raises(ValueError, match="holds no token"):
        Client("127.0.0.1:1", token_file=tmp_path / "empty")
    with pytest.raises(ValueError, match="not printable ASCII without spaces"):
        Client("127.0.0.1:1", token="two words")
    with pytest.raises(ValueError, match="cert_file and key_file go together"):
        TlsConfig(cert_file=tmp_path / "c.pem")
    with pytest.raises(ValueError, match=r"TLS CA file .*nope\.pem"):
        Client("127.0.0.1:1", tls=TlsConfig(ca_file=tmp_path / "nope.pem"))
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        Client("127.0.0.1:1").server_info(timeout=0)


def test_backoff_is_full_jitter_under_a_growing_cap() -> None:
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=0.5, multiplier=2.0)
    rng = random.Random(7)
    for attempt, cap in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)]:
        waits = [policy.backoff(attempt, rng) for _ in range(200)]
        assert all(0 <= w <= cap for w in waits)
        assert max(waits) > 0.8 * cap and min(waits) < 0.2 * cap  # spread over [0, cap]


# ---------------------------------------------------------------- TLS, mutual TLS, tokens


def test_tls_with_a_ca_bundle_and_a_server_name(pki: Pki) -> None:
    with running(tls=TlsFiles(pki.server.cert, pki.server.key)) as srv:
        address = f"127.0.0.1:{srv.port}"
        with Client(address, tls=TlsConfig(ca_file=pki.ca)) as client:
            assert solved_jobs(client.solve(make_request())) == JOBS
            assert client.health()
        with Client(address, tls=TlsConfig(ca_file=pki.ca, server_name="localhost")) as c:
            assert c.server_info().version == solver.__version__
        # The name checked is the override, which the certificate doesn't carry.
        wrong = TlsConfig(ca_file=pki.ca, server_name="other.example")
        for tls in (wrong, True, False):  # True: the system roots don't know the test CA
            with Client(address, tls=tls, retry=ONCE) as c, pytest.raises(Unavailable):
                c.server_info()


def test_mutual_tls_admits_the_allowed_client_only(pki: Pki) -> None:
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(tls=files, allowed_clients=frozenset({"scheduler"})) as srv:
        address = f"localhost:{srv.port}"

        def client(who: Any) -> Client:
            cert, key = (who.cert, who.key) if who is not None else (None, None)
            return Client(address, tls=TlsConfig(pki.ca, cert, key), retry=FAST)

        with client(pki.scheduler) as c:
            assert solved_jobs(c.solve(make_request())) == JOBS
        with client(pki.intruder) as c, pytest.raises(PermissionDenied) as denied:
            c.solve(make_request())
        assert denied.value.attempts == 1 and "intruder" in denied.value.message
        for who in (pki.rogue, None):  # another CA's certificate, or none: no handshake
            with client(who) as c, pytest.raises(Unavailable):
                c.server_info()


def test_tokens_over_tls(pki: Pki, tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    with running(tls=TlsFiles(pki.server.cert, pki.server.key), token=TOKEN) as srv:
        address = f"localhost:{srv.port}"
        tls = TlsConfig(ca_file=pki.ca)
        with Client(address, tls=tls, token=TOKEN) as client:
            assert solved_jobs(client.solve(make_request())) == JOBS
        with Client(address, tls=tls, token_file=path) as client:
            assert client.server_info().version == solver.__version__
        with Client(address, tls=tls, token="wrong-token-000000000000") as c:
            with pytest.raises(Unauthenticated) as wrong:
                c.server_info()
            assert c.health()  # probes need no token
        with Client(address, tls=tls) as c, pytest.raises(Unauthenticated) as missing:
            c.solve(make_request())
    assert wrong.value.attempts == 1 and "invalid bearer token" in wrong.value.message
    assert missing.value.attempts == 1 and "missing bearer token" in missing.value.message
