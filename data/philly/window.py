"""Choose and cut the contiguous Philly window that the simulator's scenario (a) replays.

Usage: python data/philly/window.py PATH/TO/philly_jobs.csv [OUT_DIR]

Sorts the 82,247 jobs of the Philly trace (as prepared by petuum/adaptdl: timestamp, duration,
num_gpus, gpu_time, cluster) by submission time, stably by file row. Scenario (a) replays
SCENARIO_JOBS consecutive jobs; the window chosen is, among those starting at a multiple of STEP,
the one whose requests are all powers of two of at most MAX_GPUS GPUs and whose jobs all end
within MAX_END_DAYS of its first submission if all started at once, with the most GPU time per
second of that span (the highest offered load). The BUNDLE jobs from its first one are written
unchanged, in that order, to ``trace_window.csv`` next to this script (or in OUT_DIR).
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

SCENARIO_JOBS = 1_100
STEP = 25
MAX_GPUS = 64
"""Half of one GPU type of the 512-GPU scenario cluster (128 GPUs of each of four types)."""
MAX_END_DAYS = 5.0
"""Keeps one simulation of the window within minutes."""
BUNDLE = 2_500
COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")


def choose(start: list[float], duration: list[float], gpus: list[int]) -> tuple[int, float]:
    """(first position, GPU-seconds per second of span) of the window described above."""
    best = (-1, 0.0)
    for s in range(0, len(start) - SCENARIO_JOBS + 1, STEP):
        w = range(s, s + SCENARIO_JOBS)
        if any(gpus[i] > MAX_GPUS or gpus[i] & (gpus[i] - 1) for i in w):
            continue
        end = max(start[i] + duration[i] for i in w) - start[s]
        if end > MAX_END_DAYS * 86_400:
            continue
        load = sum(duration[i] * gpus[i] for i in w) / end
        if load > best[1]:
            best = (s, load)
    return best


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    src = Path(argv[1])
    out = Path(argv[2]) if len(argv) == 3 else Path(__file__).resolve().parent
    with src.open(newline="") as f:
        rows = list(csv.DictReader(f))
    rows = [rows[i] for i in sorted(range(len(rows)), key=lambda i: (rows[i]["timestamp"], i))]
    start = [datetime.fromisoformat(r["timestamp"]).timestamp() for r in rows]
    duration = [float(r["duration"]) for r in rows]
    gpus = [round(float(r["num_gpus"])) for r in rows]
    first, load = choose(start, duration, gpus)
    window = rows[first : first + BUNDLE]
    with (out / "trace_window.csv").open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        w.writerows([r[c] for c in COLUMNS] for r in window)
    scenario = window[:SCENARIO_JOBS]
    print(
        f"positions {first}..{first + BUNDLE - 1} of {len(rows)} written; the first "
        f"{SCENARIO_JOBS}: {scenario[0]['timestamp']} .. {scenario[-1]['timestamp']}, "
        f"{load:.1f} GPUs busy on average over their span, GPUs per job "
        f"{dict(sorted(Counter(gpus[first : first + SCENARIO_JOBS]).items()))}; all "
        f"{BUNDLE}: GPUs per job {dict(sorted(Counter(gpus[first : first + BUNDLE]).items()))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
