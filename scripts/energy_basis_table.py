"""The energy tables of docs/evaluation.md that join runs made apart: ``dsfro simulate
--compare`` outputs of one scenario, one markdown row per policy, means over the seeds, energy at
an equal horizon per seed.

The energy-basis table: a comparison run with ``[weights] energy_basis = "waste"``, each seed at
the equal horizon of an earlier comparison (the draw basis' ``*-comparison.csv``), so that its
energy reads beside that comparison's:

    .venv/bin/python scripts/energy_basis_table.py OUT_DIR SCENARIO DRAW_COMPARISON.csv

Runs of DSFRO under another profile, joined to a comparison with the baselines: ``--also
DIR=LABEL`` adds DIR's runs with LABEL after each policy's name; without a comparison CSV each
seed is at the longest horizon among all the runs joined:

    .venv/bin/python scripts/energy_basis_table.py BASE_OUT philly-a --also C10_OUT=completion10
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from solver.simulate.metrics import Summary, equal_horizon

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


def labelled(text: str) -> tuple[Path, str]:
    folder, sep, label = text.partition("=")
    if not sep or not label:
        raise argparse.ArgumentTypeError(f"expected DIR=LABEL, got {text!r}")
    return Path(folder), label


def load(folder: Path, scenario: str, label: str = "") -> list[Summary]:
    paths = sorted(folder.glob(f"{scenario}-*-summary.json"))
    if not paths:
        raise SystemExit(f"no {scenario}-*-summary.json in {folder}")
    out = [Summary.from_dict(json.loads(path.read_text())) for path in paths]
    return [replace(s, policy=f"{s.policy} ({label})") for s in out] if label else out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the dsfro simulate --compare output folder")
    p.add_argument("scenario")
    p.add_argument(
        "comparison",
        type=Path,
        nargs="?",
        help="the comparison whose horizons to use (default: the longest of the runs joined)",
    )
    p.add_argument(
        "--also", type=labelled, action="append", default=[], metavar="DIR=LABEL",
        help="more runs of the scenario, their policies named 'POLICY (LABEL)'",
    )  # fmt: skip
    args = p.parse_args()
    every = load(args.out, args.scenario)
    for folder, label in args.also:
        every += load(folder, args.scenario, label)
    if args.comparison is None:
        placed = equal_horizon(every)
    else:
        at = horizons(args.comparison)
        placed = [s.at_horizon(at[s.seed]) for s in every]
    runs: dict[str, list[Summary]] = defaultdict(list)
    for s in placed:
        runs[s.policy].append(s)
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
