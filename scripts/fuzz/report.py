"""The counts of a run, and its report (Markdown tables)."""

from __future__ import annotations

import argparse
import threading
from collections import Counter

from scripts.fuzz.constants import RPCS
from scripts.fuzz.server import Server


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind: Counter[tuple[str, str]] = Counter()
        self.by_code: Counter[tuple[str, str]] = Counter()
        self.problems: Counter[str] = Counter()
        self.saved: Counter[str] = Counter()
        self.plans_checked = 0
        self.infeasible = 0
        self.done = 0
        self.seconds: dict[str, list[float]] = {r: [] for r in RPCS}


def report(
    args: argparse.Namespace,
    command: str,
    stats: Stats,
    server: Server,
    elapsed: float,
    alive: bool,
    rss_end: int | None,
    exit_code: int | None,
) -> str:
    lines = [f"## Fuzzing the service: {stats.done} requests", "", f"Command: `{command}`", ""]
    lines += [
        f"Seed {args.seed}, {args.threads} client threads, server with "
        f"--max-concurrent-solves {args.max_concurrent_solves} "
        f"--max-time-budget-seconds {args.max_time_budget_seconds}; Solve budgets 10-200 ms "
        f"(mutations may set others, capped by the server). "
        f"{stats.done} of {args.requests} requests in {elapsed:.0f} s: "
        f"**{stats.done / max(elapsed, 1e-9):.1f} requests/s**.",
        "",
        "### Requests by kind and RPC",
        "",
        "| kind | " + " | ".join(RPCS) + " | total |",
        "| --- | " + " | ".join("---:" for _ in RPCS) + " | ---: |",
    ]
    kinds = sorted({k for k, _ in stats.by_kind})
    for k in kinds:
        row = [stats.by_kind[(k, r)] for r in RPCS]
        lines.append(f"| {k} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    totals = [sum(stats.by_kind[(k, r)] for k in kinds) for r in RPCS]
    lines.append("| **total** | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    lines += [
        "",
        "### Answers by status code",
        "",
        "| status | " + " | ".join(RPCS) + " | total |",
        "| --- | " + " | ".join("---:" for _ in RPCS) + " | ---: |",
    ]
    for code in sorted({c for c, _ in stats.by_code}):
        row = [stats.by_code[(code, r)] for r in RPCS]
        lines.append(f"| {code} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    lines += ["", "Median / max seconds per answer: " + ", ".join(
        f"{r} {_median(stats.seconds[r]):.3f} / {max(stats.seconds[r], default=0):.2f}"
        for r in RPCS
    ) + ".", ""]  # fmt: skip
    rss = server.rss_kib
    p = stats.problems
    checks = [
        ("INTERNAL answers", p["INTERNAL"], "0"),
        ("UNKNOWN answers", p["UNKNOWN"], "0"),
        (f"DEADLINE_EXCEEDED (client timeout {args.timeout:g} s)", p["DEADLINE_EXCEEDED"], "0"),
        ("OK Solves whose plan was checked", stats.plans_checked, "-"),
        ("OK Solves TERMINATION_INFEASIBLE", stats.infeasible, "-"),
        ("invalid plans: EvaluatePlan on the server", p["invalid-plan-server"], "0"),
        ("invalid plans: local checker (evaluate_allocations)", p["invalid-plan-local"], "0"),
        ("OK answers with a non-finite number (objective, ...)", p["non-finite"], "0"),
        ("Solve vs EvaluatePlan objective mismatches", p["objective-mismatch"], "0"),
        ("OK answers that are empty / undecodable", p["empty-response"] + p["bad-response"], "0"),
        ("server accepted, local validation refuses", p["local-validation-disagrees"], "0"),
        ("bytes the server accepted but that don't decode", p["accepted-undecodable"], "0"),
        ("errors in the checks themselves", p["check-error"], "0"),
        ("server crashes / restarts", f"{p['crash']} / {len(server.crashes)}", "0 / 0"),
        ("server alive at the end", "yes" if alive else "NO", "yes"),
        (
            "server RSS start / peak / end (MiB)",
            f"{rss[0] // 1024 if rss else '?'} / {max(rss) // 1024 if rss else '?'} / "
            f"{rss_end // 1024 if rss_end else '?'}",
            "-",
        ),
        ("server exit code after SIGTERM", exit_code, "0"),
        ("requests per second", f"{stats.done / max(elapsed, 1e-9):.1f}", "-"),
    ]
    lines += ["### Checks", "", "| check | count | expected |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {value} | {want} |" for name, value, want in checks]
    saved = sum(stats.saved.values())
    lines += ["", f"Failing requests saved to `{args.failures}`: {saved}."]
    return "\n".join(lines)


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2] if xs else 0.0
