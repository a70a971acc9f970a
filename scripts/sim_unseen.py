"""Clusters and traces no test was written for, through ``dsfro simulate`` as a user runs it.

Each case: a cluster from the instance generator (a random node mix, size, budgets and MIG
share), written as an instance file (the simulator takes its cluster), sometimes with tenant
queues (one per tenant, in one cohort or none, random nominal, borrowing and lending limits); a
random trace (15-60 jobs over four hours, the Philly class or an architecture, 1-16 GPUs,
deadlines, weights, flags, slice and evaluation jobs); random run flags (node power saving, a
node base power, the bundled grid, feedback, no restart cost, a power headroom, the round
interval, a running service with ``--server``, energy weights); the DSFRO policy and 2-4 others,
one seed, ten simulated hours. The command runs in a process of its own.

A row the simulator refuses (exit 2 naming ``trace.csv:ROW``: an architecture that cannot run
at that count) is dropped and the command run again, twice at most. A case goes wrong when the
command prints a traceback, exits other than 0, or its summaries disagree with the trace (jobs
counted, finished plus unfinished) or report an invalid MIG layout.

    .venv/bin/python scripts/sim_unseen.py --seed 1 --cases 12 [--server ADDR]

The table goes, with the command and date, into docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from solver.offline.generate import generate, spec_from_args, to_json

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "data" / "grid" / "gb-2020-hourly.csv"
POLICIES = (
    "fifo", "las", "gavel", "gavel-maxmin", "pop-maxmin", "sia", "zeus", "kueue", "themis",
    "static-mig", "dsfro-no-dvfs", "dsfro-fixed-shape", "dsfro-heuristic", "dsfro-whole",
    "dsfro-carbon-blind", "dsfro-floor", "dsfro-maxmin", "dsfro-prop", "dsfro-drf", "dsfro-ftf",
    "dsfro-ftf-tenant",
)  # fmt: skip
ARCHITECTURES = ("gpt3-1.3b", "gpt3-2.7b", "bert-large", "llama2-7b", "gpt2-xl")
HEADER = (
    "job_id,submit_time_s,tenant,workload,num_gpus,duration_s,deadline_s,weight,preemptible,"
    "slices,evaluation"
)


def cluster(rng: random.Random, folder: Path) -> tuple[str, dict[str, int], bool]:
    """Write ``cluster.json``; its mix, GPUs per type, and whether it has MIG types."""
    while True:
        mix = rng.choice(("hybrid", "modern", "pai", "hetero-power"))
        args = ["--mix", mix, "--nodes", str(rng.choice((4, 6, 8, 16, 24))), "--jobs", "0"]
        args += ["--seed", str(rng.randrange(1000))]
        if rng.random() < 0.4:
            args += ["--power-budget-fraction", str(rng.choice((0.5, 0.7, 0.9)))]
        try:
            request = json.loads(to_json(generate(spec_from_args(args))))
        except ValueError:
            continue
        break
    snapshot = request["cluster"]
    gpus: dict[str, int] = {}
    for node in snapshot["nodes"]:
        gpus[node["gpu_type"]] = gpus.get(node["gpu_type"], 0) + node["gpu_count"]
    if rng.random() < 0.35:
        snapshot["queues"] = queues(rng, gpus, [f"t{i}" for i in range(4)])
    (folder / "cluster.json").write_text(json.dumps(request))
    return mix, gpus, mix in ("hybrid", "modern")


def queues(rng: random.Random, gpus: dict[str, int], tenants: list[str]) -> list[object]:
    cohort = rng.random() < 0.6
    out: list[object] = []
    for name in tenants:
        quotas = []
        for gpu_type, total in gpus.items():
            quota: dict[str, object] = {"resource": gpu_type}
            quota["nominal"] = nominal = max(1, int(total * rng.uniform(0.2, 0.7)))
            if cohort and rng.random() < 0.5:
                quota["borrowing_limit"] = rng.randint(0, total)
            if cohort and rng.random() < 0.3:
                quota["lending_limit"] = rng.randint(0, nominal)
            quotas.append(quota)
        queue: dict[str, object] = {"name": name, "weight": rng.choice((1, 2, 3)), "quotas": quotas}
        if cohort:
            queue["cohort"] = "c"
        out.append(queue)
    return out


def trace(rng: random.Random, folder: Path, gpus: dict[str, int], mig: bool) -> int:
    """Write ``trace.csv``; the number of jobs."""
    rows = [HEADER]
    largest = max(gpus.values())
    for j in range(rng.randint(15, 60)):
        workload = "philly" if rng.random() < 0.7 else rng.choice(ARCHITECTURES)
        count = min(rng.choice((1, 1, 1, 2, 4, 8, 16)), largest)
        if workload != "philly":  # architectures need a power of two
            count = 1 << (count.bit_length() - 1)
        small = mig and count == 1 and workload == "philly" and rng.random() < 0.6
        cells = [
            f"j{j}", f"{rng.uniform(0, 4 * 3600):.1f}", f"t{rng.randrange(4)}", workload,
            str(count), f"{rng.uniform(120, 5 * 3600):.0f}",
            f"{rng.uniform(3600, 20 * 3600):.0f}" if rng.random() < 0.3 else "",
            str(rng.choice((1, 2, 0.5))) if rng.random() < 0.5 else "",
            rng.choice(("true", "false")) if rng.random() < 0.2 else "",
            "true" if small else "", "true" if rng.random() < 0.1 else "",
        ]  # fmt: skip
        rows.append(",".join(cells))
    (folder / "trace.csv").write_text("\n".join(rows) + "\n")
    return len(rows) - 1


def flags(rng: random.Random, server: str | None) -> list[str]:
    pick = rng.random
    out = ["--seeds", str(rng.randint(1, 9)), "--budget", rng.choice(("0.2s", "0.5s"))]
    if pick() < 0.4:
        out += ["--power-saving", "on", "--suspend-after", rng.choice(("600s", "1800s"))]
        out += ["--node-base-watts", str(rng.choice((100, 300)))] if pick() < 0.5 else []
        out += ["--spare-nodes", "1"] if pick() < 0.3 else []
    out += ["--grid", str(GRID), "--grid-start", "2020-03-02 00:00:00"] if pick() < 0.3 else []
    out += ["--feedback"] if pick() < 0.2 else []
    out += ["--no-restart-cost"] if pick() < 0.2 else []
    out += ["--power-headroom", str(rng.choice((0.0, 0.05, 0.15)))] if pick() < 0.2 else []
    out += ["--interval", rng.choice(("60s", "600s"))] if pick() < 0.2 else []
    out += ["--energy-weights", "1,10"] if pick() < 0.2 else []
    out += ["--server", server] if server is not None and pick() < 0.5 else []
    return out


def run(command: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    """Run, dropping the trace rows the simulator refuses (twice at most)."""
    for _ in range(3):
        done = subprocess.run(command, capture_output=True, text=True, cwd=folder, check=False)
        refused = {int(row) for row in re.findall(r"trace\.csv:(\d+):", done.stderr)}
        if done.returncode != 2 or not refused or "Traceback" in done.stderr:
            return done
        lines = (folder / "trace.csv").read_text().splitlines()
        kept = [line for row, line in enumerate(lines, 1) if row not in refused]
        (folder / "trace.csv").write_text("\n".join(kept) + "\n")
    return done


def wrong(done: subprocess.CompletedProcess[str], folder: Path) -> str | None:
    """What went wrong in a finished command, if anything."""
    if "Traceback" in done.stderr + done.stdout:
        return "traceback"
    if done.returncode != 0:
        return f"exit {done.returncode}"
    jobs = len((folder / "trace.csv").read_text().splitlines()) - 1
    summaries = sorted((folder / "out").glob("*-summary.json"))
    if not summaries:
        return "no summaries"
    for path in summaries:
        s = json.loads(path.read_text())
        if s["jobs_total"] != jobs or s["jobs_finished"] + s["jobs_unfinished"] != jobs:
            return f"{path.name}: jobs {s['jobs_total']} of {jobs}"
        if s.get("invalid_layouts"):
            return f"{path.name}: {s['invalid_layouts']} invalid layouts"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=12)
    ap.add_argument("--server", metavar="ADDR", help="a running service, for --server runs")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix=f"sim-unseen-{args.seed}-"))
    rows, bad = [], 0
    for case in range(args.cases):
        folder = root / f"case{case}"
        folder.mkdir()
        mix, gpus, mig = cluster(rng, folder)
        jobs = trace(rng, folder, gpus, mig)
        policies = ["dsfro", *rng.sample(POLICIES, rng.randint(2, 4))]
        command = [sys.executable, "-m", "solver.cli.main", "simulate", "--compare"]
        command += ["--trace", "trace.csv", "--cluster", "cluster.json", "--out", "out"]
        command += ["--policies", ",".join(policies), "--workers", "1", "--max-time", "10h"]
        extra = flags(rng, args.server)
        command += extra
        start = time.monotonic()
        done = run(command, folder)
        problem = wrong(done, folder)
        bad += problem is not None
        shown = " ".join(extra).replace(f"{ROOT}/", "")
        rows.append(
            f"| {case} | {mix}, {sum(gpus.values())} GPUs | {jobs} | {', '.join(policies)} | "
            f"{shown} | {time.monotonic() - start:.0f} | {problem or 'ok'} |"
        )
        print(rows[-1], flush=True)
        if problem is not None:
            print(done.stderr[-3000:], file=sys.stderr)
    print(f"\n{args.cases} cases (seed {args.seed}), {bad} wrong; files in {root}\n")
    print("| case | cluster | jobs | policies | flags | wall (s) | outcome |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
