"""A fuzzing run (client threads against one server), and the replay of saved failures."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import json_format

from scripts.fuzz.check import Checker, Outcome
from scripts.fuzz.constants import (
    FAILING_CODES,
    REQUEST_TYPES,
    SAVED_PER_REASON,
    SAVED_REASONS,
    SERVICE,
)
from scripts.fuzz.corpus import Case, CaseMaker, Seed, load_corpus, short
from scripts.fuzz.report import Stats, report
from scripts.fuzz.server import Server
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits


def save_failure(
    directory: Path, case: Case, reason: str, outcome: Outcome | None, seed: int
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"{case.index:07d}-{reason}-{case.rpc}"
    (directory / f"{stem}.bin").write_bytes(case.data)
    desc: dict[str, Any] = {
        "index": case.index,
        "seed": seed,
        "rpc": case.rpc,
        "method": f"/{SERVICE}/{case.rpc}",
        "family": case.family,
        "kind": case.kind,
        "base": case.base,
        "reason": reason,
        "mutations": case.notes,
        "status": outcome.code if outcome else None,
        "details": outcome.details if outcome else None,
        "problems": outcome.problems if outcome else [],
        "bytes": len(case.data),
    }
    if len(case.data) < 64_000:
        try:
            msg = REQUEST_TYPES[case.rpc]()
            msg.ParseFromString(case.data)
            desc["request_json"] = json.loads(json_format.MessageToJson(msg))
        except Exception:  # raw bytes that don't decode
            desc["request_json"] = None
    (directory / f"{stem}.json").write_text(json.dumps(desc, indent=2, ensure_ascii=True))


def make_plans(server: Server, corpus: list[Seed], timeout: float) -> None:
    """A plan for each small seed, made by the server, for EvaluatePlan requests."""
    for s in corpus:
        if s.request.ByteSize() > 60_000:
            continue
        req = pb.SolveRequest()
        req.CopyFrom(s.request)
        short(req, 500, pb.BACKEND_HEURISTIC)
        try:
            out = server.calls["Solve"](req.SerializeToString(), timeout=timeout)
        except grpc.RpcError as e:
            print(f"seed {s.name}: Solve failed {e.code().name}", file=sys.stderr)
            continue
        s.plan = pb.SolveResponse.FromString(out).plan


def run(args: argparse.Namespace, command: str) -> int:
    failures = Path(args.failures)
    failures.mkdir(parents=True, exist_ok=True)
    server = Server(args, failures / "server.log")
    server.start()
    limits = Limits(
        max_time_budget_seconds=args.max_time_budget_seconds,
        default_time_budget_seconds=min(5.0, args.max_time_budget_seconds),
    )
    corpus = load_corpus(args.seed)
    make_plans(server, corpus, args.timeout)
    maker = CaseMaker(args.seed, corpus, args.raw_share)
    checker = Checker(server, limits, args.timeout)
    stats = Stats()
    next_index = iter(range(args.requests))
    index_lock = threading.Lock()
    in_flight: dict[int, Case] = {}
    stop = threading.Event()
    start = time.monotonic()

    def record(case: Case, reason: str, outcome: Outcome | None) -> None:
        with stats.lock:
            stats.problems[reason] += 1
            keep = stats.saved[reason] < SAVED_PER_REASON
            stats.saved[reason] += keep
        if keep:
            save_failure(failures, case, reason, outcome, args.seed)

    def worker() -> None:
        while not stop.is_set():
            with index_lock:
                i = next(next_index, None)
            if i is None:
                return
            case = maker.make(i)
            in_flight[threading.get_ident()] = case
            generation = server.generation
            outcome = checker.run(case)
            in_flight.pop(threading.get_ident(), None)
            if outcome.code == "UNAVAILABLE" and not server.alive():
                record(case, "crash", outcome)
                server.restart_if_dead()
            elif outcome.code == "UNAVAILABLE" and server.generation != generation:
                outcome.code = "UNAVAILABLE (restart)"
            with stats.lock:
                stats.by_kind[(case.label, case.rpc)] += 1
                stats.by_code[(outcome.code, case.rpc)] += 1
                stats.seconds[case.rpc].append(outcome.seconds)
                stats.plans_checked += outcome.checked_plan
                stats.infeasible += outcome.infeasible
                stats.done += 1
            if outcome.code in FAILING_CODES or outcome.code == "DEADLINE_EXCEEDED":
                record(case, outcome.code, outcome)
            for reason in {r for r, _ in outcome.problems}:
                record(case, reason, outcome)

    def monitor() -> None:
        last = time.monotonic()
        while not stop.wait(1.0):
            server.sample_rss()
            if not server.alive():
                for case in list(in_flight.values()):
                    record(case, "crash", None)
                server.restart_if_dead()
            if time.monotonic() - last >= args.progress_seconds:
                last = time.monotonic()
                rate = stats.done / (last - start)
                print(
                    f"[{last - start:7.0f}s] {stats.done}/{args.requests} ({rate:.1f}/s) "
                    f"problems {dict(stats.problems)} rss {server.rss_kib[-1] // 1024} MiB",
                    file=sys.stderr,
                    flush=True,
                )

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.threads)]
    mon = threading.Thread(target=monitor, daemon=True)
    mon.start()
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(1.0)
                if args.max_minutes and time.monotonic() - start > args.max_minutes * 60:
                    stop.set()
    except KeyboardInterrupt:
        stop.set()
        for t in threads:
            t.join(args.timeout + 5)
    elapsed = time.monotonic() - start
    stop.set()
    mon.join(5)
    alive = server.alive()
    rss_end = server.sample_rss()
    exit_code = server.stop()
    print(report(args, command, stats, server, elapsed, alive, rss_end, exit_code))
    bad = sum(stats.problems[r] for r in SAVED_REASONS if r != "DEADLINE_EXCEEDED")
    return 1 if bad or not alive or server.crashes else 0


def replay(args: argparse.Namespace) -> int:
    directory = Path(args.replay)
    files = sorted(directory.glob("*.json"))
    if not files:
        print(f"no saved requests in {directory}", file=sys.stderr)
        return 2
    log = Path(args.failures) / "server-replay.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    server = Server(args, log)
    server.start()
    limits = Limits(max_time_budget_seconds=args.max_time_budget_seconds)
    checker = Checker(server, limits, args.timeout)
    still = 0
    print("| file | rpc | recorded | now | problems now |")
    print("| --- | --- | --- | --- | --- |")
    for path in files:
        desc = json.loads(path.read_text())
        data = path.with_suffix(".bin").read_bytes()
        case = Case(desc["index"], desc["rpc"], desc["family"], desc["kind"], desc["base"], data)
        outcome = checker.run(case)
        died = not server.alive()
        problems = sorted({r for r, _ in outcome.problems})
        failing = died or outcome.code in FAILING_CODES or bool(set(problems) & set(SAVED_REASONS))
        still += failing
        now = "CRASH" if died else outcome.code
        print(
            f"| {path.stem} | {case.rpc} | {desc['reason']} ({desc['status']}) | {now} | "
            f"{', '.join(problems) or '-'} |"
        )
        if died:
            server.restart_if_dead()
    server.stop()
    print(f"\n{still} of {len(files)} saved requests still fail.")
    return 1 if still else 0
