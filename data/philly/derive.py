"""Derive the small Philly extracts that the instance generator samples from.

Usage: python data/philly/derive.py PATH/TO/philly_jobs.csv [OUT_DIR]

Reads the 82,248-job Philly trace as prepared by petuum/adaptdl (columns timestamp, duration,
num_gpus, gpu_time, cluster) and writes, next to this script by default:

- num_gpus.csv: num_gpus, jobs, job_seconds (how many jobs requested that many GPUs, and the
  sum of their durations: the weight of that count in a snapshot of the jobs present at once);
- durations.csv: num_gpus, quantile, duration_s (the empirical duration quantiles at
  0, 0.01, ..., 1 of the jobs of each GPU count, linear interpolation between order statistics);
- tenants.csv: cluster, jobs (jobs per virtual cluster).
"""

from __future__ import annotations

import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

QUANTILES = np.linspace(0.0, 1.0, 101)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    src = Path(argv[1])
    out = Path(argv[2]) if len(argv) == 3 else Path(__file__).resolve().parent
    gpus: Counter[int] = Counter()
    seconds: Counter[int] = Counter()
    tenants: Counter[str] = Counter()
    durations: dict[int, list[float]] = defaultdict(list)
    with src.open(newline="") as f:
        for row in csv.DictReader(f):
            n = round(float(row["num_gpus"]))
            gpus[n] += 1
            seconds[n] += float(row["duration"])
            tenants[row["cluster"]] += 1
            durations[n].append(float(row["duration"]))
    with (out / "num_gpus.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["num_gpus", "jobs", "job_seconds"])
        for n in sorted(gpus):
            w.writerow([n, gpus[n], f"{seconds[n]:.0f}"])
    with (out / "durations.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["num_gpus", "quantile", "duration_s"])
        for n in sorted(durations):
            values = np.quantile(np.asarray(durations[n]), QUANTILES)
            for q, v in zip(QUANTILES, values, strict=True):
                w.writerow([n, f"{q:.2f}", f"{v:.1f}"])
    with (out / "tenants.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["cluster", "jobs"])
        for name, count in sorted(tenants.items(), key=lambda kv: (-kv[1], kv[0])):
            w.writerow([name, count])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
