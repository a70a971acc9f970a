"""The grid's carbon intensity and price over time, as plain typed data (docs/carbon.md).

A `GridForecast` is what the site's forecast says from the snapshot on: consecutive periods,
each with its carbon intensity (gCO2/kWh) and, where known, its price per kWh. The first period
is now. Means over windows are time-weighted, and a window past the forecast's end counts only
its covered part: what lies beyond is not known.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

DEFAULT_MIN_SAVING = 0.1
"""Least share of a job's carbon that waiting must save (design choice: below it, the forecast's
error, 5-10 % in Wiesner et al., Middleware 2021, could make the wait a loss)."""

LONE_PERIOD_SECONDS = 3600.0
"""Length of a forecast's only period: grid signals are hourly (ENTSO-E, CAISO, Electricity
Maps)."""


@dataclass(frozen=True)
class GridPoint:
    """One period of the forecast, from `start_seconds` after the snapshot to the next point."""

    start_seconds: float
    carbon_g_per_kwh: float
    price_per_kwh: float | None = None


@dataclass(frozen=True)
class GridForecast:
    """The carbon intensity and price from now on; `points` start at 0 and strictly increase."""

    points: tuple[GridPoint, ...]
    min_saving: float = DEFAULT_MIN_SAVING
    """Least share of a job's carbon that waiting must save for the job to wait."""
    scale_energy: bool = False
    """Scale the energy weight by the intensity now over its mean over the next 24 h."""
    saving_per_delay: float = 0.0
    """The price of waiting: a start s must save this x s / predicted run of the job's carbon
    net; 0: the cleanest start within the slack."""

    @property
    def now_g_per_kwh(self) -> float:
        return self.points[0].carbon_g_per_kwh

    @property
    def end_seconds(self) -> float:
        """Where the forecast ends: its last period's end."""
        return self._ends[-1]

    def periods(self) -> Iterator[tuple[float, float, GridPoint]]:
        """(start, end, point) of every period."""
        yield from zip(self._starts, self._ends, self.points, strict=True)

    def mean_carbon(self, start: float, end: float) -> float | None:
        """Time-weighted mean intensity over [start, end] clipped to the forecast; the
        intensity at `start` when the window is empty; None when `start` is past the end.
        (Once a round; the deferral's many means are solver.core.carbon's, vectorised.)"""
        if start >= self.end_seconds:
            return None
        end = min(end, self.end_seconds)
        if end <= start:
            return next(p.carbon_g_per_kwh for a, b, p in self.periods() if start < b)
        weighted = sum(
            (min(b, end) - max(a, start)) * p.carbon_g_per_kwh
            for a, b, p in self.periods()
            if min(b, end) > max(a, start)
        )
        return weighted / (end - start)

    @cached_property
    def _starts(self) -> tuple[float, ...]:
        return tuple(p.start_seconds for p in self.points)

    @cached_property
    def _ends(self) -> tuple[float, ...]:
        starts = self._starts
        last = starts[-1] - starts[-2] if len(starts) > 1 else LONE_PERIOD_SECONDS
        return (*starts[1:], starts[-1] + last)
