"""The grid in a simulation (docs/carbon.md): the true carbon intensity and price hour by hour,
the forecast the policies see, and the carbon and cost of a draw over time.

The truth is a measured hourly series (e.g. ``data/grid/gb-2020-hourly.csv``); a run longer
than the series wraps around to its start. Each round's request carries the forecast from the
round on: the hour now as measured, each later hour with a multiplicative error drawn per
(seed, hour the forecast is made, hour forecast), so that a forecast made twice in one hour is
the same and a later hour's forecast changes as time goes on. The default error, 10 %, is the
larger of the two Wiesner et al. (Middleware 2021) simulate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.wire import (
    MAX_CARBON_G_PER_KWH,
    GridScheduleError,
    hourly_periods,
    read_grid_schedule,
)

HOUR_S = 3600.0
JOULES_PER_KWH = 3.6e6
DEFAULT_FORECAST_ERROR = 0.10
"""Standard deviation of a later hour's forecast, relative (Wiesner et al. simulate 5 and 10 %)."""
DEFAULT_FORECAST_HOURS = 48
"""Hours the forecast covers: two days, as the grid operators' published forecasts do (the
National Grid ESO carbon intensity forecast: 48 h)."""


class GridFileError(ValueError):
    """A grid schedule that cannot be read; the message names the file, row and column (or
    the flag)."""


@dataclass(frozen=True)
class GridSettings:
    """The true grid from simulated time 0, hour by hour, and the forecast's rules."""

    carbon_g_per_kwh: tuple[float, ...]
    price_per_kwh: tuple[float, ...] | None = None
    forecast_error: float = DEFAULT_FORECAST_ERROR
    forecast_hours: int = DEFAULT_FORECAST_HOURS
    min_saving: float | None = None
    """The requests' ``min_saving``; None: the product's default."""
    scale_energy: bool = False
    saving_per_delay: float | None = None
    """The requests' ``saving_per_delay``; None: unset (the cleanest start)."""
    source: str = ""
    """Where the series comes from (file and first hour), for the report."""

    def hour(self, t: float) -> int:
        return math.floor(t / HOUR_S) % len(self.carbon_g_per_kwh)

    def carbon_at(self, t: float) -> float:
        return self.carbon_g_per_kwh[self.hour(t)]

    def carbon_g(self, watts: float, start: float, end: float) -> float:
        """gCO2 of drawing `watts` from `start` to `end` (s), hour by hour."""
        return watts * _integral(self.carbon_g_per_kwh, start, end) / JOULES_PER_KWH

    def cost(self, watts: float, start: float, end: float) -> float | None:
        """The price of drawing `watts` from `start` to `end`; None without prices."""
        if self.price_per_kwh is None:
            return None
        return watts * _integral(self.price_per_kwh, start, end) / JOULES_PER_KWH

    def forecast(self, t: float, seed: int) -> pb.GridForecast:
        """What the site's forecast says at `t`: the hour now as measured (until the next
        hour's start), then each later hour with its error."""
        made = math.floor(t / HOUR_S)
        out = pb.GridForecast(scale_energy=self.scale_energy)
        if self.min_saving is not None:
            out.min_saving = self.min_saving
        if self.saving_per_delay is not None:
            out.saving_per_delay = self.saving_per_delay
        for k in range(self.forecast_hours + 1):
            start = 0.0 if k == 0 else (made + k) * HOUR_S - t
            if k > 0 and start <= 0:
                continue
            truth_t = t if k == 0 else (made + k) * HOUR_S
            value = self.carbon_at(truth_t)
            if k > 0:
                noise = np.random.default_rng([seed, made, made + k]).normal(0.0, 1.0)
                value = max(0.0, value * (1 + self.forecast_error * noise))
            point = out.points.add(carbon_g_per_kwh=min(value, MAX_CARBON_G_PER_KWH))
            point.start.FromNanoseconds(round(start * 1e9))
            if self.price_per_kwh is not None:
                point.price_per_kwh = self.price_per_kwh[self.hour(truth_t)]
        return out


def _integral(series: tuple[float, ...], start: float, end: float) -> float:
    """The integral over [start, end] (s) of an hourly step series that wraps around."""
    total, t = 0.0, start
    n = len(series)
    while t < end:
        h = math.floor(t / HOUR_S)
        step_end = min(end, (h + 1) * HOUR_S)
        total += series[h % n] * (step_end - t)
        t = step_end
    return total


def load_grid(path: str | Path, start: str | None = None, days: float = 366.0) -> GridSettings:
    """The hourly series of a grid schedule CSV (``solver.wire.read_grid_schedule``: ``time``,
    ``carbon_g_per_kwh``, optional ``price_per_kwh``) from its row at `start` (an ISO time;
    default: its first row) for `days` days."""
    try:
        rows = read_grid_schedule(path)
    except GridScheduleError as e:
        raise GridFileError(str(e)) from e
    first = 0
    if start is not None:
        try:
            wanted = datetime.fromisoformat(start.strip()).replace(tzinfo=None)
        except ValueError as e:
            raise GridFileError(f"{path}: --grid-start {start!r} is not an ISO time") from e
        if wanted < rows[0].start:
            raise GridFileError(
                f"{path}: --grid-start {start} is before its first row ({rows[0].start})"
            )
        first = next((i for i, r in enumerate(rows) if r.start >= wanted), -1)
        if first < 0:
            raise GridFileError(f"{path}: no row at or after {start}")
    chosen = rows[first:]
    hourly = hourly_periods(chosen, chosen[0].start, max(1, round(days * 24)))
    carbon = tuple(h.carbon_g_per_kwh for h in hourly)
    prices = None
    if chosen[0].price_per_kwh is not None:
        prices = tuple(h.price_per_kwh or 0.0 for h in hourly)
    return GridSettings(carbon, prices, source=f"{Path(path).name} from {chosen[0].start}")
