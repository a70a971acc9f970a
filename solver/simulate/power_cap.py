"""The truth under a GPU power limit: a job whose true power per GPU would exceed its limit draws
the limit and trains slower, by the throughput the Zeus sweeps lost at that limit.

Zeus (data/zeus, Apache-2.0, NSDI 2023) measured time per epoch and average power of 218
workloads on four GPUs at every power limit in 25 W steps. Per workload, x = limit / its
average power at the highest limit (its unconstrained draw) and s = time at the highest limit /
time at that limit; the curve here is the median s per tenth of x (with s = 1 at x = 1),
linear in between and proportional below the lowest bin.
"""

from __future__ import annotations

import csv
import itertools
import statistics
from collections import defaultdict
from functools import cache

from solver.resources import data_dir
from solver.simulate.truth import Rate

ZEUS_GPUS = ("a40", "p100", "rtx6000", "v100")


@cache
def slowdown_curve() -> tuple[tuple[float, float], ...]:
    """(x, s) points of the Zeus median curve, x ascending, ending at (1, 1)."""
    pairs: list[tuple[float, float]] = []
    for gpu in ZEUS_GPUS:
        path = data_dir() / "zeus" / f"summary_power_{gpu}.csv"
        runs: dict[tuple[str, ...], list[tuple[float, float, float]]] = defaultdict(list)
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                key = (r["dataset"], r["network"], r["batch_size"], r["optimizer"])
                point = (float(r["power_limit"]), float(r["time_per_epoch"]))
                runs[key].append((*point, float(r["average_power"])))
        for points in runs.values():
            points.sort()
            _, top_time, top_power = points[-1]
            for limit, time, _ in points[:-1]:
                if limit < top_power:
                    pairs.append((limit / top_power, top_time / time))
    curve = []
    for tenth in range(10):
        lo, hi = tenth / 10, (tenth + 1) / 10
        xs = [x for x, _ in pairs if lo <= x < hi]
        if xs:
            ys = [s for x, s in pairs if lo <= x < hi]
            curve.append((statistics.median(xs), min(statistics.median(ys), 1.0)))
    curve.append((1.0, 1.0))
    return tuple(curve)


def speed_at(x: float) -> float:
    """Throughput ratio of a job held at x = limit / unconstrained power (1 for x >= 1)."""
    if x >= 1:
        return 1.0
    curve = slowdown_curve()
    x0, s0 = curve[0]
    if x <= x0:
        return s0 * max(x, 0.0) / x0
    for (xa, sa), (xb, sb) in itertools.pairwise(curve):
        if x <= xb:
            return sa + (sb - sa) * (x - xa) / (xb - xa)
    return 1.0


def capped(rate: Rate, gpus: int, limit_per_gpu: float | None) -> Rate:
    """The true rate of a job on `gpus` GPUs each limited to `limit_per_gpu` W (None: none)."""
    if limit_per_gpu is None or gpus <= 0 or rate.watts <= limit_per_gpu * gpus:
        return rate
    cap = limit_per_gpu * gpus
    return Rate(rate.samples_per_second * speed_at(cap / rate.watts), cap)


__all__ = ["capped", "slowdown_curve", "speed_at"]
