"""solver.client against the real service on loopback: a light import, the server's defaults,
plans, checks and server info, health, invalid requests with their field paths, and full
solve slots (retried after the server's hint, or given up within the deadline)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

import grpc
import pytest

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import limits as settings
from solver.app.convert import load_request_json
from solver.client import (
    DEFAULT_TIME_BUDGET_SECONDS,
    MAX_MESSAGE_BYTES,
    TRANSFER_ALLOWANCE_SECONDS,
    Client,
    DsfroError,
    FieldViolation,
    InvalidRequest,
    Overloaded,
    Unavailable,
    default_solve_timeout,
)
from solver.service.config import ServerConfig
from solver.service.server import SchedulerServer
from solver.service.servicer import SERVICE_NAME
from tests.client_helpers import JOBS, solved_jobs
from tests.factories import make_request
from tests.factories import running_server as running
from tests.fakes import Held, release, wait_entered
from tests.service_helpers import WAIT

ROOT = Path(__file__).resolve().parent.parent


def solve_quietly(client: Client) -> None:
    """A solve on a thread of its own, which the test cuts short by closing the client."""
    with suppress(DsfroError):
        client.solve(make_request())


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
