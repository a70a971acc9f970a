"""The grid forecast between the wire and the domain (solver.grid)."""

from __future__ import annotations

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.validation.common import duration_seconds
from solver.grid import DEFAULT_MIN_SAVING, GridForecast, GridPoint


def grid_from_proto(c: pb.ClusterSnapshot) -> GridForecast | None:
    """A validated snapshot's forecast; None without one."""
    if not c.HasField("grid"):
        return None
    g = c.grid
    return GridForecast(
        points=tuple(
            GridPoint(
                start_seconds=duration_seconds(p.start),
                carbon_g_per_kwh=p.carbon_g_per_kwh,
                price_per_kwh=p.price_per_kwh if p.HasField("price_per_kwh") else None,
            )
            for p in g.points
        ),
        min_saving=g.min_saving if g.HasField("min_saving") else DEFAULT_MIN_SAVING,
        scale_energy=g.scale_energy,
        saving_per_delay=g.saving_per_delay if g.HasField("saving_per_delay") else 0.0,
    )


def max_deferral_seconds(j: pb.Job) -> float | None:
    return duration_seconds(j.max_deferral) if j.HasField("max_deferral") else None
