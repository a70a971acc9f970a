"""The server under test: ``server.py`` in its own process, restarted if it dies."""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scripts.common.ports import free_port
from scripts.fuzz.constants import CHANNEL_LIMIT, ROOT, RPCS, SERVICE


class Server:
    """``server.py`` in its own process; restarted if it dies."""

    def __init__(self, args: argparse.Namespace, log_path: Path) -> None:
        self.args = args
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.lock = threading.Lock()
        self.generation = 0
        self.crashes: list[str] = []
        self.rss_kib: list[int] = []
        self.channel: grpc.Channel | None = None
        self.calls: dict[str, Callable[..., bytes]] = {}

    def command(self) -> list[str]:
        a = self.args
        return [
            sys.executable, str(ROOT / "server.py"), "--host", "127.0.0.1",
            "--port", str(self.port),
            "--max-concurrent-solves", str(a.max_concurrent_solves),
            "--max-time-budget-seconds", str(a.max_time_budget_seconds),
            "--workers", str(a.max_concurrent_solves + 48),
            "--log-level", a.server_log_level,
            "--grace-period-seconds", "5",
        ]  # fmt: skip

    def start(self) -> None:
        self.port = free_port()
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
        )
        log.close()
        options = [
            ("grpc.max_send_message_length", CHANNEL_LIMIT),
            ("grpc.max_receive_message_length", CHANNEL_LIMIT),
        ]
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=options)
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + 180
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"the server exited with {self.proc.returncode}; see {self.log_path}"
                )
            try:
                r = health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=2)
                if r.status == health_pb2.HealthCheckResponse.SERVING:
                    break
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the server did not become SERVING; see {self.log_path}")
            time.sleep(0.2)
        old = self.channel
        self.channel = channel
        self.calls = {m: channel.unary_unary(f"/{SERVICE}/{m}") for m in RPCS}
        self.generation += 1
        if old is not None:
            old.close()
        self.sample_rss()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sample_rss(self) -> int | None:
        if self.proc is None:
            return None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kib = int(line.split()[1])
                    self.rss_kib.append(kib)
                    return kib
        except OSError:
            return None
        return None

    def restart_if_dead(self) -> bool:
        """Restart a dead server (once per death); True if it had died."""
        with self.lock:
            if self.alive():
                return False
            assert self.proc is not None
            self.crashes.append(f"exit code {self.proc.returncode}")
            self.start()
            return True

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.channel is not None:
            self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode
