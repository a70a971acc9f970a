"""A run's carbon and cost on the true grid (docs/carbon.md): its draw over time, and the idle
cluster's draw up to an equal horizon, each hour at that hour's intensity and price."""

from __future__ import annotations

from collections.abc import Sequence

from solver.simulate.core import PowerSegment
from solver.simulate.grid import GridSettings

GRAMS_PER_KG = 1000.0


def run_carbon(
    grid: GridSettings | None, segments: Sequence[PowerSegment]
) -> tuple[float | None, float | None]:
    """(kg CO2, cost) of the run's true draw; (None, None) without a grid, cost None without
    prices."""
    if grid is None:
        return None, None
    grams = sum(grid.carbon_g(s.true_watts, s.start_s, s.end_s) for s in segments)
    costs = [grid.cost(s.true_watts, s.start_s, s.end_s) for s in segments]
    cost = None if grid.price_per_kwh is None else sum(c or 0.0 for c in costs)
    return grams / GRAMS_PER_KG, cost


def idle_steps(
    end_s: float, seconds: float, idle_watts: float, tail: Sequence[tuple[float, float]]
) -> list[tuple[float, float, float]]:
    """(start, end, watts) of the idle cluster from `end_s` for `seconds`: ``idle_watts``, then
    each tail step's draw from its time after the end on (as ``Summary.pad``)."""
    steps, since, watts = [], 0.0, idle_watts
    for at, after in tail:
        if at >= seconds:
            break
        steps.append((end_s + since, end_s + at, watts))
        since, watts = at, after
    steps.append((end_s + since, end_s + seconds, watts))
    return [s for s in steps if s[1] > s[0]]


def pad_carbon(
    grid: GridSettings, end_s: float, seconds: float, idle_watts: float,
    tail: Sequence[tuple[float, float]],
) -> tuple[float, float | None]:  # fmt: skip
    """(kg CO2, cost) of the idle cluster after the run, up to `seconds` after its end."""
    steps = idle_steps(end_s, seconds, idle_watts, tail)
    grams = sum(grid.carbon_g(w, a, b) for a, b, w in steps)
    if grid.price_per_kwh is None:
        return grams / GRAMS_PER_KG, None
    return grams / GRAMS_PER_KG, sum(grid.cost(w, a, b) or 0.0 for a, b, w in steps)
