"""Derive ``gb-2020-hourly.csv`` from ENTSO-E's actual generation per production type for Great
Britain (the half-hourly table published with Wiesner et al., "Let's Wait Awhile", Middleware
2021, as ``data/gb_production.csv``): hourly means of each source's output (MW), weighted by
life-cycle emission factors (gCO2eq/kWh; IPCC SRREN Annex II medians for the sources, the
countries' 2020 production mixes for imports, as in that paper's ``compute_carbon_intensity``).

    python data/grid/derive.py PATH/TO/gb_production.csv > data/grid/gb-2020-hourly.csv
"""

from __future__ import annotations

import csv
import sys
from collections import defaultdict

FACTORS = {
    "Biomass": 18.0,
    "Fossil Gas": 469.0,
    "Fossil Hard coal": 1001.0,
    "Fossil Oil": 840.0,
    "Hydro Run-of-river and poundage": 4.0,
    "Nuclear": 16.0,
    "Other": 770.0,
    "Solar": 46.0,
    "Wind Offshore": 12.0,
    "Wind Onshore": 12.0,
    "FR": 39.0,
    "NL": 452.0,
    "IE": 348.0,
    "BE": 153.0,
}
"""gCO2eq/kWh. Pumped storage is left out (it moves energy, it does not make it)."""


def main(path: str) -> None:
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            hour = row[""][:13]
            mw = {k: float(row[k] or 0.0) for k in FACTORS}
            sums[hour][0] += sum(v * FACTORS[k] for k, v in mw.items())
            sums[hour][1] += sum(mw.values())
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["time", "carbon_g_per_kwh"])
    for hour in sorted(sums):
        carbon, energy = sums[hour]
        if energy > 0:
            out.writerow([f"{hour}:00:00", f"{carbon / energy:.1f}"])


if __name__ == "__main__":
    main(sys.argv[1])
