"""The memory scenario: many mixed calls against one server, its RSS sampled."""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import grpc

from scripts.reliability.rpc import (
    CHANNEL_OPTIONS,
    SERVICE,
    code_name,
    load_snapshot,
    solve_once,
    with_options,
)
from scripts.reliability.server import Server, rss_kib
from scripts.reliability.stats import table
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.offline.generate import tiny_instances


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
        _, response, code = solve_once(channel, small.SerializeToString(), 30)
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
