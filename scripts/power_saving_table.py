"""The node power-saving table of docs/evaluation.md: two ``dsfro simulate --compare`` outputs of
one scenario and seed, one with ``--power-saving off`` and one with ``on``, read back and put
at one equal horizon (the longest run of either rule), one markdown row per policy and rule.

    .venv/bin/python scripts/power_saving_table.py OFF_DIR ON_DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from solver.simulate.metrics import Summary, equal_horizon

COLUMNS = (
    "policy",
    "rule",
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


def read(folder: Path, rule: str) -> list[Summary]:
    """The runs' summaries of one folder, each policy named ``policy|rule``."""
    out = []
    for path in sorted(folder.glob("*-summary.json")):
        s = Summary.from_dict(json.loads(path.read_text()))
        out.append(dataclasses.replace(s, policy=f"{s.policy}|{rule}"))
    if not out:
        raise SystemExit(f"no *-summary.json in {folder}")
    return out


def cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def hours(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 3600


def row(s: Summary) -> list[str]:
    policy, rule = s.policy.split("|")
    return [
        policy,
        rule,
        cell(s.energy_horizon_kwh, ".0f"),
        cell(s.energy_kwh, ".0f"),
        cell(hours(s.jct_mean_s), ".3f"),
        cell(hours(s.makespan_s), ".2f"),
        cell(s.suspends, "d"),
        cell(s.resumes, "d"),
        cell(s.node_hours_suspended, ".0f"),
        cell(s.resume_gpu_hours, ".1f"),
        cell(s.restart_gpu_share, ".2%"),
        str(s.jobs_unfinished),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("off", type=Path, help="the --power-saving off output folder")
    p.add_argument("on", type=Path, help="the --power-saving on output folder")
    args = p.parse_args()
    summaries = equal_horizon([*read(args.off, "off"), *read(args.on, "on")])
    print(f"equal horizon: {summaries[0].horizon_s / 3600:.2f} h\n")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS))
    for s in sorted(summaries, key=lambda s: s.policy):
        print("| " + " | ".join(row(s)) + " |")


if __name__ == "__main__":
    main()
