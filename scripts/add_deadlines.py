"""Give a trace's jobs deadlines with slack: ``deadline_s = slack x duration_s`` (measured from
submission), for a scenario whose jobs may wait for cleaner electricity (docs/carbon.md).

    python scripts/add_deadlines.py instances/sim/philly-a.csv instances/sim/carbon-a.csv \\
        --jobs 300 --slack 2
"""

from __future__ import annotations

import argparse
import csv
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", help="input trace CSV (docs/simulation.md)")
    p.add_argument("out", help="output trace CSV")
    p.add_argument("--jobs", type=int, default=0, help="keep the first N jobs (0: all)")
    p.add_argument("--slack", type=float, default=2.0, help="deadline over duration (> 1)")
    args = p.parse_args(argv)
    if not args.slack > 1:
        print("add_deadlines: --slack must be > 1", file=sys.stderr)
        return 2
    with open(args.trace, newline="") as f:
        rows = list(csv.DictReader(f))
    if args.jobs:
        rows = rows[: args.jobs]
    if not rows or "duration_s" not in rows[0]:
        print(f"add_deadlines: {args.trace}: no rows with a duration_s column", file=sys.stderr)
        return 2
    fields = list(rows[0])
    if "deadline_s" not in fields:
        fields.append("deadline_s")
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r | {"deadline_s": f"{args.slack * float(r['duration_s']):.0f}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
