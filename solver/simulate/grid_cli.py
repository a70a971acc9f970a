"""``dsfro simulate``'s grid flags (``--grid``, ``--grid-start``, ``--grid-days``,
``--forecast-error``, ``--min-saving``, ``--scale-energy``) and the ``GridSettings`` they give."""

from __future__ import annotations

import argparse
from dataclasses import replace

from solver.app.arguments import float_arg
from solver.simulate.grid import DEFAULT_FORECAST_ERROR, GridFileError, GridSettings, load_grid


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
        "--scale-energy",
        action="store_true",
        help="scale DSFRO's energy weight by the intensity now over the next day's mean",
    )


def grid_of(args: argparse.Namespace) -> GridSettings | str | None:
    """The grid of the flags, None without --grid, or the error naming the flag or the row."""
    if args.grid is None:
        others = [
            f
            for f, v in (
                ("--grid-start", args.grid_start),
                ("--forecast-error", args.forecast_error),
                ("--min-saving", args.min_saving),
                ("--scale-energy", args.scale_energy or None),
            )
            if v is not None
        ]
        return f"{others[0]} needs --grid" if others else None
    try:
        grid = load_grid(args.grid, args.grid_start, args.grid_days)
    except GridFileError as e:
        return str(e)
    if args.forecast_error is not None:
        grid = replace(grid, forecast_error=args.forecast_error)
    return replace(grid, min_saving=args.min_saving, scale_energy=args.scale_energy)
