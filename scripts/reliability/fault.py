"""The fault scenario: pool workers killed during and between solves, a cancelled solve,
SIGTERM during a solve."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from scripts.reliability.rpc import (
    CHANNEL_OPTIONS,
    SERVICE,
    Background,
    code_name,
    load_snapshot,
    solve_once,
    termination,
    with_options,
)
from scripts.reliability.server import Server, proc_state
from scripts.reliability.stats import table
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.offline.generate import tiny_instances


@dataclass
class FaultRow:
    what: str
    outcome: str
    times: str
    verdict: str


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


def _wait_workers(server: Server, n: int, timeout: float) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        workers = server.pool_workers()
        if len(workers) >= n:
            return workers
        time.sleep(0.01)
    return server.pool_workers()


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
        busy = [w for w in workers if proc_state(w) not in ("S", "X")]
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
        seconds, warm, code = solve_once(channel, payload, timeout)
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
                seconds, nxt, code = solve_once(channel, payload, timeout)
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
        seconds, nxt, code = solve_once(channel, payload, timeout)
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
        late_seconds, _, late_code = solve_once(
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
