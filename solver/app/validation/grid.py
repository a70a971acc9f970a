"""Validation of the grid forecast and jobs' deferral limits (docs/carbon.md)."""

from __future__ import annotations

import math

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import MAX_JOB_AGE_SECONDS
from solver.app.validation.common import Collector
from solver.wire import MAX_CARBON_G_PER_KWH, MAX_GRID_POINTS, MAX_PRICE_PER_KWH

MAX_SAVING_PER_DELAY = 100.0
"""Above it no wait ever pays (a saving is at most 1): a bound that catches unit mistakes."""


def check_grid(c: Collector, cluster: pb.ClusterSnapshot) -> None:
    """Points non-empty, at most MAX_GRID_POINTS, starting at 0 and strictly increasing,
    intensities and prices finite and non-negative; min_saving in [0, 1)."""
    if not cluster.HasField("grid"):
        return
    g, p = cluster.grid, "cluster.grid"
    if not g.points:
        c.add(f"{p}.points", "must not be empty")
    if not c.count(f"{p}.points", len(g.points), MAX_GRID_POINTS, "MAX_GRID_POINTS"):
        return
    last = -math.inf
    for i, point in enumerate(g.points):
        q = f"{p}.points[{i}]"
        start = c.period(f"{q}.start", point.start, MAX_JOB_AGE_SECONDS)
        if start is not None:
            if i == 0 and start != 0:
                c.add(f"{q}.start", f"the first period must start at 0s (now), got {start:g}s")
            elif i > 0 and start <= last:
                c.add(f"{q}.start", f"must be after the previous start ({last:g}s), got {start:g}s")
            last = start
        c.non_negative(f"{q}.carbon_g_per_kwh", point.carbon_g_per_kwh, MAX_CARBON_G_PER_KWH)
        if point.HasField("price_per_kwh"):
            if not math.isfinite(point.price_per_kwh):
                c.add(f"{q}.price_per_kwh", f"must be finite, got {point.price_per_kwh:g}")
            else:
                c.at_most(f"{q}.price_per_kwh", abs(point.price_per_kwh), MAX_PRICE_PER_KWH)
    if g.HasField("min_saving") and not (0 <= g.min_saving < 1):
        c.add(f"{p}.min_saving", f"must be in [0, 1), got {g.min_saving:g}")
    if g.HasField("saving_per_delay"):
        c.non_negative(f"{p}.saving_per_delay", g.saving_per_delay, MAX_SAVING_PER_DELAY)


def check_max_deferral(c: Collector, p: str, job: pb.Job) -> None:
    if job.HasField("max_deferral"):
        c.period(f"{p}.max_deferral", job.max_deferral, MAX_JOB_AGE_SECONDS)
