"""What carbon-aware deferral adds to a round (solver.core.carbon.defer_for_carbon), beside the
round's own configuration enumeration, on generated families.

Each family is `dsfro generate --family NAME --seed 1`; every waiting job gets a max_deferral
(so that all of them are candidates), and the grid is hourly, 400 gCO2/kWh but for 150 from
06:00 to 12:00, over a short forecast (48 h, deferral 12 h) and the longest valid one
(MAX_GRID_POINTS hours, deferral a week). Medians of --repeat runs, wall clock, in one process
on a shared machine: compare the two columns of one row, not rows across runs. The table goes
to docs/benchmarks.md:

    .venv/bin/python scripts/bench_carbon.py --families medium large
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from functools import partial

from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.core.carbon import defer_for_carbon
from solver.core.settings import SolverSettings
from solver.domain import Problem
from solver.grid import GridForecast, GridPoint
from solver.offline.generate import generate, spec_from_args
from solver.wire import MAX_GRID_POINTS

HOUR = 3600.0
CASES = (
    ("48 h, defer <= 12 h", 48, 12 * HOUR),
    ("month, defer <= 1 week", MAX_GRID_POINTS, 168 * HOUR),
)


def with_grid(p: Problem, hours: int, max_deferral: float) -> Problem:
    """`p` with an hourly grid of `hours` periods and every waiting job deferrable."""
    clean = tuple(150.0 if 6 <= k % 24 < 12 else 400.0 for k in range(hours))
    grid = GridForecast(tuple(GridPoint(k * HOUR, c) for k, c in enumerate(clean)))
    jobs = tuple(
        dataclasses.replace(j, max_deferral_seconds=max_deferral) if j.current is None else j
        for j in p.jobs
    )
    return dataclasses.replace(p, cluster=dataclasses.replace(p.cluster, grid=grid), jobs=jobs)


def median_seconds(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", nargs="+", default=["medium", "large"])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from solver.perfmodel.configs import build_config_set

    print("| family | jobs (waiting) | forecast | deferred | deferral (s) | enumeration (s) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family in args.families:
        request = generate(spec_from_args(["--family", family, "--seed", "1"]))
        base = problem_from_proto(request, Limits(max_jobs=100_000, max_nodes=100_000))
        waiting = sum(1 for j in base.jobs if j.current is None)
        enumeration = median_seconds(partial(build_config_set, base), args.repeat)
        for label, hours, deferral in CASES:
            p = with_grid(base, hours, deferral)
            held = len(defer_for_carbon(p, SolverSettings()).held)
            seconds = median_seconds(partial(defer_for_carbon, p, SolverSettings()), args.repeat)
            print(
                f"| {family} | {len(base.jobs)} ({waiting}) | {label} | {held} | "
                f"{seconds:.3f} | {enumeration:.3f} |"
            )


if __name__ == "__main__":
    main()
