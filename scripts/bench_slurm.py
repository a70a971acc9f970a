"""One dsfro-slurm round on a real one-machine Slurm with many fake nodes: how long the
adapter takes beyond the solve, and its share of the round.

Starts a dev cluster (scripts/slurm-dev-cluster.sh) of SLURM_CI_NODES nodes (default 64) of
eight fake h100 and a DSFRO service on loopback, unless given (``--slurm-dir``, ``--server``).
Each repeat submits ``--jobs`` held jobs with DSFRO demands (not timed), then times one full
round: read (sinfo, squeue --json), snapshot, Solve, decide (with a fresh sinfo), apply
(scontrol update per placed job, one release). Prints a markdown table; nothing is asserted
(the machine is shared and noisy). Needs Slurm installed (``scripts/slurm-dev-cluster.sh
install``). Recorded in docs/benchmarks.md with the command that made it:

    SLURM_CI_NODES=64 .venv/bin/python scripts/bench_slurm.py --jobs 200 --budget 5 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from solver.client import Client
from solver.slurm.apply import Applier
from solver.slurm.commands import Result, Slurm, run_subprocess
from solver.slurm.decide import Action
from solver.slurm.loop import Adapter, Report, Settings
from solver.slurm.site import Site
from solver.wire import Termination

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "slurm-dev-cluster.sh"
MODELS = [  # (model, min GPUs, max GPUs): small to large training jobs
    ("bert-large", 1, 2),
    ("gpt2-xl", 1, 4),
    ("gpt3-1.3b", 1, 4),
    ("gpt3-2.7b", 1, 8),
    ("gpt3-6.7b", 2, 8),
    ("llama2-7b", 2, 8),
    ("llama2-13b", 4, 16),
    ("gpt3-13b", 8, 16),
]


@contextmanager
def cluster(nodes: int, given: str | None) -> Iterator[Path]:
    """The cluster at `given`, or a new one of `nodes` nodes, stopped afterwards."""
    if given:
        yield Path(given)
        return
    top = Path(tempfile.mkdtemp(prefix="dsfro-slurm-bench-"))
    top.chmod(0o755)  # munged wants every directory above its socket searchable
    base = top / "cluster"
    env = {**os.environ, "SLURM_CI_NODES": str(nodes), "SLURM_CI_PORT": "46817"}
    subprocess.run(
        [str(SCRIPT), "start", str(base)], env=env, check=True, capture_output=True, timeout=300
    )
    try:
        yield base
    finally:
        subprocess.run(
            [str(SCRIPT), "stop", str(base)], env=env, check=False, capture_output=True, timeout=300
        )
        shutil.rmtree(top, ignore_errors=True)


@contextmanager
def service(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from solver.service.config import ServerConfig
    from solver.service.server import build_server

    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    try:
        yield f"127.0.0.1:{srv.port}"
    finally:
        srv.stop(None).wait(30)


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout


def reset_and_submit(jobs: int, seed: int) -> None:
    """An empty queue, then `jobs` held jobs with demands (not timed)."""
    sh("scancel", "--partition", "gpu")
    for _ in range(300):
        if not sh("squeue", "-h", "-o", "%i").split():
            break
        time.sleep(0.2)
    rng = random.Random(seed)
    for i in range(jobs):
        model, lo, hi = rng.choice(MODELS)
        comment = "dsfro:" + json.dumps(
            {"model": model, "min_gpus": lo, "max_gpus": hi, "weight": rng.choice([1, 1, 2, 4])}
        )
        sh(
            "sbatch",
            "--hold",
            "-o",
            "/dev/null",
            "-J",
            f"bench{i}",
            "--gres=gpu:h100:1",
            f"--comment={comment}",
            "--wrap",
            "sleep 3600",
        )


class Counting:
    """Runs Slurm commands and counts them."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, argv: Sequence[str], timeout: float) -> Result:
        self.count += 1
        return run_subprocess(argv, timeout)


def one_round(address: str, budget: float, workers: int) -> tuple[Report, int]:
    runner = Counting()
    slurm = Slurm(runner, timeout=30)
    with Client(address) as client:
        adapter = Adapter(
            slurm, client, Site(), Settings(budget=budget), Applier(slurm, workers=workers)
        )
        return adapter.round(), runner.count


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=int(os.environ.get("SLURM_CI_NODES", "64")))
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--budget", type=float, default=5.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workers", type=int, default=4, help="the adapter's --apply-workers")
    p.add_argument("--slurm-dir", help="a running dev cluster (default: start one)")
    p.add_argument("--server", help="a running DSFRO service (default: start one here)")
    args = p.parse_args(argv)
    rows = []
    with cluster(args.nodes, args.slurm_dir) as base, service(args.server) as address:
        os.environ["SLURM_CONF"] = str(base / "etc" / "slurm.conf")
        nodes = len(sh("sinfo", "-h", "-N", "-o", "%N").split())
        for r in range(args.repeat):
            reset_and_submit(args.jobs, seed=r)
            report, commands = one_round(address, args.budget, args.workers)
            assert report.outcome == "planned", report.error
            rows.append((report, commands))
        sh("scancel", "--partition", "gpu")
    print(
        f"## dsfro-slurm round: {nodes} nodes x 8 GPUs, {args.jobs} pending jobs, "
        f"budget {args.budget:g} s\n"
    )
    print(
        "| repeat | read (s) | solve (s) | apply (s) | round (s) | adapter = round - solve (s) "
        "| round - budget (s) | adapter share | placed / waiting | Slurm commands | DSFRO |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for i, (rep, commands) in enumerate(rows, 1):
        ph = rep.phases
        placed = sum(d.action is Action.PLACE for d in rep.decisions)
        waiting = sum(d.action is Action.WAIT for d in rep.decisions)
        stats = rep.response.stats if rep.response else None
        term = Termination.Name(stats.termination).removeprefix("TERMINATION_") if stats else "-"
        print(
            f"| {i} | {ph['read']:.3f} | {ph['solve']:.3f} | {ph['apply']:.3f} | "
            f"{ph['total']:.3f} | {ph['adapter']:.3f} | {ph['total'] - args.budget:+.3f} | "
            f"{100 * ph['adapter'] / ph['total']:.1f} % | {placed} / {waiting} | {commands} | "
            f"{term} |"
        )
    adapter = statistics.median(rep.phases["adapter"] for rep, _ in rows)
    total = statistics.median(rep.phases["total"] for rep, _ in rows)
    print(
        f"\nmedian: adapter {adapter:.3f} s of a {total:.3f} s round "
        f"({100 * adapter / total:.1f} %)"
    )


if __name__ == "__main__":
    main()
