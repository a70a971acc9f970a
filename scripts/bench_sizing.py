"""Sizing: memory, wall time and cores of the service per snapshot family, for its deployment.

For each family, ``dsfro generate --family NAME --seed N`` writes a snapshot; a fresh server
(``dsfro serve``, a subprocess, as in a container) is started for it, and the snapshot is solved
over gRPC from this process, as ``dsfro solve FILE --server`` sends it (``--concurrency 2``: that
many at once; the client's start-up is not in the wall time). While it solves, the server's
process tree (the server and the worker processes it spawns: the exact
solver's process, the local pool of decomposed solves) is sampled from /proc every 50 ms:

- server VmHWM: the peak resident set of the server process itself (kernel's high-water mark);
- tree peak RSS: the largest sum of resident sets over the tree seen at one sample (what a
  container's memory limit has to hold; shared library pages count once per process);
- cores: CPU time of the tree during the solve over the solve's wall time.

Nothing is asserted; the table is recorded with the command in docs/operations.md:

    .venv/bin/python scripts/bench_sizing.py --families small medium large xl --seed 1 \
        --concurrency 1 2
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app.convert import enum_label, load_request_json
from solver.offline.generate import FAMILIES, HETERO_POWER_FAMILIES

ROOT = Path(__file__).resolve().parent.parent
DSFRO = Path(sys.executable).parent / "dsfro"
TICKS = os.sysconf("SC_CLK_TCK")
SAMPLE_SECONDS = 0.05
MIB = 1 << 20


def _children() -> dict[int, list[int]]:
    """ppid -> pids, of every process now."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid: int) -> list[int]:
    """pid and every process below it."""
    tree = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(tree.get(p, []))
    return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of one process (its own, not its reaped children's)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def status_kib(pid: int, key: str) -> int | None:
    """A ``kB`` field of /proc/PID/status (VmRSS, VmHWM)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class TreeSampler:
    """Samples a process tree until stopped: CPU time per process, the largest summed RSS."""

    root: int
    cpu: dict[int, float] = field(default_factory=dict)
    baseline: dict[int, float] = field(default_factory=dict)
    peak_rss_kib: int = 0
    processes: set[int] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> None:
        rss = 0
        for pid in descendants(self.root):
            seconds = cpu_seconds(pid)
            kib = status_kib(pid, "VmRSS")
            if seconds is None or kib is None:
                continue
            self.cpu[pid] = seconds
            self.processes.add(pid)
            rss += kib
        self.peak_rss_kib = max(self.peak_rss_kib, rss)

    def total_cpu(self) -> float:
        """CPU seconds used by the tree since start."""
        return sum(s - self.baseline.get(pid, 0.0) for pid, s in self.cpu.items())

    def start(self) -> None:
        self.sample()
        self.baseline = dict(self.cpu)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            self.sample()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_serving(address: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1.0)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.2)
    raise TimeoutError(f"server at {address} not SERVING after {timeout:.0f}s")


def settle(pid: int, quiet_seconds: float = 1.0, timeout: float = 30.0) -> None:
    """Wait until the tree uses (almost) no CPU: start-up work (model loading, the exact
    solver's warm process) is not counted in the solve."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = sum(cpu_seconds(p) or 0.0 for p in descendants(pid))
        time.sleep(quiet_seconds)
        after = sum(cpu_seconds(p) or 0.0 for p in descendants(pid))
        if after - before < 0.05 * quiet_seconds:
            return


@dataclass(frozen=True)
class Row:
    family: str
    concurrency: int
    nodes: int
    jobs: int
    budget: float
    json_mib: float
    idle_rss_mib: float
    server_hwm_mib: float
    tree_peak_mib: float
    processes: int
    wall: float
    cpu: float
    status: str


def _status(response: pb.SolveResponse) -> str:
    s = response.stats
    return f"{enum_label(pb.Termination, s.termination)} ({enum_label(pb.Backend, s.backend_used)})"


def solve(address: str, request: pb.SolveRequest) -> str:
    """One Solve over gRPC, as a scheduler sends it (the snapshot's own time budget, an RPC
    deadline a minute later): its status, or the RPC's error code."""
    budget = request.options.time_budget.ToTimedelta().total_seconds()
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            response: pb.SolveResponse = stub.Solve(request, timeout=budget + 60)
        except grpc.RpcError as e:
            return f"error {e.code().name}"
        return _status(response)


def measure(family: str, seed: int, concurrency: int, workdir: Path) -> Row:
    nodes, jobs, budget = {**FAMILIES, **HETERO_POWER_FAMILIES}[family]
    snapshot = workdir / f"{family}-{seed}.json"
    if not snapshot.exists():
        subprocess.run(
            [DSFRO, "generate", "--family", family, "--seed", str(seed), "--out", snapshot],
            check=True,
        )
    request = load_request_json(str(snapshot))
    port = free_port()
    address = f"127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSFRO_")}
    server = subprocess.Popen(
        [
            DSFRO,
            "serve",
            "--port",
            str(port),
            "--max-time-budget-seconds",
            "600",
            "--max-concurrent-solves",
            str(max(concurrency, 2)),
            "--log-level",
            "WARNING",
        ],
        cwd=workdir,
        env=env,
    )
    try:
        wait_serving(address, timeout=120.0)
        settle(server.pid)
        idle = status_kib(server.pid, "VmRSS") or 0
        sampler = TreeSampler(server.pid)
        sampler.start()
        t = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            responses = list(pool.map(lambda _: solve(address, request), range(concurrency)))
        wall = time.monotonic() - t
        sampler.stop()
        hwm = status_kib(server.pid, "VmHWM") or 0
        statuses = sorted(set(responses))
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return Row(
        family=family,
        concurrency=concurrency,
        nodes=nodes,
        jobs=jobs,
        budget=budget,
        json_mib=snapshot.stat().st_size / MIB,
        idle_rss_mib=idle / 1024,
        server_hwm_mib=hwm / 1024,
        tree_peak_mib=sampler.peak_rss_kib / 1024,
        processes=len(sampler.processes),
        wall=wall,
        cpu=sampler.total_cpu(),
        status=", ".join(statuses),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--families",
        nargs="+",
        default=list(FAMILIES),
        choices=[*FAMILIES, *HETERO_POWER_FAMILIES],
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1], help="solves at once (1 2: both)"
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the snapshots here")
    args = parser.parse_args()
    print(
        "| family | nodes / jobs | snapshot JSON (MiB) | solves at once | budget (s) | "
        "wall (s) | status (plan from) | server idle RSS (MiB) | server VmHWM (MiB) | "
        "tree peak RSS (MiB) | processes | CPU (s) | cores (CPU / wall) |"
    )
    print("| --- " * 13 + "|")
    with tempfile.TemporaryDirectory(prefix="dsfro-sizing-") as tmp:
        workdir = args.keep or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for family in args.families:
            for n in args.concurrency:
                r = measure(family, args.seed, n, workdir)
                print(
                    f"| {r.family} | {r.nodes:,} / {r.jobs:,} | {r.json_mib:.2f} | "
                    f"{r.concurrency} | {r.budget:g} | {r.wall:.2f} | {r.status} | "
                    f"{r.idle_rss_mib:.0f} | {r.server_hwm_mib:.0f} | {r.tree_peak_mib:.0f} | "
                    f"{r.processes} | {r.cpu:.2f} | {r.cpu / r.wall:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
