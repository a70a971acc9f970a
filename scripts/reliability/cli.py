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
* ab: side A (this checkout) and side B (--against another checkout, or --b-env settings)
  under the load above, in alternating blocks of --duration seconds (``scripts.reliability.ab``).
* memory: --memory-requests (10,000) mixed calls against one server, its RSS sampled every
  500 requests.

    .venv/bin/python -m scripts.reliability --scenario all
    .venv/bin/python -m scripts.reliability --scenario load --duration 15
    .venv/bin/python -m scripts.reliability --scenario fault --kills 1
    .venv/bin/python -m scripts.reliability --scenario memory --memory-requests 1000
    .venv/bin/python -m scripts.reliability --scenario ab --against ../before --families medium \
        --duration 30 --rounds 5

Clients send pre-serialized request bytes through raw (bytes in, bytes out) unary-unary
callables; a response is decoded only after its time has been taken.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import solver
from scripts.reliability.ab import add_ab_arguments, scenario_ab
from scripts.reliability.fault import scenario_fault
from scripts.reliability.load import scenario_load
from scripts.reliability.memory import scenario_memory
from scripts.reliability.server import REPO


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
    parser = argparse.ArgumentParser(
        prog="python -m scripts.reliability", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument(
        "--scenario", choices=["load", "fault", "memory", "ab", "all"], default="all"
    )
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
    add_ab_arguments(parser)
    args = parser.parse_args(argv)
    scenarios: dict[str, Callable[[argparse.Namespace, Path, Path], None]] = {
        "load": scenario_load,
        "fault": scenario_fault,
        "memory": scenario_memory,
        "ab": scenario_ab,
    }
    logs = Path(tempfile.mkdtemp(prefix="dsfro-reliability-"))
    print(
        f"dsfro {solver.__version__} ({source_state()}); this machine: {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start; "
        f"server logs in {logs}"
    )
    for name, run in scenarios.items():
        if args.scenario == name or (args.scenario == "all" and name != "ab"):
            run(args, args.cache_dir, logs)
            print(f"\n(load average after {name}: {os.getloadavg()[0]:.2f})")
            sys.stdout.flush()
