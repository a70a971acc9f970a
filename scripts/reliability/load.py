"""The load scenario: concurrent clients sending Solve back to back, and the admission
probe."""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import grpc

from scripts.reliability.rpc import (
    CHANNEL_OPTIONS,
    SERVICE,
    Background,
    code_name,
    load_snapshot,
    retry_delay,
    termination,
    with_options,
)
from scripts.reliability.server import Server, cpu_seconds
from scripts.reliability.stats import ms, pct, table
from solver._proto.dsfro.v1 import scheduler_pb2 as pb

LATE_SLACK_SECONDS = 0.1
"""An answer later than budget + this counts as late (the target: p99 <= budget + 0.1 s)."""
SLACK_SECONDS = {"medium": 0.05, "large": 0.1}
"""The target's slack per snapshot (issue 16: budget + 50 ms for medium, + 100 ms for large);
others get LATE_SLACK_SECONDS."""


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
        slack = SLACK_SECONDS.get(self.case.family, LATE_SLACK_SECONDS)
        late = sum(x.seconds > self.case.budget + slack for x in ok)
        every = [x.seconds for x in a]
        late_any = sum(t > self.case.budget + slack for t in every)
        no_plan = sum(x.plan_jobs == 0 for x in ok)
        delays = sorted(x.retry_delay for x in rej if x.retry_delay is not None)
        no_hint = sum(x.retry_delay is None for x in rej)
        overhead = [x.seconds - x.server_wall for x in ok if x.server_wall is not None]
        return {
            "snapshot": self.case.family,
            "budget / deadline (s)": f"{self.case.budget:g} / {self.case.rpc_timeout:g}",
            "OK": f"{len(ok):,}",
            "p50 / p90 / p99 / max (ms)": " / ".join(ms(pct(lat, q)) for q in (50, 90, 99, 100)),
            "slack (ms)": f"{1000 * slack:.0f}",
            "OK > budget+slack": f"{late:,}",
            "every attempt p50 / p99 / max (ms)": " / ".join(
                ms(pct(every, q)) for q in (50, 99, 100)
            ),
            "attempts > budget+slack": f"{late_any:,} of {len(a):,}",
            "refusals without RetryInfo": f"{no_hint:,}",
            "OK without plan": f"{no_plan:,}",
            "rejected (metric)": f"{len(rej):,} ({self.rejections_metric:,.0f})",
            "reject p50 / p99 (ms)": " / ".join(
                ms(pct([x.seconds for x in rej], q)) for q in (50, 99)
            ),
            "RetryInfo delay min / max (s)": (
                f"{delays[0]:g} / {delays[-1]:g}" if delays else "-"
            ),
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
    "slack (ms)",
    "every attempt p50 / p99 / max (ms)",
    "attempts > budget+slack",
    "OK",
    "p50 / p90 / p99 / max (ms)",
    "OK > budget+slack",
    "OK without plan",
    "plans",
    "rejected (metric)",
    "reject p50 / p99 (ms)",
    "refusals without RetryInfo",
    "RetryInfo delay min / max (s)",
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


HOLDER = "hetero-power-256"
"""What holds every solve slot during the probe: a snapshot no solve proves optimal within
HOLD_SECONDS, so that it runs its whole budget (medium, used before, was proven in a fraction
of a second, and the probe's "refused" Solves were admitted: OK 200 at 0.8 s each)."""
HOLD_SECONDS = 120.0
"""The holders' budget: longer than the probe's calls take (200 refusals of up to 0.4 s)."""


def admission_probe(args: argparse.Namespace, cache: Path, log_dir: Path) -> str:
    """One client, calls one after another: GetServerInfo on an idle server; then, with every
    solve slot taken by a solve of HOLDER, GetServerInfo and refused Solves of large."""
    holder = with_options(load_snapshot(HOLDER, args.seed, cache), HOLD_SECONDS)
    held_request = holder.SerializeToString()
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
        slots = server.info.max_concurrent_solves
        busy = [Background(channel, held_request, HOLD_SECONDS + 60) for _ in range(slots)]
        time.sleep(1.0)
        cpu0 = cpu_seconds(server.pid)
        t0 = time.monotonic()
        busy_info, _ = _timed_calls(get_info, info, n)
        refused, codes = _timed_calls(solve, large, n)
        share = (cpu_seconds(server.pid) - cpu0) / (time.monotonic() - t0)
        held = sum(1 for b in busy if not b.done_at)
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
        f"solving the server process used {share:.2f} CPUs; slots still held by {HOLDER}'s "
        f"{HOLD_SECONDS:g} s solves at the end: {held} of {len(busy)}\n\n"
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
