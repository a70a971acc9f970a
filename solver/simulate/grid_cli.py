"""``dsfro simulate``'s grid flags (``--grid``, ``--grid-start``, ``--grid-days``,
``--forecast-error``, ``--min-saving``, ``--saving-per-delay``, ``--scale-energy``) and the
``GridSettings`` they give."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from solver.app.arguments import float_arg
from solver.simulate.core import SimulationError
from solver.simulate.grid import DEFAULT_FORECAST_ERROR, GridFileError, GridSettings, load_grid
from solver.simulate.settings import EngineSettings


def add_grid(p: argparse.ArgumentParser) -> None:
    """The flags of the grid, in their own group."""
    g = p.add_argument_group("grid carbon and price (docs/carbon.md)")
    g.add_argument(
        "--grid",
        metavar="CSV",
        help="hourly carbon intensity (and price) of the grid, e.g. data/grid/gb-2020-hourly.csv:"
        " every request carries its forecast, every run reports kg CO2 (and cost)",
    )
    g.add_argument("--grid-start", metavar="TIME", help="the CSV's hour at simulated time 0")
    g.add_argument(
        "--grid-days",
        type=float_arg(1 / 24, 3660.0),
        default=60.0,
        metavar="DAYS",
        help="days of the CSV from --grid-start (a longer run wraps around; default 60)",
    )
    g.add_argument(
        "--forecast-error",
        type=float_arg(0.0, 10.0),
        metavar="SIGMA",
        help=f"relative error of later hours' forecast (default {DEFAULT_FORECAST_ERROR:g})",
    )
    g.add_argument(
        "--min-saving",
        type=float_arg(0.0, 0.999),
        metavar="SHARE",
        help="least share of its carbon a job must save to wait (default: the product's, 0.1)",
    )
    g.add_argument(
        "--saving-per-delay",
        type=float_arg(0.0, 100.0),
        metavar="PRICE",
        help="the price of waiting: share of its carbon a job must save per run-length it "
        "waits (default: unset, the cleanest start)",
    )
    g.add_argument(
        "--scale-energy",
        action="store_true",
        help="scale DSFRO's energy weight by the intensity now over the next day's mean",
    )


TWEAKS = "grid_tweaks"
"""The overrides' key of the flags that change a scenario's own grid (without --grid)."""


def grid_of(args: argparse.Namespace) -> GridSettings | dict[str, Any] | str | None:
    """The grid of the flags; without --grid, the changes they make to the scenario's own grid
    (checked when the scenario is loaded); None without either; or the error naming the flag
    or the row."""
    given = {k: getattr(args, k) for k in ("forecast_error", "min_saving", "saving_per_delay")}
    tweaks: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if args.scale_energy:
        tweaks["scale_energy"] = True
    if args.grid is None:
        if args.grid_start is not None:
            return "--grid-start needs --grid"
        return tweaks or None
    try:
        grid = load_grid(args.grid, args.grid_start, args.grid_days)
    except GridFileError as e:
        return str(e)
    return replace(grid, **tweaks)


def with_tweaks(settings: EngineSettings, tweaks: dict[str, Any] | None) -> EngineSettings:
    """`settings` with its grid changed by the flags; SimulationError when it has no grid."""
    if not tweaks:
        return settings
    if settings.grid is None:
        flags = ", ".join("--" + k.replace("_", "-") for k in tweaks)
        raise SimulationError([f"{flags}: the scenario has no grid (give --grid CSV)"])
    return replace(settings, grid=replace(settings.grid, **tweaks))
