"""The energy-basis table of docs/evaluation.md: a ``dsfro simulate --compare`` output of one
scenario (run with ``[weights] energy_basis = "waste"``), each seed put at the equal horizon of
an earlier comparison (the draw basis' ``*-comparison.csv``, per seed), so that its energy can
be read beside that comparison's; one markdown row per policy, means over the seeds.

    .venv/bin/python scripts/energy_basis_table.py OUT_DIR SCENARIO DRAW_COMPARISON.csv
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

from solver.simulate.metrics import Summary

COLUMNS = (
    "policy",
    "mean JCT (h)",
    "energy, equal horizon (kWh)",
    "jobs' own energy (kWh)",
    "energy / gavel",
    "JCT / gavel",
    "JCT / sia",
    "suspends / resumes",
    "unfinished",
)


def horizons(comparison: Path) -> dict[int, float]:
    """Each seed's equal horizon (s) in a comparison CSV: the longest among its rows."""
    out: dict[int, float] = {}
    with comparison.open() as f:
        for row in csv.DictReader(f):
            if row["seed"].isdigit():
                seed = int(row["seed"])
                out[seed] = max(out.get(seed, 0.0), float(row["horizon_s"]))
    return out


def order(policy: str) -> tuple[bool, int, str]:
    """Baselines by name, then DSFRO by energy weight (dsfro, dsfro-e1, dsfro-e10, ...)."""
    dsfro = policy.startswith("dsfro")
    return (dsfro, len(policy) if dsfro else 0, policy)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the dsfro simulate --compare output folder")
    p.add_argument("scenario")
    p.add_argument("comparison", type=Path, help="the comparison whose horizons to use")
    args = p.parse_args()
    at = horizons(args.comparison)
    runs: dict[str, list[Summary]] = defaultdict(list)
    for path in sorted(args.out.glob(f"{args.scenario}-*-summary.json")):
        s = Summary.from_dict(json.loads(path.read_text()))
        runs[s.policy].append(s.at_horizon(at[s.seed]))
    if not runs:
        raise SystemExit(f"no {args.scenario}-*-summary.json in {args.out}")
    jct = {k: mean([(s.jct_mean_s or 0.0) / 3600 for s in v]) for k, v in runs.items()}
    energy = {k: mean([s.energy_horizon_kwh for s in v]) for k, v in runs.items()}
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS))
    for name, v in sorted(runs.items(), key=lambda kv: order(kv[0])):
        cells = [
            name,
            f"{jct[name]:.2f}",
            f"{energy[name]:,.0f}",
            f"{mean([s.jobs_energy_kwh for s in v]):,.0f}",
            f"{energy[name] / energy['gavel']:.3f}",
            f"{jct[name] / jct['gavel']:.3f}",
            f"{jct[name] / jct['sia']:.3f}",
            f"{mean([s.suspends or 0 for s in v]):.0f} / {mean([s.resumes or 0 for s in v]):.0f}",
            f"{mean([float(s.jobs_unfinished) for s in v]):.0f}",
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
