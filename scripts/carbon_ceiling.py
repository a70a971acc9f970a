"""How much carbon deferral can cut, at most, on a simulated run (issue 19; docs/evaluation.md,
"Carbon-aware rounds").

From a carbon-blind run's files (``<prefix>-jobs.csv`` and ``<prefix>-summary.json`` of
``dsfro simulate`` with a grid), each job is moved, as it ran, to the start within its deadline
(every quarter hour from its real start to the deadline less its real run) where the true grid
is cleanest over its run. Capacity is ignored: every job gets the start it wants. Known
run lengths, a perfect forecast and no queueing make this a ceiling, not a policy. The job's
whole draw moves, which overstates it again (its GPUs' idle draw stays where the nodes stay
up). The ceiling is printed as a share of the run's kg CO2 at its horizon. Beside it: shifting
within a day (every start up to 24 h later, deadline ignored), and interrupting (the job runs in
the cleanest quarter hours between its start and its deadline, pauses free: Let's Wait
Awhile's interrupting strategy). Nothing is asserted; the table goes into docs/evaluation.md:

    .venv/bin/python scripts/carbon_ceiling.py --scenario carbon-a \\
        simulation/carbon-a-dsfro-carbon-blind-s1 simulation/carbon-a-dsfro-carbon-blind-s2
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from solver.simulate.grid import HOUR_S, GridSettings
from solver.simulate.scenarios import DEFAULT_SCENARIOS

STEP_S = HOUR_S / 4


def mean_carbon(grid: GridSettings, start: float, end: float) -> float:
    return grid.carbon_g(1.0, start, end) / (end - start) * 3.6e6 if end > start else 0.0


def cleanest(grid: GridSettings, start: float, end: float, run: float) -> float:
    """Mean intensity of the cleanest `run` seconds in quarter hours between start and end."""
    steps = max(int((end - start) / STEP_S), 1)
    values = sorted(
        mean_carbon(grid, start + k * STEP_S, start + (k + 1) * STEP_S) for k in range(steps)
    )
    need = max(round(run / STEP_S), 1)
    return sum(values[:need]) / min(need, len(values))


def ceiling(grid: GridSettings, prefix: str) -> tuple[float, float, float, float]:
    """(the run's kg CO2 at its horizon, kg the jobs could save within their deadlines, within
    a day, and interrupting within their deadlines)."""
    summary = json.loads(Path(f"{prefix}-summary.json").read_text())
    saved = saved_day = saved_pausing = 0.0
    with open(f"{prefix}-jobs.csv", newline="") as f:
        for r in csv.DictReader(f):
            if not r["first_start_s"] or not r["finish_s"]:
                continue
            start, finish = float(r["first_start_s"]), float(r["finish_s"])
            run, kwh = finish - start, float(r["energy_j"]) / 3.6e6
            now = mean_carbon(grid, start, finish)
            latest = float(r["submit_s"]) + float(r["deadline_s"] or 0.0) - run
            starts = [start + k * STEP_S for k in range(int(max(latest - start, 0) / STEP_S) + 1)]
            best = min(mean_carbon(grid, s, s + run) for s in starts)
            day = min(mean_carbon(grid, start + k * STEP_S, finish + k * STEP_S) for k in range(97))
            paused = cleanest(grid, start, max(latest + run, finish), run)
            saved += kwh * (now - best) / 1000
            saved_day += kwh * (now - day) / 1000
            saved_pausing += kwh * max(now - paused, 0.0) / 1000
    return float(summary["carbon_horizon_kg"]), saved, saved_day, saved_pausing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", required=True, choices=sorted(DEFAULT_SCENARIOS))
    ap.add_argument("prefixes", nargs="+", help="run files' prefix (without -jobs.csv)")
    args = ap.parse_args()
    grid = DEFAULT_SCENARIOS[args.scenario](0).settings.grid
    if grid is None:
        ap.error(f"scenario {args.scenario} has no grid")
    print(
        "| run | kg CO2 at its horizon | shifting within deadlines | within a day | interrupting |"
    )
    print("| --- | --- | --- | --- | --- |")
    for prefix in args.prefixes:
        total, within, day, pausing = ceiling(grid, prefix)
        print(
            f"| {Path(prefix).name} | {total:.1f} | {within / total:.1%} | {day / total:.1%} | "
            f"{pausing / total:.1%} |"
        )


if __name__ == "__main__":
    main()
