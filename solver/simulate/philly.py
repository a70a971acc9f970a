"""The Philly converter: a contiguous window of Microsoft's Philly trace as a simulator trace.

Input: the Philly jobs as prepared by petuum/adaptdl (columns ``timestamp, duration, num_gpus,
gpu_time, cluster``; the full file in the shared data folder, or the bundled window
``data/philly/trace_window.csv``). Jobs are sorted by timestamp (ties in file order) and the
``count`` jobs from position ``start`` are kept, none dropped: ``submit_time_s`` is seconds after
the window's first submission, ``tenant`` is ``vc-<virtual cluster>``, ``num_gpus`` and
``duration_s`` are the trace's, ``workload`` is the class ``philly`` (the workload mix draws a
concrete workload), no deadline, weight 1, preemptible. ``job_id`` is ``philly-<position>``,
the position in the sorted file, so a job keeps its id in any window. Whether the jobs fit a
cluster is ``trace.check_trace_against``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from datetime import datetime
from pathlib import Path

import numpy as np

from solver.simulate.core import SimulationError, TraceJob
from solver.simulate.trace import write_trace

PHILLY_CLASS = "philly"
COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
"""Columns the converter reads (``gpu_time`` is num_gpus x duration, not needed)."""


def _rows(path: Path) -> list[tuple[int, datetime, float, int, str]]:
    """(line, submission, duration, GPUs, virtual cluster) of every job, or SimulationError
    listing every bad field as FILE:ROW:COLUMN."""
    problems: list[str] = []
    out = []
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise SimulationError([f"{path}:1:{c}: missing required column" for c in missing])
            line = reader.line_num
            for r in reader:
                line, start = reader.line_num, line + 1
                where = f"{path}:{start}"
                try:
                    ts = datetime.fromisoformat(r["timestamp"])
                except (TypeError, ValueError):
                    problems.append(f"{where}:timestamp: not a date and time: {r['timestamp']!r}")
                    continue
                try:
                    duration = float(r["duration"])
                except (TypeError, ValueError):
                    duration = math.nan
                if not (math.isfinite(duration) and duration > 0):
                    problems.append(f"{where}:duration: must be > 0, got {r['duration']!r}")
                    continue
                try:
                    gpus = float(r["num_gpus"])
                except (TypeError, ValueError):
                    gpus = math.nan
                if not (gpus >= 1 and gpus.is_integer()):
                    problems.append(
                        f"{where}:num_gpus: must be a positive integer, got {r['num_gpus']!r}"
                    )
                    continue
                if not r["cluster"]:
                    problems.append(f"{where}:cluster: must not be empty")
                    continue
                out.append((start, ts, duration, int(gpus), r["cluster"]))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SimulationError([f"{path}: cannot read: {e}"]) from e
    if problems:
        raise SimulationError(problems)
    return out


def philly_trace(
    philly_jobs_csv: str | Path,
    *,
    start: int | None = 0,
    count: int | None = None,
    seed: int = 0,
) -> list[TraceJob]:
    """The jobs at positions ``start`` .. ``start + count - 1`` of the Philly file in submission
    order (module docstring). ``count`` None: to the end. ``start`` None: a start drawn
    uniformly with ``seed`` among those that leave ``count`` jobs (the only use of the seed).
    ``TraceJob.row`` is the job's line in the Philly file."""
    path = Path(philly_jobs_csv)
    rows = sorted(_rows(path), key=lambda r: (r[1], r[0]))
    n = len(rows) if count is None else count
    if n < 1 or n > len(rows):
        raise SimulationError([f"{path}: count {n} not in 1..{len(rows)} (jobs in the file)"])
    if start is None:
        start = int(np.random.default_rng(seed).integers(len(rows) - n + 1))
    if not 0 <= start <= len(rows) - n:
        raise SimulationError(
            [f"{path}: start {start} not in 0..{len(rows) - n} ({len(rows)} jobs, count {n})"]
        )
    window = rows[start : start + n]
    t0 = window[0][1]
    return [
        TraceJob(
            job_id=f"philly-{start + i:05d}",
            submit_time_s=(ts - t0).total_seconds(),
            tenant=f"vc-{vc}",
            workload=PHILLY_CLASS,
            num_gpus=gpus,
            duration_s=duration,
            row=line,
        )
        for i, (line, ts, duration, gpus, vc) in enumerate(window)
    ]


def convert(argv: list[str]) -> int:
    """``convert PHILLY_CSV OUT_CSV [--start N | --random-start [--seed S]] [--count N]``: write a
    window of the Philly trace in the trace format. Exit 0, or 2 with one line per problem on
    stderr and nothing written."""
    parser = argparse.ArgumentParser(
        prog="dsfro simulate convert-philly",
        description="Write a contiguous window of the Philly trace as a simulator trace.",
    )
    parser.add_argument("philly_csv", type=Path, help="Philly jobs CSV (timestamp, duration, ...)")
    parser.add_argument("out", type=Path, help="trace file to write")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--start", type=int, default=0, help="position of the first job (0)")
    where.add_argument("--random-start", action="store_true", help="draw the start with --seed")
    parser.add_argument("--count", type=int, default=None, help="jobs (default: all from start)")
    parser.add_argument("--seed", type=int, default=0, help="seed of --random-start (0)")
    args = parser.parse_args(argv)
    try:
        start = None if args.random_start else args.start
        jobs = philly_trace(args.philly_csv, start=start, count=args.count, seed=args.seed)
        write_trace(jobs, args.out)
    except SimulationError as e:
        print("\n".join(e.problems), file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{args.out}: cannot write: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(convert(sys.argv[1:]))
