"""Fit the SM-clock power/time model (``solver.perfmodel.power``) to the Zeus power-limit curves.

Run ``.venv/bin/python scripts/fit_clock_model.py``: reads ``data/zeus/summary_power_*.csv``,
writes ``models/clock_model.json`` and prints the fit error per GPU (a Markdown table, pasted
into ``docs/performance-model.md``).

Model (docs/performance-model.md has the derivation). A step at the highest clock f_max spends
a share ``c`` of its time computing and ``1 - c`` on everything else (input pipeline, memory-
and latency-bound kernels, communication). At clock ratio ``x = f / f_max``:

    time(x)  = T0 * (c / x + 1 - c)                     only compute slows down
    P_c(x)   = floor + dyn * x ** alpha                 power while computing
    P_o      = floor                                    power the rest of the step
    power(x) = (c / x * P_c(x) + (1 - c) * P_o) / (c / x + 1 - c)

Under a power limit L the driver lowers the clock until the computing phases fit under L:
``x(L) = min(1, ((L - floor) / dyn) ** (1 / alpha))``, never below ``MIN_CLOCK_RATIO``.
Constants: ``alpha`` shared by all GPUs and workloads; ``floor`` and ``dyn`` per GPU; ``c`` and
``T0`` per workload (a dataset, network, batch size and optimizer on one GPU). The fit minimises
the sum of squared log errors of time_per_epoch and average_power over all measured points.

Search (numpy only, deterministic): golden-section on alpha; for each alpha a pattern search on
(floor, dyn) per GPU; for each of those a grid over c (coarse, then step 0.01) with T0 in
closed form.

The model, the data loader and the per-workload fit live in ``solver.offline.calibration.zeus``
(``dsfro calibrate`` reports this fit's error next to the other sources); this script searches
the shared and per-GPU constants and writes the file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from solver.offline.calibration.numeric import Array, golden_section
from solver.offline.calibration.zeus import MIN_CLOCK_RATIO
from solver.offline.calibration.zeus import ZeusData as GpuData
from solver.offline.calibration.zeus import ZeusFit as GpuFit
from solver.offline.calibration.zeus import fit_zeus_workloads as fit_workloads
from solver.offline.calibration.zeus import load_zeus as _load_zeus
from solver.offline.calibration.zeus import zeus_clock_ratio as clock_ratio
from solver.offline.calibration.zeus import zeus_point_errors as point_errors
from solver.offline.calibration.zeus import zeus_predict as predict

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data" / "zeus"
OUT_PATH = ROOT / "models" / "clock_model.json"
COMMAND = ".venv/bin/python scripts/fit_clock_model.py"

ALPHA_RANGE = (1.0, 4.0)
ALPHA_TOL = 0.005

__all__ = [
    "MIN_CLOCK_RATIO",
    "Array",
    "GpuData",
    "GpuFit",
    "clock_ratio",
    "fit_workloads",
    "point_errors",
    "predict",
]


def load_zeus(data_dir: Path = DATA_DIR) -> list[GpuData]:
    """Read every ``summary_power_<gpu>.csv`` of ``data_dir``."""
    return _load_zeus(data_dir)


def pattern_search(
    f: Callable[[float, float], float],
    start: tuple[float, float],
    step: tuple[float, float],
    bounds: tuple[tuple[float, float], tuple[float, float]],
    min_step: float = 0.05,
) -> tuple[float, float]:
    """Compass search in two variables: move while a neighbour improves, else halve the step."""
    p = list(start)
    sx = list(step)
    best = f(p[0], p[1])
    while max(sx) > min_step:
        moved = False
        for i in (0, 1):
            for sign in (1.0, -1.0):
                q = list(p)
                q[i] = min(max(q[i] + sign * sx[i], bounds[i][0]), bounds[i][1])
                if q == p:
                    continue
                val = f(q[0], q[1])
                if val < best:
                    p, best, moved = q, val, True
                    break
        if not moved:
            sx = [s / 2 for s in sx]
    return p[0], p[1]


def fit_gpu(g: GpuData, alpha: float, start: tuple[float, float] | None = None) -> GpuFit:
    """Per-GPU floor and dynamic power for a given alpha.

    Without ``start`` the search begins at 80 % of the lowest measured power and a wide step;
    with it (the optimum at a nearby alpha) it begins there with a step 10 times smaller.
    """
    cap = g.max_limit

    def err(floor: float, dyn: float) -> float:
        return fit_workloads(g, alpha, floor, dyn).error

    scale = 0.1 if start is not None else 1.0
    if start is None:
        start = (0.8 * g.min_power, 0.8 * (cap - 0.8 * g.min_power))
    floor, dyn = pattern_search(
        err,
        start,
        step=(0.05 * cap * scale, 0.1 * cap * scale),
        bounds=((1.0, g.min_power * 1.25), (10.0, cap)),
    )
    return fit_workloads(g, alpha, floor, dyn)


@dataclass(frozen=True)
class Fit:
    alpha: float
    gpus: tuple[GpuData, ...]
    fits: tuple[GpuFit, ...]


def fit(gpus: Sequence[GpuData]) -> Fit:
    """Shared alpha by golden section; per-GPU and per-workload constants inside."""

    first = [fit_gpu(g, sum(ALPHA_RANGE) / 2) for g in gpus]
    starts = [(f.floor_watts, f.dynamic_watts) for f in first]

    def total(alpha: float) -> float:
        return sum(fit_gpu(g, alpha, s).error for g, s in zip(gpus, starts, strict=True))

    alpha = round(golden_section(total, *ALPHA_RANGE, ALPHA_TOL), 3)
    fits = tuple(fit_gpu(g, alpha, s) for g, s in zip(gpus, starts, strict=True))
    return Fit(alpha=alpha, gpus=tuple(gpus), fits=fits)


def energy_choice(g: GpuData, gf: GpuFit, alpha: float) -> tuple[int, list[float]]:
    """How well the model picks the energy-optimal power limit of compute-bound workloads.

    Over workloads with c >= 0.5 and >= 5 limits (for the others energy barely depends on the
    limit): the number whose modelled energy-optimal limit is the measured one, and per workload
    the measured energy at the model's choice over the measured minimum, minus 1 (the regret).
    """
    x = clock_ratio(g.limit, gf.floor_watts, gf.dynamic_watts, alpha)
    c = gf.compute_fraction[:, None]
    rel_time, power = predict(x, c, gf.floor_watts, gf.dynamic_watts, alpha)
    hits, regrets = 0, []
    for i in range(len(g.keys)):
        m = g.mask[i] > 0
        if m.sum() < 5 or gf.compute_fraction[i] < 0.5:
            continue
        measured = np.exp(g.log_time[i] + g.log_power[i])[m]
        choice = int(np.argmin((rel_time[i] * power[i])[m]))
        hits += int(choice == int(np.argmin(measured)))
        regrets.append(float(measured[choice] / measured.min() - 1))
    return hits, regrets


def _stats(errors: Array) -> dict[str, float]:
    a = np.abs(errors)
    return {"median": round(float(np.median(a)), 4), "worst": round(float(a.max()), 4)}


def summarise(result: Fit) -> dict[str, object]:
    """The JSON document written to models/clock_model.json."""
    gpus: dict[str, object] = {}
    all_t, all_p, all_c = [], [], []
    by_network: dict[str, list[float]] = {}
    dyn_fracs, floor_fracs = [], []
    hits_all, regrets_all = 0, []
    for g, gf in zip(result.gpus, result.fits, strict=True):
        et, ep = point_errors(g, gf, result.alpha)
        hits, regrets = energy_choice(g, gf, result.alpha)
        hits_all += hits
        regrets_all.extend(regrets)
        all_t.append(et)
        all_p.append(ep)
        all_c.extend(gf.compute_fraction.tolist())
        for key, c in zip(g.keys, gf.compute_fraction, strict=True):
            by_network.setdefault(key[1], []).append(float(c))
        x_lo = clock_ratio(g.limit[g.mask > 0], gf.floor_watts, gf.dynamic_watts, result.alpha)
        dyn_frac = gf.dynamic_watts / (g.max_limit - gf.floor_watts)
        dyn_fracs.append(dyn_frac)
        floor_fracs.append(gf.floor_watts / g.max_limit)
        gpus[g.name] = {
            "max_power_limit_watts": g.max_limit,
            "floor_watts": round(gf.floor_watts, 2),
            "dynamic_watts": round(gf.dynamic_watts, 2),
            "dynamic_fraction": round(dyn_frac, 4),
            "floor_fraction": round(gf.floor_watts / g.max_limit, 4),
            "lowest_measured_average_watts": round(g.min_power, 2),
            "lowest_fitted_clock_ratio": round(float(x_lo.min()), 3),
            "workloads": len(g.keys),
            "points": int(g.mask.sum()),
            "compute_fraction_median": round(float(np.median(gf.compute_fraction)), 3),
            "time_relative_error": _stats(et),
            "power_relative_error": _stats(ep),
            "energy_optimal_limit_matched": f"{hits}/{len(regrets)}",
            "energy_regret": _stats(np.array(regrets)),
        }
    cs = np.array(all_c)
    return {
        "model": {
            "power_watts": (
                "idle + dynamic_fraction * (tdp - idle) * activity * (f / f_max) ** alpha"
            ),
            "time": "t_compute * f_max / f + t_other",
            "power_limit": "clock lowered until computing phases draw the limit",
        },
        "alpha": result.alpha,
        "dynamic_fraction": round(float(np.median(dyn_fracs)), 4),
        "floor_fraction": round(float(np.median(floor_fracs)), 4),
        "compute_fraction": {
            "median": round(float(np.median(cs)), 3),
            "p25": round(float(np.percentile(cs, 25)), 3),
            "p75": round(float(np.percentile(cs, 75)), 3),
            "by_network": {k: round(float(np.median(v)), 3) for k, v in sorted(by_network.items())},
        },
        "gpus": gpus,
        "overall": {
            "workloads": len(cs),
            "points": int(sum(len(e) for e in all_t)),
            "time_relative_error": _stats(np.concatenate(all_t)),
            "power_relative_error": _stats(np.concatenate(all_p)),
            "energy_optimal_limit_matched": f"{hits_all}/{len(regrets_all)}",
            "energy_regret": _stats(np.array(regrets_all)),
        },
        "fit": {
            "data": sorted(f"data/zeus/summary_power_{g.name}.csv" for g in result.gpus),
            "objective": "sum of squared log errors of time_per_epoch and average_power",
            "min_clock_ratio": MIN_CLOCK_RATIO,
            "command": COMMAND,
        },
    }


def markdown_table(doc: dict[str, object]) -> str:
    """Error table for docs/performance-model.md."""
    lines = [
        "| GPU | workloads | points | floor W | dyn W | time err median | time err worst "
        "| power err median | power err worst | energy-optimal limit matched "
        "| energy regret median | energy regret worst |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    gpus = doc["gpus"]
    assert isinstance(gpus, dict)
    rows = [(name, gpus[name]) for name in sorted(gpus)] + [("all", doc["overall"])]
    for name, s in rows:
        assert isinstance(s, dict)
        t, p, r = s["time_relative_error"], s["power_relative_error"], s["energy_regret"]
        floor = f"{s['floor_watts']:.1f}" if "floor_watts" in s else ""
        dyn = f"{s['dynamic_watts']:.1f}" if "dynamic_watts" in s else ""
        lines.append(
            f"| {name} | {s['workloads']} | {s['points']} | {floor} | {dyn} "
            f"| {t['median']:.1%} | {t['worst']:.1%} | {p['median']:.1%} | {p['worst']:.1%} "
            f"| {s['energy_optimal_limit_matched']} | {r['median']:.1%} | {r['worst']:.1%} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] = ()) -> int:
    out = Path(argv[0]) if argv else OUT_PATH
    doc = summarise(fit(load_zeus()))
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(
        f"alpha={doc['alpha']} dynamic_fraction={doc['dynamic_fraction']} "
        f"floor_fraction={doc['floor_fraction']} compute_fraction={doc['compute_fraction']}"
    )
    print(markdown_table(doc))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
