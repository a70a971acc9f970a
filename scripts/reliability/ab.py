"""The A/B scenario: two servers under the same load, in alternating blocks.

A shared machine's pace drifts over minutes: two load runs one after the other compared a code
with the hour (on 2026-12-06 one code's medium row went from 0 to 78 FALLBACK answers of about
250 between two of its runs a quarter of an hour apart). Here both servers run side by side, idle
but for the block sent to them, and the blocks alternate (A B, then B A, ...), so drift falls on
both alike. Side A is this checkout; side B another checkout (a worktree of the code before)
or this one with other settings (``--b-env DSFRO_TUNING_...=...``).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from scripts.reliability.load import ClientJob, run_clients
from scripts.reliability.rpc import load_snapshot, with_options
from scripts.reliability.server import REPO, Server
from scripts.reliability.stats import ms, pct, table

TERMINATIONS = ("OPTIMAL", "FEASIBLE", "FALLBACK")
AB_COLUMNS = ("round", "side", "answers", *TERMINATIONS, "other", "p50 / p99 (ms)", "refused")


@dataclass(frozen=True)
class Block:
    """One side's answers in one block of the load."""

    round: int
    side: str
    answers: int
    terminations: Counter[str]
    seconds: list[float]
    refused: int

    def cells(self) -> list[object]:
        other = self.answers - sum(self.terminations[t] for t in TERMINATIONS)
        return [
            self.round,
            self.side,
            self.answers,
            *(self.terminations[t] for t in TERMINATIONS),
            other,
            f"{ms(pct(self.seconds, 50))} / {ms(pct(self.seconds, 99))}",
            self.refused,
        ]


def parse_env(pairs: list[str], flag: str) -> dict[str, str]:
    """KEY=VALUE pairs, or SystemExit naming the flag and the bad pair."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"{flag}: expected KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def _shown(env: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items())


def run_block(server: Server, payload: bytes, args: argparse.Namespace, r: int, side: str) -> Block:
    job = ClientJob(
        server.address, payload, args.clients, time.monotonic() + 1.0, args.duration, 5.0, True
    )
    attempts = run_clients(job, args.client_processes).attempts
    answered = [a for a in attempts if a.code == "OK"]
    return Block(
        r,
        side,
        len(answered),
        Counter(a.termination for a in answered if a.termination is not None),
        [a.seconds for a in answered],
        sum(a.code == "RESOURCE_EXHAUSTED" for a in attempts),
    )


def summary(blocks: list[Block], sides: tuple[str, str]) -> str:
    """Means per side, and in how many rounds A answered more (and more OPTIMAL) than B."""
    by = {s: [b for b in blocks if b.side == s] for s in sides}
    rows = []
    for s in sides:
        bs = by[s]
        rows.append(
            [s, f"{mean(b.answers for b in bs):.1f}"]
            + [f"{mean(b.terminations[t] for b in bs):.1f}" for t in TERMINATIONS]
        )
    pairs = list(zip(by[sides[0]], by[sides[1]], strict=True))
    more = sum(x.answers > y.answers for x, y in pairs)
    proven = sum(x.terminations["OPTIMAL"] > y.terminations["OPTIMAL"] for x, y in pairs)
    fewer = sum(x.terminations["FALLBACK"] < y.terminations["FALLBACK"] for x, y in pairs)
    return (
        table(["side", "answers (mean)", *(f"{t} (mean)" for t in TERMINATIONS)], rows)
        + f"\n\nA ahead of B in answers in {more} of {len(pairs)} rounds, in OPTIMAL answers in "
        f"{proven}, with fewer FALLBACK answers in {fewer}."
    )


def scenario_ab(args: argparse.Namespace, cache: Path, log_dir: Path) -> None:
    other = Path(args.against).resolve() if args.against else REPO
    if not (other / "server.py").is_file():
        raise SystemExit(f"--against: no server.py in {other}")
    a_env, b_env = parse_env(args.a_env, "--a-env"), parse_env(args.b_env, "--b-env")
    sides = ("A", "B")
    for family in [f for f in args.families.split(",") if f]:
        payload = with_options(load_snapshot(family, args.seed, cache), args.ab_budget)
        data = payload.SerializeToString()
        blocks: list[Block] = []
        with (
            Server([], log_dir, env=a_env) as a,
            Server([], log_dir, checkout=other, env=b_env) as b,
        ):
            servers = {"A": a, "B": b}
            for r in range(1, args.rounds + 1):
                order = sides if r % 2 else sides[::-1]
                for side in order:
                    blocks.append(run_block(servers[side], data, args, r, side))
        blocks.sort(key=lambda x: (x.round, x.side))
        print(
            f"\n### A/B: {family} at a {args.ab_budget:g} s budget, {args.clients} clients, "
            f"{args.rounds} rounds of {args.duration:g} s a side\n\n"
            f"A: this checkout {_shown(a_env)}; B: {other} {_shown(b_env)}\n"
        )
        print(table(AB_COLUMNS, [blk.cells() for blk in blocks]))
        print()
        print(summary(blocks, sides))


def add_ab_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", default="", help="ab: side B's checkout (default: this one)")
    parser.add_argument(
        "--a-env", action="append", default=[], metavar="KEY=VALUE", help="ab: side A's env"
    )
    parser.add_argument(
        "--b-env", action="append", default=[], metavar="KEY=VALUE", help="ab: side B's env"
    )
    parser.add_argument("--rounds", type=int, default=5, help="ab: blocks per side")
    parser.add_argument("--ab-budget", type=float, default=1.0, help="ab: time budget (s)")
