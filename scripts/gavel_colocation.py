"""Derive ``data/gavel/colocation.csv`` from Gavel's ``simulation_throughputs.json``: per job
type on one V100, its isolated steps/s, its steps/s when a copy of itself shares the GPU, the
share it keeps, and the fraction of a GPU it can use (docs/simulation.md, "Slices").

    python scripts/gavel_colocation.py ../shared/data/gavel/simulation_throughputs.json \
        data/gavel/colocation.csv
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

GPU = "v100"
"""The newest GPU Gavel measured (packed on one server)."""


def used_fraction(kept: float) -> float | None:
    """The fraction of a GPU a job can use, from the share `kept` of its isolated throughput it
    keeps beside a copy of itself (each copy on about half the GPU): ``min(1, 0.5 / kept)``;
    None where the pair did not run (Gavel records 0: out of memory)."""
    if kept <= 0:
        return None
    return min(1.0, 0.5 / min(kept, 1.0))


def rows(data: dict[str, dict[str, dict[str, object]]]) -> list[list[object]]:
    out: list[list[object]] = []
    for key, entry in data[GPU].items():
        if not key.endswith(", 1)"):
            continue  # one-GPU jobs only
        alone = float(entry["null"])  # type: ignore[arg-type]
        pair = entry.get(key)
        if not isinstance(pair, list):
            continue
        kept = float(pair[0]) / alone
        used = used_fraction(kept)
        name = key[2 : key.rindex("'")]
        out.append(
            [
                name,
                f"{alone:.6g}",
                f"{float(pair[0]):.6g}",
                f"{kept:.4f}",
                "" if used is None else f"{used:.4f}",
            ]
        )
    return sorted(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    with Path(argv[1]).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(
            ["job_type", "alone_steps_per_s", "with_itself_steps_per_s", "kept", "used_fraction"]
        )
        w.writerows(rows(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
