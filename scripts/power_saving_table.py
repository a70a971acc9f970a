"""The node power-saving table of docs/evaluation.md: ``dsfro simulate --compare`` outputs of one
scenario, some with ``--power-saving off`` and some with ``on`` (any seeds), read back and put
at one equal horizon per seed (the longest run of either rule), one markdown row per policy and
rule with the means over the seeds.

    .venv/bin/python scripts/power_saving_table.py --off OFF_DIR... --on ON_DIR...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections import defaultdict
from pathlib import Path

from solver.simulate.metrics import Summary, equal_horizon

COLUMNS = (
    "policy",
    "rule",
    "seeds",
    "energy at equal horizon (kWh)",
    "energy to own makespan (kWh)",
    "mean JCT (h)",
    "makespan (h)",
    "suspends",
    "resumes",
    "node-h suspended",
    "GPU-h waiting for resumes",
    "GPU time restarting",
    "unfinished",
)
FIELDS = (
    ("energy_horizon_kwh", 1.0, ".0f"),
    ("energy_kwh", 1.0, ".0f"),
    ("jct_mean_s", 3600.0, ".3f"),
    ("makespan_s", 3600.0, ".2f"),
    ("suspends", 1.0, ".1f"),
    ("resumes", 1.0, ".1f"),
    ("node_hours_suspended", 1.0, ".0f"),
    ("resume_gpu_hours", 1.0, ".1f"),
    ("restart_gpu_share", 1.0, ".2%"),
    ("jobs_unfinished", 1.0, ".1f"),
)
"""Each column after the seeds: the ``Summary`` field, its divisor, its format."""


def read(folder: Path, rule: str) -> list[Summary]:
    """The runs' summaries of one folder, each policy named ``policy|rule``."""
    out = []
    for path in sorted(folder.glob("*-summary.json")):
        s = Summary.from_dict(json.loads(path.read_text()))
        out.append(dataclasses.replace(s, policy=f"{s.policy}|{rule}"))
    if not out:
        raise SystemExit(f"no *-summary.json in {folder}")
    return out


def mean_cell(runs: list[Summary], key: str, unit: float, spec: str) -> str:
    """The mean over the runs where the field is defined, "-" where none is."""
    values = [v / unit for s in runs if (v := getattr(s, key)) is not None]
    return format(sum(values) / len(values), spec) if values else "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--off", type=Path, nargs="+", required=True, help="--power-saving off outputs")
    p.add_argument("--on", type=Path, nargs="+", required=True, help="--power-saving on outputs")
    args = p.parse_args()
    runs = [s for rule in ("off", "on") for d in getattr(args, rule) for s in read(d, rule)]
    summaries = equal_horizon(runs)
    groups: dict[str, list[Summary]] = defaultdict(list)
    for s in summaries:
        groups[s.policy].append(s)
    horizons = sorted({(s.seed, s.horizon_s) for s in summaries})
    print("equal horizon: " + ", ".join(f"seed {k} {h / 3600:.2f} h" for k, h in horizons))
    print("means over seeds\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS))
    for name, runs in sorted(groups.items()):
        policy, rule = name.split("|")
        seeds = ",".join(str(s.seed) for s in sorted(runs, key=lambda s: s.seed))
        cells = [mean_cell(runs, key, unit, spec) for key, unit, spec in FIELDS]
        print("| " + " | ".join([policy, rule, seeds, *cells]) + " |")


if __name__ == "__main__":
    main()
