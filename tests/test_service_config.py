"""The server's settings (solver.service.config): defaults, environment and flags, bad values
named by their source, a server profile that fills what requests leave unset, and enough RPC
threads for many solves."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app.limits import Limits
from solver.service.config import ConfigError, ServerConfig, config_from_args
from solver.service.server import build_server
from tests.factories import make_request
from tests.service_helpers import WAIT, _args


def test_config_defaults() -> None:
    assert config_from_args(_args(), {}) == ServerConfig()


def test_config_from_environment_and_flags() -> None:
    env = {
        "DSFRO_HOST": "0.0.0.0",
        "DSFRO_PORT": "6000",
        "DSFRO_MAX_CONCURRENT_SOLVES": "4",
        "DSFRO_MAX_MESSAGE_BYTES": str(64 * 1024 * 1024),
        "DSFRO_MAX_TIME_BUDGET_SECONDS": "2",
    }
    c = config_from_args(_args("--port", "7000"), env)
    assert (c.host, c.port, c.max_concurrent_solves) == ("0.0.0.0", 7000, 4)
    assert c.max_message_bytes == 64 * 1024 * 1024
    assert c.limits == replace(
        Limits(), max_time_budget_seconds=2.0, default_time_budget_seconds=2.0
    )


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ((), {"DSFRO_PORT": "http"}, "DSFRO_PORT must be an integer in [0, 65535], got 'http'"),
        (("--port", "70000"), {}, "--port must be an integer in [0, 65535]"),
        ((), {"DSFRO_MAX_CONCURRENT_SOLVES": "0"}, "DSFRO_MAX_CONCURRENT_SOLVES must be"),
        ((), {"DSFRO_MAX_MESSAGE_BYTES": "1k"}, "DSFRO_MAX_MESSAGE_BYTES must be an integer"),
        (
            (),
            {"DSFRO_MAX_TIME_BUDGET_SECONDS": "-1"},
            "DSFRO_MAX_TIME_BUDGET_SECONDS must be a positive number of seconds, got '-1'",
        ),
        ((), {"DSFRO_HOST": ""}, "DSFRO_HOST must not be empty"),
        (("--max-concurrent-solves", "8", "--workers", "4"), {}, "--workers must be"),
        (
            ("--port", "7000", "--health-port", "7000"),
            {},
            "DSFRO_HEALTH_PORT: 7000 is already DSFRO_PORT's port",
        ),
        (
            (),
            {"DSFRO_HEALTH_PORT": "7001", "DSFRO_METRICS_PORT": "7001"},
            "DSFRO_METRICS_PORT: 7001",
        ),
    ],
)
def test_bad_settings_name_their_source(
    argv: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_args(_args(*argv), env)
    assert message in str(info.value)


def test_a_server_profile_fills_what_requests_leave_unset(tmp_path: Path) -> None:
    profile = tmp_path / "prod.toml"
    profile.write_text('[weights]\nenergy = 7.5\n[solver]\nbackend = "heuristic"\n')
    config = config_from_args(_args("--profile", str(profile)), {})
    server = build_server(replace(config, port=0))
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
            request = make_request()
            request.ClearField("weights")
            response = stub.Solve(request, timeout=WAIT)
            # From the profile: the heuristic backend, which runs no exact solver.
            assert response.stats.backend_used == pb.BACKEND_HEURISTIC
            assert "heuristic only" in response.stats.detail
            o = response.plan.objective
            assert o.energy > 0
            # energy weight 7.5 from the profile; the other weights at their defaults
            assert o.total == pytest.approx(
                o.throughput
                - 7.5 * o.energy
                - 0.05 * o.migration
                - 0.01 * o.locality
                - 0.5 * o.deadline
            )
            request.options.backend = pb.BACKEND_AGGREGATE  # the request's own field wins
            response = stub.Solve(request, timeout=WAIT)
            assert response.stats.HasField("best_bound")
    finally:
        server.stop(grace=1.0)


def test_a_bad_server_profile_names_the_file_and_key(tmp_path: Path) -> None:
    profile = tmp_path / "bad.toml"
    profile.write_text("[weights]\nenergy = -1\n")
    with pytest.raises(ConfigError) as info:
        config_from_args(_args(), {"DSFRO_PROFILE": str(profile)})
    assert "DSFRO_PROFILE" in str(info.value) and "energy" in str(info.value)


def test_enough_rpc_threads_for_many_solves() -> None:
    c = config_from_args(_args("--max-concurrent-solves", "30"), {})
    assert c.grpc_workers > c.max_concurrent_solves


def test_a_second_server_on_a_taken_port_does_not_start() -> None:
    """gRPC on Linux let a second server bind the port another serves (SO_REUSEPORT): calls
    were split between the two, one of them with other credentials. Now it cannot listen."""
    first = build_server(replace(ServerConfig(), port=0))
    try:
        with pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1:"):
            build_server(replace(ServerConfig(), port=first.port))
    finally:
        first.stop(None).wait(WAIT)


def _refused_at_start(argv: list[str], prelude: str = "") -> str:
    """``dsfro serve ARGV`` in a fresh process (after `prelude`), which must stop at start with
    exit 2: its last line on stderr."""
    code = (
        f"import sys\n{prelude}"
        "from solver.service.server import main\n"
        f"sys.exit(main({['--port', '0', *argv]!r}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSFRO_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    return done.stderr.strip().splitlines()[-1]


def test_a_worker_memory_limit_below_an_idle_workers_use_stops_the_start() -> None:
    """64 MiB, where a solve worker uses more before it solves anything: every solve lost its
    worker and answered with the quick plan, the server SERVING. Now it does not start (exit
    2, naming the setting and what a worker uses) and leaves no worker behind."""
    said = _refused_at_start(["--worker-memory-mib", "64"])
    assert said.startswith("dsfro: error: DSFRO_WORKER_MEMORY_MIB (--worker-memory-mib) is 64")
    assert "a solve worker uses" in said and "quick plan" in said


def test_more_slots_than_the_container_holds_stop_the_start(tmp_path: Path) -> None:
    """More slots than the container's memory holds idle workers for: the server started them
    all and the kernel killed it (--max-concurrent-solves 500 on a 24 GiB machine). Now it
    stops first, naming the setting, what the workers would take and the container's memory
    (here a cgroup limit of 1 GiB against 65 workers of about 65 MiB)."""
    limit = tmp_path / "memory.max"
    limit.write_text(f"{2**30}\n")
    prelude = f"from solver.runtime import memory\nmemory.MEMORY_LIMITS = ({str(limit)!r},)\n"
    said = _refused_at_start(["--max-concurrent-solves", "64"], prelude)
    assert said.startswith("dsfro: error: DSFRO_MAX_CONCURRENT_SOLVES (--max-concurrent-solves)")
    assert "65 worker processes would take" in said and "or container has 1.0 GiB" in said
