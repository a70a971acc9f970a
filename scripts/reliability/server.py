"""The server under test: ``server.py`` in a process of its own, and what /proc says of it
and its children."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from scripts.common.ports import free_port
from scripts.reliability.rpc import HEALTH_CHECK, SERVICE
from solver._proto.dsfro.v1 import scheduler_pb2 as pb

REPO = Path(__file__).resolve().parent.parent.parent


def _proc_stat(pid: int) -> list[str]:
    """Fields of /proc/pid/stat after the command name (state is [0], ppid [1])."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    f = _proc_stat(pid)
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process under pid: its children, theirs, and so on."""
    out: list[int] = []
    todo = children(pid)
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return sorted(out)


def children(pid: int) -> list[int]:
    """Child processes of pid: /proc/pid/task/*/children, else a scan of /proc/*/stat."""
    found: set[int] = set()
    tasks = list(Path(f"/proc/{pid}/task").glob("*/children"))
    if tasks:
        for t in tasks:
            with contextlib.suppress(OSError):
                found.update(int(x) for x in t.read_text().split())
        return sorted(found)
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if int(_proc_stat(int(d.name))[1]) == pid:
                    found.add(int(d.name))
    return sorted(found)


def proc_state(pid: int) -> str:
    """R running or runnable, S sleeping, ...; X when gone."""
    try:
        return _proc_stat(pid)[0]
    except (OSError, IndexError):
        return "X"


@dataclass
class Server:
    """`server.py` in a process of its own, on free ports, log to a file."""

    args: list[str]
    log_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    metrics_port: int = 0
    log_path: Path = field(default_factory=Path)
    info: pb.GetServerInfoResponse = field(default_factory=pb.GetServerInfoResponse)
    cpu_count: int = 0
    checkout: Path = REPO
    """The source tree whose `server.py` runs (another commit's worktree for an A/B)."""
    env: dict[str, str] = field(default_factory=dict)
    """Set in the server's environment beside this process's (e.g. DSFRO_TUNING_*)."""

    def start(self, timeout: float = 60.0) -> Server:
        self.port, self.metrics_port = free_port(), free_port()
        self.log_path = self.log_dir / f"server-{self.port}.log"
        command = [
            sys.executable,
            "server.py",
            "--port",
            str(self.port),
            "--metrics-port",
            str(self.metrics_port),
            "--log-level",
            "WARNING",
            *self.args,
        ]
        env = {**os.environ, **self.env}
        if self.checkout != REPO:  # its own package, not the one installed here
            env["PYTHONPATH"] = str(self.checkout)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command, cwd=self.checkout, env=env, stdout=log, stderr=log
            )
        end = time.monotonic() + timeout
        check = health_pb2.HealthCheckRequest().SerializeToString()
        with grpc.insecure_channel(self.address) as channel:
            health = channel.unary_unary(HEALTH_CHECK)
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited: see {self.log_path}")
                try:
                    answer = health_pb2.HealthCheckResponse.FromString(health(check, timeout=1))
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError:
                    pass
                if time.monotonic() > end:
                    raise RuntimeError(f"server not serving after {timeout}s: {self.log_path}")
                time.sleep(0.1)
            info = channel.unary_unary(SERVICE + "GetServerInfo")
            raw = info(pb.GetServerInfoRequest().SerializeToString(), timeout=10)
            self.info = pb.GetServerInfoResponse.FromString(raw)
        self.cpu_count = len(os.sched_getaffinity(self.proc.pid))
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpus(self) -> int:
        """CPUs the server may run on (its affinity, read at start)."""
        return self.cpu_count

    def pool_workers(self) -> list[int]:
        """The decomposed solves' process pool, started by a solve worker: kept workers that
        preload nothing (not the solve workers, not the exact model's isolated workers)."""
        return [
            p
            for p in descendants(self.pid)
            if "solver.runtime.workers" in (line := cmdline(p))
            and "solver.service.worker" not in line
            and "solver.exact." not in line
        ]

    def children_rss_kib(self) -> int:
        """Resident memory of every process under the server (solve workers and theirs)."""
        total = 0
        for p in descendants(self.pid):
            with contextlib.suppress(OSError):
                total += rss_kib(p)
        return total

    def metrics(self) -> dict[str, float]:
        """The Prometheus text exposition, as {series with labels: value}."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
