"""Load and fault benchmark of the gRPC service: the server runs as a separate process.

Scenarios (docs/reliability.md gives the figures and how to read them):

* load: N concurrent clients (32) send Solve back to back for --duration seconds, on the
  medium and the large benchmark snapshot (seed 1): time budget 1 s, RPC deadline 5 s; then
  with short RPC deadlines (0.3 s medium, 1 s large) and a 5 s budget. Clients honour the
  google.rpc.RetryInfo of a RESOURCE_EXHAUSTED refusal (they sleep its delay). Then an
  admission probe: one client's GetServerInfo and refused Solve times, idle and busy.
* fault: SIGKILL a worker of the decomposed solve's process pool in round 2 of a solve
  (--kills times; round 2 seen from the workers' process states), and while idle; cancel
  a 60 s solve and time until a new one is admitted (max_concurrent_solves=1); SIGTERM the
  server during a 30 s solve.
* memory: --memory-requests (10,000) mixed calls against one server, its RSS sampled every
  500 requests.

    .venv/bin/python scripts/bench_reliability.py --scenario all
    .venv/bin/python scripts/bench_reliability.py --scenario load --duration 15
    .venv/bin/python scripts/bench_reliability.py --scenario fault --kills 1
    .venv/bin/python scripts/bench_reliability.py --scenario memory --memory-requests 1000

Clients send pre-serialized request bytes through raw (bytes in, bytes out) unary-unary
callables; a response is decoded only after its time has been taken.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.offline.generate import generate, spec_from_args, tiny_instances

REPO = Path(__file__).resolve().parent.parent
SERVICE = "/dsfro.v1.SchedulerService/"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
MESSAGE_LIMIT = 512 << 20
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MESSAGE_LIMIT),
    ("grpc.max_receive_message_length", MESSAGE_LIMIT),
]
LATE_SLACK_SECONDS = 0.1
"""An OK answer later than budget + this counts as late (the target: p99 <= budget + 0.1 s)."""


# ---------------------------------------------------------------- helpers


def pct(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank) of values; nan when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{1000 * seconds:,.0f}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def retry_delay(error: Any) -> float | None:
    """The google.rpc.RetryInfo delay of a failed call, in seconds, or None."""
    for key, value in error.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                return float(info.retry_delay.ToTimedelta().total_seconds())
    return None


def code_name(error: Any) -> str:
    code = error.code()
    return str(code.name) if code is not None else "UNKNOWN"


def termination(response: pb.SolveResponse) -> str:
    return pb.Termination.Name(response.stats.termination).removeprefix("TERMINATION_")


def with_options(
    request: pb.SolveRequest, budget: float, backend: int = pb.BACKEND_AUTO
) -> pb.SolveRequest:
    out = pb.SolveRequest()
    out.CopyFrom(request)
    out.options.time_budget.FromMilliseconds(round(budget * 1000))
    out.options.backend = backend  # type: ignore[assignment]
    return out


def load_snapshot(family: str, seed: int, cache_dir: Path) -> pb.SolveRequest:
    """The benchmark family's snapshot, generated once and cached as binary protobuf."""
    path = cache_dir / f"{family}-seed{seed}-dsfro{solver.__version__}.binpb"
    if path.exists():
        return pb.SolveRequest.FromString(path.read_bytes())
    request = generate(spec_from_args(["--family", family, "--seed", str(seed)]))
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(request.SerializeToString())
    tmp.replace(path)
    return request


# ---------------------------------------------------------------- the server process


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
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=log)
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
        """The decomposed solves' process pool: children started by multiprocessing's spawn
        (not its resource tracker, not the exact model's `solver.exact.isolated` workers)."""
        return [p for p in children(self.pid) if "multiprocessing.spawn" in cmdline(p)]

    def children_rss_kib(self) -> int:
        total = 0
        for p in children(self.pid):
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


# ---------------------------------------------------------------- load


class Attempt(NamedTuple):
    sent: float
    """time.monotonic() when the call was made (one clock for every process)."""
    seconds: float
    code: str
    retry_delay: float | None
    termination: str | None
    server_wall: float | None
    plan_jobs: int


@dataclass(frozen=True)
class ClientJob:
    address: str
    payload: bytes
    clients: int
    start: float
    """time.monotonic() instant the clients begin; they stop sending at start + duration."""
    duration: float
    rpc_timeout: float
    honour_retry: bool


class GroupResult(NamedTuple):
    attempts: list[Attempt]
    slept: float
    lag: list[float]
    """How late a 10 ms sleep of a probe thread woke up, seconds: the client process's own
    scheduling and GIL delay, which also delays when a client reads its clock."""
    cpu: float


def _client(job: ClientJob, out: list[Attempt], slept: list[float]) -> None:
    with grpc.insecure_channel(job.address, options=CHANNEL_OPTIONS) as channel:
        solve = channel.unary_unary(SERVICE + "Solve")
        end = job.start + job.duration
        while time.monotonic() < job.start:
            time.sleep(0.001)
        while (t := time.monotonic()) < end:
            try:
                raw = solve(job.payload, timeout=job.rpc_timeout)
                seconds = time.monotonic() - t
            except grpc.RpcError as e:
                seconds = time.monotonic() - t
                delay = retry_delay(e)
                code = code_name(e)
                out.append(Attempt(t, seconds, code, delay, None, None, 0))
                if code == "RESOURCE_EXHAUSTED" and job.honour_retry and delay is not None:
                    pause = min(delay, max(end - time.monotonic(), 0.0))
                elif code in ("UNAVAILABLE", "INTERNAL", "UNKNOWN"):
                    pause = 0.1  # not a busy loop against a failing server
                else:
                    pause = 0.0
                slept.append(pause)
                time.sleep(pause)
                continue
            r = pb.SolveResponse.FromString(raw)
            wall = r.stats.wall_time.ToTimedelta().total_seconds()
            out.append(
                Attempt(t, seconds, "OK", None, termination(r), wall, len(r.plan.assignments))
            )


def run_client_group(job: ClientJob) -> GroupResult:
    """`job.clients` client threads in this process, and a lag probe."""
    cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    outs: list[list[Attempt]] = [[] for _ in range(job.clients)]
    slept: list[float] = []
    lag: list[float] = []
    threads = [
        threading.Thread(target=_client, args=(job, out, slept), daemon=True) for out in outs
    ]
    for t in threads:
        t.start()
    end = job.start + job.duration
    while time.monotonic() < end:
        t0 = time.monotonic()
        time.sleep(0.01)
        lag.append(time.monotonic() - t0 - 0.01)
    for t in threads:
        t.join()
    cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu0
    return GroupResult([a for out in outs for a in out], sum(slept), lag, cpu)


def run_clients(job: ClientJob, processes: int) -> GroupResult:
    """The clients as threads of this process (processes <= 1), or spread over processes."""
    if processes <= 1:
        return run_client_group(job)
    shares = [job.clients // processes + (i < job.clients % processes) for i in range(processes)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=processes, mp_context=ctx) as pool:
        parts = [
            pool.submit(run_client_group, ClientJob(**{**job.__dict__, "clients": n}))
            for n in shares
            if n
        ]
        results = [p.result() for p in parts]
    return GroupResult(
        [a for r in results for a in r.attempts],
        sum(r.slept for r in results),
        [x for r in results for x in r.lag],
        sum(r.cpu for r in results),
    )


@dataclass(frozen=True)
class LoadCase:
    family: str
    budget: float
    rpc_timeout: float


@dataclass
class LoadRow:
    case: LoadCase
    result: GroupResult
    server_cpus: int
    max_concurrent: int
    server_cpu: float
    rejections_metric: float
    duration: float

    def cells(self) -> dict[str, str]:
        a = self.result.attempts
        ok = [x for x in a if x.code == "OK"]
        lat = [x.seconds for x in ok]
        rej = [x for x in a if x.code == "RESOURCE_EXHAUSTED"]
        other = Counter(x.code for x in a if x.code not in ("OK", "RESOURCE_EXHAUSTED"))
        statuses = Counter(x.termination for x in ok)
        late = sum(x.seconds > self.case.budget + LATE_SLACK_SECONDS for x in ok)
        no_plan = sum(x.plan_jobs == 0 for x in ok)
        delays = sorted({x.retry_delay for x in rej if x.retry_delay is not None})
        overhead = [x.seconds - x.server_wall for x in ok if x.server_wall is not None]
        return {
            "snapshot": self.case.family,
            "budget / deadline (s)": f"{self.case.budget:g} / {self.case.rpc_timeout:g}",
            "OK": f"{len(ok):,}",
            "p50 / p90 / p99 / max (ms)": " / ".join(ms(pct(lat, q)) for q in (50, 90, 99, 100)),
            "OK > budget+100 ms": f"{late:,}",
            "OK without plan": f"{no_plan:,}",
            "rejected (metric)": f"{len(rej):,} ({self.rejections_metric:,.0f})",
            "reject p50 / p99 (ms)": " / ".join(
                ms(pct([x.seconds for x in rej], q)) for q in (50, 99)
            ),
            "RetryInfo delay (s)": ", ".join(f"{d:g}" for d in delays) or "-",
            "slept (client-s)": f"{self.result.slept:,.0f}",
            "other codes": ", ".join(f"{k} {v}" for k, v in sorted(other.items())) or "none",
            "plans": ", ".join(f"{k} {v}" for k, v in sorted(statuses.items(), key=str)) or "-",
            "server wall p50 / p99 (ms)": " / ".join(
                ms(pct([x.server_wall for x in ok if x.server_wall is not None], q))
                for q in (50, 99)
            ),
            "answer - server wall p50 / p99 (ms)": " / ".join(
                ms(pct(overhead, q)) for q in (50, 99)
            ),
            "client lag p99 / max (ms)": " / ".join(
                f"{1000 * pct(self.result.lag, q):.1f}" for q in (99, 100)
            ),
            "CPU s: server / clients": f"{self.server_cpu:,.0f} / {self.result.cpu:,.0f}",
            "server CPUs / max_concurrent_solves": f"{self.server_cpus} / {self.max_concurrent}",
        }


def load_case(
    case: LoadCase,
    request: pb.SolveRequest,
    args: argparse.Namespace,
    log_dir: Path,
) -> LoadRow:
    payload = with_options(request, case.budget).SerializeToString()
    extra = []
    if args.max_concurrent_solves:
        extra = ["--max-concurrent-solves", str(args.max_concurrent_solves)]
    with Server(extra, log_dir) as server:
        cpu0 = cpu_seconds(server.pid)
        job = ClientJob(
            server.address,
            payload,
            args.clients,
            time.monotonic() + 1.0 + 0.5 * args.client_processes,
            args.duration,
            case.rpc_timeout,
            True,
        )
        result = run_clients(job, args.client_processes)
        server_cpu = cpu_seconds(server.pid) - cpu0
        metrics = server.metrics()
        rejections = sum(v for k, v in metrics.items() if k.startswith("dsfro_rejections_total"))
        return LoadRow(
            case,
            result,
            server.cpus(),
            server.info.max_concurrent_solves,
            server_cpu,
            rejections,
            args.duration,
        )


LOAD_COLUMNS = (
    "snapshot",
    "budget / deadline (s)",
    "OK",
    "p50 / p90 / p99 / max (ms)",
    "OK > budget+100 ms",
    "OK without plan",
    "plans",
    "rejected (metric)",
    "reject p50 / p99 (ms)",
    "RetryInfo delay (s)",
    "slept (client-s)",
    "other codes",
)
LOAD_CONTEXT_COLUMNS = (
    "snapshot",
    "budget / deadline (s)",
    "server CPUs / max_concurrent_solves",
    "CPU s: server / clients",
    "server wall p50 / p99 (ms)",
    "answer - server wall p50 / p99 (ms)",
    "client lag p99 / max (ms)",
)


def _timed_calls(call: Any, payload: bytes, n: int) -> tuple[list[float], Counter[str]]:
    times: list[float] = []
    codes: Counter[str] = Counter()
    for _ in range(n):
        t = time.monotonic()
        try:
            call(payload, timeout=10)
            codes["OK"] += 1
        except grpc.RpcError as e:
            codes[code_name(e)] += 1
        times.append(time.monotonic() - t)
    return times, codes


def admission_probe(args: argparse.Namespace, cache: Path, log_dir: Path) -> str:
    """One client, calls one after another: GetServerInfo on an idle server; then, with every
    solve slot taken by a 30 s solve of medium, GetServerInfo and refused Solves of large."""
    medium = with_options(load_snapshot("medium", args.seed, cache), 30).SerializeToString()
    large = with_options(load_snapshot("large", args.seed, cache), 1).SerializeToString()
    info = pb.GetServerInfoRequest().SerializeToString()
    n = args.probe_calls
    extra = []
    if args.max_concurrent_solves:
        extra = ["--max-concurrent-solves", str(args.max_concurrent_solves)]
    with (
        Server(extra, log_dir) as server,
        grpc.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel,
    ):
        get_info = channel.unary_unary(SERVICE + "GetServerInfo")
        solve = channel.unary_unary(SERVICE + "Solve")
        idle, _ = _timed_calls(get_info, info, n)
        busy = [Background(channel, medium, 60) for _ in range(server.info.max_concurrent_solves)]
        time.sleep(1.0)
        cpu0 = cpu_seconds(server.pid)
        t0 = time.monotonic()
        busy_info, _ = _timed_calls(get_info, info, n)
        refused, codes = _timed_calls(solve, large, n)
        share = (cpu_seconds(server.pid) - cpu0) / (time.monotonic() - t0)
        for b in busy:
            b.cancel()
    rows = [
        ("GetServerInfo, server idle", idle, "OK"),
        ("GetServerInfo, every slot solving", busy_info, "OK"),
        (
            "Solve of large (346 KB) refused, every slot solving",
            refused,
            ", ".join(f"{k} {v}" for k, v in sorted(codes.items())),
        ),
    ]
    return (
        f"admission probe: {n} calls each, one after another; server CPUs {server.cpus()}, "
        f"max_concurrent_solves {server.info.max_concurrent_solves}; while the slots were "
        f"solving the server process used {share:.2f} CPUs\n\n"
        + table(
            ("call", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)", "codes"),
            [
                (what, *(f"{1000 * pct(t, q):.1f}" for q in (50, 90, 99, 100)), c)
                for what, t, c in rows
            ],
        )
    )


def scenario_load(args: argparse.Namespace, cache: Path, log_dir: Path) -> None:
    families = [f for f in args.families.split(",") if f]
    cases = [LoadCase(f, 1.0, 5.0) for f in families]
    short = {"medium": 0.3, "large": 1.0}
    cases += [LoadCase(f, 5.0, short.get(f, 1.0)) for f in families]
    rows = []
    for case in cases:
        request = load_snapshot(case.family, args.seed, cache)
        print(f"load: {case} ...", file=sys.stderr, flush=True)
        rows.append(load_case(case, request, args, log_dir))
    cells = [r.cells() for r in rows]
    print(
        f"\n### load: {args.clients} clients x {args.duration:g} s, threads in "
        f"{max(args.client_processes, 1)} client process(es)\n"
    )
    print(table(LOAD_COLUMNS, [[c[k] for k in LOAD_COLUMNS] for c in cells]))
    print()
    print(table(LOAD_CONTEXT_COLUMNS, [[c[k] for k in LOAD_CONTEXT_COLUMNS] for c in cells]))
    print("load: admission probe ...", file=sys.stderr, flush=True)
    print(f"\n### {admission_probe(args, cache, log_dir)}")


# ---------------------------------------------------------------- fault


@dataclass
class FaultRow:
    what: str
    outcome: str
    times: str
    verdict: str


def _solve(
    channel: Any, request: bytes, timeout: float
) -> tuple[float, pb.SolveResponse | None, str]:
    """(seconds, the response or None, the status code name) of one blocking Solve."""
    t = time.monotonic()
    try:
        raw = channel.unary_unary(SERVICE + "Solve")(request, timeout=timeout)
    except grpc.RpcError as e:
        return time.monotonic() - t, None, f"{code_name(e)}: {e.details()}"
    return time.monotonic() - t, pb.SolveResponse.FromString(raw), "OK"


def _evaluate(channel: Any, request: pb.SolveRequest, plan: pb.Plan) -> str:
    raw = channel.unary_unary(SERVICE + "EvaluatePlan")(
        pb.EvaluatePlanRequest(request=request, plan=plan).SerializeToString(), timeout=120
    )
    r = pb.EvaluatePlanResponse.FromString(raw)
    return "valid" if r.valid else f"INVALID ({len(r.violations)} violations)"


def _describe(seconds: float, response: pb.SolveResponse | None, code: str) -> str:
    if response is None:
        return f"{code} after {seconds:.2f} s"
    s = response.stats
    running = sum(a.state == pb.JOB_STATE_RUNNING for a in response.plan.assignments)
    return (
        f"{termination(response)} in {seconds:.2f} s, {running:,}/"
        f"{len(response.plan.assignments):,} jobs running"
    ) + (f"; detail: {s.detail}" if s.detail else "")


class Background:
    """One Solve on a thread of its own: .result() waits for (seconds, response, code)."""

    def __init__(self, channel: Any, request: bytes, timeout: float) -> None:
        self.sent = time.monotonic()
        self.done_at = 0.0
        self._out: tuple[float, pb.SolveResponse | None, str] | None = None
        self._call = channel.unary_unary(SERVICE + "Solve").future(request, timeout=timeout)
        self._call.add_done_callback(self._done)

    def _done(self, _: Any) -> None:
        self.done_at = time.monotonic()

    def cancel(self) -> None:
        self._call.cancel()

    def result(self) -> tuple[float, pb.SolveResponse | None, str]:
        try:
            raw = self._call.result()
            out = pb.SolveResponse.FromString(raw)
            code = "OK"
        except grpc.FutureCancelledError:
            out, code = None, "CANCELLED"
        except grpc.RpcError as e:
            out, code = None, f"{code_name(e)}: {e.details()}"
        while not self.done_at:
            time.sleep(0.001)
        return self.done_at - self.sent, out, code


def _wait_workers(server: Server, n: int, timeout: float) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        workers = server.pool_workers()
        if len(workers) >= n:
            return workers
        time.sleep(0.01)
    return server.pool_workers()


def _state(pid: int) -> str:
    """R running or runnable, S sleeping, ...; X when gone."""
    try:
        return _proc_stat(pid)[0]
    except (OSError, IndexError):
        return "X"


ROUND_GAP_SECONDS = 0.03
"""Both pool workers asleep this long after they worked: round 1 is over (the caller merges
its parts and builds round 2's tasks, some 100-300 ms on large)."""


def _kill_in_round_2(server: Server, call: Background) -> tuple[int | None, float]:
    """SIGKILL a pool worker 50 ms after round 2 starts: the workers have run (round 1),
    slept together at least ROUND_GAP_SECONDS (the caller merging), and one runs again. The
    worker killed and when (seconds after the call was sent); None if the call ended first."""
    worked = False
    idle_since: float | None = None
    gap_seen = False
    while not call.done_at:
        workers = server.pool_workers()
        busy = [w for w in workers if _state(w) not in ("S", "X")]
        now = time.monotonic()
        if busy and not gap_seen:
            worked, idle_since = True, None
        elif workers and not busy and worked:
            idle_since = now if idle_since is None else idle_since
            gap_seen = gap_seen or now - idle_since >= ROUND_GAP_SECONDS
        elif busy and gap_seen:
            time.sleep(0.05)
            if call.done_at:
                break
            os.kill(busy[0], signal.SIGKILL)
            return busy[0], time.monotonic() - call.sent
        time.sleep(0.002)
    return None, time.monotonic() - call.sent


def _kill_phase(
    response: pb.SolveResponse | None, code: str, check: str, seconds: float, killed_at: float
) -> tuple[str, str]:
    """Where the kill landed, judged from the answer, and the verdict."""
    if response is None:
        if code.startswith("UNAVAILABLE"):
            return "round 1", "no plan yet: UNAVAILABLE, retry (as documented)"
        return "?", "FAIL"
    if "died" in response.stats.detail:
        ok = _ok_plan(response, {"FALLBACK"}) and check == "valid"
        return "round 2", "OK (FALLBACK, valid plan)" if ok else "FAIL"
    if response is not None and "died" not in response.stats.detail:
        # A worker killed while it runs a part fails that map at once (BrokenProcessPool):
        # no note means the parts were done (the caller was merging, bounding, answering).
        where = "after the answer" if seconds <= killed_at + 0.05 else "after the parts"
        return where, "missed: the pool was idle; retried"
    return "?", "FAIL"


def _ok_plan(r: pb.SolveResponse | None, terminations: set[str]) -> bool:
    return r is not None and termination(r) in terminations and len(r.plan.assignments) > 0


def fault_kills(args: argparse.Namespace, cache: Path, log_dir: Path) -> tuple[list[FaultRow], str]:
    large = load_snapshot("large", args.seed, cache)
    request = with_options(large, args.fault_budget, pb.BACKEND_DECOMPOSED)
    payload = request.SerializeToString()
    rows: list[FaultRow] = []
    timeout = args.fault_budget + 60
    with (
        Server([], log_dir) as server,
        grpc.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel,
    ):
        seconds, warm, code = _solve(channel, payload, timeout)
        if warm is None:
            raise RuntimeError(f"warm-up decomposed solve failed: {code}")
        first = warm.stats.time_to_first_plan.ToTimedelta().total_seconds()
        wall = warm.stats.wall_time.ToTimedelta().total_seconds()
        # Round 2 (the parts' improvement) runs after the first plan: a worker lost there
        # costs the improvement only (FALLBACK); lost in round 1, no plan exists yet.
        rows.append(
            FaultRow(
                "warm-up: decomposed solve of large",
                _describe(seconds, warm, code),
                f"first plan {first:.2f} s, wall {wall:.2f} s",
                "OK" if _ok_plan(warm, {"FEASIBLE", "OPTIMAL"}) else "FAIL",
            )
        )
        restarts0 = server.metrics().get('dsfro_worker_restarts_total{kind="pool"}', 0.0)
        for k in range(args.kills):
            for attempt in range(1, args.kill_attempts + 1):
                print(f"fault: kill {k + 1}/{args.kills} ...", file=sys.stderr, flush=True)
                call = Background(channel, payload, timeout)
                if args.kill_at is None:
                    victim, killed_at = _kill_in_round_2(server, call)
                else:
                    _wait_workers(server, 1, 30)
                    time.sleep(max(0.0, call.sent + args.kill_at - time.monotonic()))
                    workers = server.pool_workers()
                    killed_at = time.monotonic() - call.sent
                    victim = workers[0] if workers else None
                    if victim is not None:
                        os.kill(victim, signal.SIGKILL)
                seconds, response, code = call.result()
                check = "-"
                if response is not None:
                    check = _evaluate(channel, request, response.plan)
                phase, verdict = _kill_phase(response, code, check, seconds, killed_at)
                what = f"SIGKILL pool worker {victim} at {killed_at:.2f} s ({phase})"
                if victim is None:
                    what, phase, verdict = "no round 2 seen: no kill", "-", "missed; retried"
                rows.append(
                    FaultRow(
                        f"kill {k + 1}, try {attempt}: {what}",
                        _describe(seconds, response, code) + f"; EvaluatePlan: {check}",
                        f"answer {seconds:.2f} s",
                        verdict,
                    )
                )
                seconds, nxt, code = _solve(channel, payload, timeout)
                rows.append(
                    FaultRow(
                        f"kill {k + 1}, try {attempt}: next solve",
                        _describe(seconds, nxt, code) + f"; workers now {server.pool_workers()}",
                        f"answer {seconds:.2f} s",
                        "OK" if _ok_plan(nxt, {"FEASIBLE", "OPTIMAL"}) else "FAIL",
                    )
                )
                if phase == "round 2":
                    break
        # A worker killed while the pool is idle.
        workers = server.pool_workers()
        victim = workers[0] if workers else None
        if victim is not None:
            os.kill(victim, signal.SIGKILL)
        time.sleep(0.5)
        seconds, nxt, code = _solve(channel, payload, timeout)
        rows.append(
            FaultRow(
                f"SIGKILL idle pool worker {victim}, 0.5 s later solve",
                _describe(seconds, nxt, code) + f"; workers now {server.pool_workers()}",
                f"answer {seconds:.2f} s",
                "OK" if _ok_plan(nxt, {"FEASIBLE", "OPTIMAL"}) else "FAIL",
            )
        )
        restarts = server.metrics().get('dsfro_worker_restarts_total{kind="pool"}', 0.0)
        note = (
            f"decomposed large, budget {args.fault_budget:g} s; server CPUs {server.cpus()}, "
            f"max_concurrent_solves {server.info.max_concurrent_solves}; "
            f'dsfro_worker_restarts_total{{kind="pool"}} went {restarts0:g} -> {restarts:g}'
        )
    return rows, note


def _admission_after_cancel(
    channel: Any, request: pb.SolveRequest, probe: bytes, cancel_after: float
) -> FaultRow:
    """Cancel a long solve after `cancel_after` s; poll Solve until one is admitted."""
    long = with_options(request, 60.0, request.options.backend)
    call = Background(channel, long.SerializeToString(), 120)
    time.sleep(cancel_after)
    solve = channel.unary_unary(SERVICE + "Solve")
    t_cancel = time.monotonic()
    call.cancel()
    last_refusal = None
    refusals = 0
    while True:
        t = time.monotonic()
        if t - t_cancel > 120:
            return FaultRow("cancel", "no solve admitted within 120 s", "-", "FAIL")
        try:
            solve(probe, timeout=30)
            break
        except grpc.RpcError as e:
            if code_name(e) != "RESOURCE_EXHAUSTED":
                raise
            refusals += 1
            last_refusal = time.monotonic() - t_cancel
            time.sleep(0.005)
    admitted = t - t_cancel
    backend = pb.Backend.Name(request.options.backend).removeprefix("BACKEND_").lower()
    return FaultRow(
        f"cancel a 60 s solve of {len(request.jobs):,} jobs ({backend}) after "
        f"{cancel_after:g} s; max_concurrent_solves=1",
        f"new Solve admitted; {refusals} refusals before",
        f"admitted {1000 * admitted:,.0f} ms after cancel (last refusal at "
        f"{'-' if last_refusal is None else f'{1000 * last_refusal:,.0f} ms'})",
        "OK" if admitted <= 0.1 else "SLOW (> 100 ms)",
    )


def fault_cancel(args: argparse.Namespace, cache: Path, log_dir: Path) -> list[FaultRow]:
    medium = load_snapshot("medium", args.seed, cache)
    large = load_snapshot("large", args.seed, cache)
    tiny = with_options(next(iter(tiny_instances().values())), 0.05).SerializeToString()
    rows = []
    with (
        Server(["--max-concurrent-solves", "1"], log_dir) as server,
        grpc.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel,
    ):
        rows.append(_admission_after_cancel(channel, with_options(medium, 60), tiny, 1.0))
        decomposed = with_options(large, 60, pb.BACKEND_DECOMPOSED)
        rows.append(_admission_after_cancel(channel, decomposed, tiny, 1.0))
    return rows


def fault_sigterm(
    args: argparse.Namespace,
    cache: Path,
    log_dir: Path,
    request: pb.SolveRequest,
    label: str,
    after: float,
) -> FaultRow:
    with (
        Server([], log_dir) as server,
        grpc.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel,
    ):
        call = Background(
            channel, with_options(request, 30, request.options.backend).SerializeToString(), 60
        )
        time.sleep(after)
        assert server.proc is not None
        t = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        _, response, code = call.result()
        answered = call.done_at - t
        time.sleep(0.05)
        late_seconds, _, late_code = _solve(
            channel, with_options(request, 1).SerializeToString(), 5
        )
        try:
            server.proc.wait(60)
            exited = time.monotonic() - t
        except subprocess.TimeoutExpired:
            exited = float("nan")
        ok = _ok_plan(response, {"FEASIBLE", "OPTIMAL", "FALLBACK"}) and exited <= 10.5
        return FaultRow(
            f"SIGTERM during a 30 s solve of {label}, {after:g} s in (grace 10 s)",
            _describe(call.done_at - call.sent, response, code)
            + f"; a Solve sent after SIGTERM: {late_code.split(':')[0]} in {late_seconds:.2f} s",
            f"answer {1000 * answered:,.0f} ms after SIGTERM; process exit "
            f"{exited:.2f} s after SIGTERM (code {server.proc.returncode})",
            "OK" if ok else "FAIL",
        )


def scenario_fault(args: argparse.Namespace, cache: Path, log_dir: Path) -> None:
    print("fault: kills ...", file=sys.stderr, flush=True)
    rows, note = fault_kills(args, cache, log_dir)
    print("fault: cancel ...", file=sys.stderr, flush=True)
    rows += fault_cancel(args, cache, log_dir)
    print("fault: SIGTERM ...", file=sys.stderr, flush=True)
    medium = load_snapshot("medium", args.seed, cache)
    large = load_snapshot("large", args.seed, cache)
    rows.append(fault_sigterm(args, cache, log_dir, medium, "medium (auto)", 2.0))
    decomposed = with_options(large, 30, pb.BACKEND_DECOMPOSED)
    for after in (1.0, 3.0):
        rows.append(fault_sigterm(args, cache, log_dir, decomposed, "large (decomposed)", after))
    print(f"\n### fault ({note})\n")
    print(
        table(
            ("what", "outcome", "times", "verdict"),
            [(r.what, r.outcome.replace("|", "/"), r.times, r.verdict) for r in rows],
        )
    )


# ---------------------------------------------------------------- memory


@dataclass(frozen=True)
class Kind:
    name: str
    method: str
    payload: bytes
    weight: float
    cancel_after: float | None = None


def memory_kinds(cache: Path, seed: int) -> list[Kind]:
    small = load_snapshot("small", seed, cache)
    tinies = list(tiny_instances().values())
    invalid = with_options(small, 0.2)
    invalid.jobs[0].min_gpus = 4
    invalid.jobs[0].max_gpus = 2
    kinds = [
        Kind(f"Solve tiny-{i} 0.1 s", "Solve", with_options(t, 0.1).SerializeToString(), 0.08)
        for i, t in enumerate(tinies)
    ]
    kinds += [
        Kind("Solve small 0.2 s", "Solve", with_options(small, 0.2).SerializeToString(), 0.10),
        Kind(
            "ValidateSnapshot small",
            "ValidateSnapshot",
            pb.ValidateSnapshotRequest(request=small).SerializeToString(),
            0.18,
        ),
        Kind("GetServerInfo", "GetServerInfo", pb.GetServerInfoRequest().SerializeToString(), 0.15),
        Kind("Solve invalid (max_gpus < min_gpus)", "Solve", invalid.SerializeToString(), 0.08),
        Kind("Solve undecodable bytes", "Solve", b"\x0a\xff\xff\xff\xff", 0.04),
        Kind(
            "Solve small 5 s, cancelled after 50 ms",
            "Solve",
            with_options(small, 5).SerializeToString(),
            0.05,
            cancel_after=0.05,
        ),
    ]
    return kinds


def _evaluate_kind(server: Server, cache: Path, seed: int) -> Kind:
    small = with_options(load_snapshot("small", seed, cache), 0.5)
    with grpc.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel:
        _, response, code = _solve(channel, small.SerializeToString(), 30)
    if response is None:
        raise RuntimeError(f"solving small for EvaluatePlan failed: {code}")
    payload = pb.EvaluatePlanRequest(request=small, plan=response.plan).SerializeToString()
    return Kind("EvaluatePlan small", "EvaluatePlan", payload, 0.18)


def scenario_memory(args: argparse.Namespace, cache: Path, log_dir: Path) -> None:
    n = args.memory_requests
    every = args.sample_every
    with Server([], log_dir) as server:
        kinds = [*memory_kinds(cache, args.seed), _evaluate_kind(server, cache, args.seed)]
        rng = random.Random(args.seed)
        plan = rng.choices(kinds, weights=[k.weight for k in kinds], k=n)
        samples: list[tuple[int, int, int]] = [(0, rss_kib(server.pid), server.children_rss_kib())]
        outcomes: Counter[tuple[str, str]] = Counter()
        lock = threading.Lock()
        next_index = [0]
        done = [0]
        t0 = time.monotonic()

        def work() -> None:
            with grpc.insecure_channel(server.address, options=CHANNEL_OPTIONS) as channel:
                calls = {m: channel.unary_unary(SERVICE + m) for m in {k.method for k in kinds}}
                while True:
                    with lock:
                        i = next_index[0]
                        next_index[0] += 1
                    if i >= n:
                        return
                    kind = plan[i]
                    call = calls[kind.method]
                    if kind.cancel_after is not None:
                        future = call.future(kind.payload, timeout=30)
                        time.sleep(kind.cancel_after)
                        future.cancel()
                        try:
                            future.result()
                            code = "OK"
                        except grpc.FutureCancelledError:
                            code = "CANCELLED"
                        except grpc.RpcError as e:
                            code = code_name(e)
                    else:
                        try:
                            call(kind.payload, timeout=30)
                            code = "OK"
                        except grpc.RpcError as e:
                            code = code_name(e)
                    with lock:
                        outcomes[(kind.name, code)] += 1
                        done[0] += 1
                        if done[0] % every == 0:
                            samples.append(
                                (done[0], rss_kib(server.pid), server.children_rss_kib())
                            )
                            if done[0] % (every * 4) == 0:
                                print(f"memory: {done[0]:,} requests", file=sys.stderr, flush=True)

        threads = [threading.Thread(target=work) for _ in range(args.memory_clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        cpus, max_concurrent = server.cpus(), server.info.max_concurrent_solves
    print(
        f"\n### memory: {n:,} mixed requests from {args.memory_clients} client threads in "
        f"{elapsed:,.0f} s (server CPUs {cpus}, max_concurrent_solves {max_concurrent})\n"
    )
    names = [k.name for k in kinds]
    codes = sorted({c for _, c in outcomes})
    print(
        table(
            ("request", *codes),
            [(name, *(f"{outcomes[(name, c)]:,}" for c in codes)) for name in names],
        )
    )
    print()
    print(
        table(
            ("requests", "server RSS (MiB)", "children RSS (MiB)"),
            [(f"{i:,}", f"{r / 1024:.1f}", f"{c / 1024:.1f}") for i, r, c in samples],
        )
    )
    rss = {i: r / 1024 for i, r, _ in samples}
    warm = min((i for i in rss if i >= n // 10), default=0)
    """Warm-up: the first tenth of the requests (to the next sample)."""
    half = max((i for i in rss if i <= n - n // 2), default=0)

    def slope(since: int) -> float:
        points = [(i / 1000, r) for i, r in rss.items() if i >= since]
        if len(points) < 2:
            return float("nan")
        return statistics.linear_regression(*zip(*points, strict=True)).slope

    last = samples[-1][0]
    print()
    print(
        table(
            (
                "first (MiB)",
                f"at {warm:,} (MiB)",
                f"at {half:,} (MiB)",
                "last (MiB)",
                "max (MiB)",
                f"slope from {warm:,} / from {half:,} (MiB per 1,000)",
                f"last {last - half:,} requests added (MiB)",
            ),
            [
                (
                    f"{rss[0]:.1f}",
                    f"{rss.get(warm, float('nan')):.1f}",
                    f"{rss[half]:.1f}",
                    f"{rss[last]:.1f}",
                    f"{max(rss.values()):.1f}",
                    f"{slope(warm):+.2f} / {slope(half):+.2f}",
                    f"{rss[last] - rss[half]:+.1f}",
                )
            ],
        )
    )


# ---------------------------------------------------------------- main


def source_state() -> str:
    """The commit measured, and how many tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--short", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
    except OSError:
        return "not a git checkout"
    return f"commit {head or '?'}, {len(changed)} tracked files modified"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scenario", choices=["load", "fault", "memory", "all"], default="all")
    parser.add_argument("--duration", type=float, default=120.0, help="seconds per load run")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="spread the load clients over this many processes (1: threads of this one)",
    )
    parser.add_argument("--families", default="medium,large", help="load snapshots")
    parser.add_argument(
        "--max-concurrent-solves", type=int, default=0, help="for load (0: server default)"
    )
    parser.add_argument(
        "--probe-calls", type=int, default=200, help="calls per row of the admission probe"
    )
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument(
        "--kill-attempts", type=int, default=3, help="tries per kill to land in round 2"
    )
    parser.add_argument("--fault-budget", type=float, default=5.0)
    parser.add_argument(
        "--kill-at",
        type=float,
        default=None,
        help="seconds into the solve to kill a worker (default: 50 ms into round 2, seen from "
        "the pool workers' process states)",
    )
    parser.add_argument("--memory-requests", type=int, default=10_000)
    parser.add_argument("--memory-clients", type=int, default=4)
    parser.add_argument("--sample-every", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "dsfro-bench-snapshots"
    )
    args = parser.parse_args(argv)
    scenarios: dict[str, Callable[[argparse.Namespace, Path, Path], None]] = {
        "load": scenario_load,
        "fault": scenario_fault,
        "memory": scenario_memory,
    }
    logs = Path(tempfile.mkdtemp(prefix="dsfro-reliability-"))
    print(
        f"dsfro {solver.__version__} ({source_state()}); this machine: {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start; "
        f"server logs in {logs}"
    )
    for name, run in scenarios.items():
        if args.scenario in (name, "all"):
            run(args, args.cache_dir, logs)
            print(f"\n(load average after {name}: {os.getloadavg()[0]:.2f})")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
