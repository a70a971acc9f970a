"""``dsfro simulate``'s inputs read from its flags: which combinations are wrong, and the engine
settings the flags override (each wrong value an error naming its flag)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from solver.app.profile import WEIGHT_KEYS
from solver.client.connection import Connection, connection_flags, connection_from_args
from solver.simulate.grid import GridSettings
from solver.simulate.grid_cli import TWEAKS, grid_of
from solver.simulate.power_saving_cli import power_saving_of
from solver.simulate.settings import EngineSettings, RestartCost

MIN_ROUND_INTERVAL_S = EngineSettings.min_round_spacing_s
"""The shortest --interval: rounds on events come at least this far apart, and a shorter
regular interval only multiplies rounds (one of a millisecond made a run of a trace's days
hundreds of millions of rounds, a run that never ended)."""


def connection_of(args: argparse.Namespace) -> Connection | None:
    """How DSFRO's policies reach --server (None: they solve here); inputs_problem has
    checked the flags."""
    return connection_from_args(args) if args.server else None


def inputs_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the run's inputs as given, or None."""
    if (args.scenario is None) == (args.trace is None):
        return "give --scenario or --trace and --cluster"
    if args.trace is not None and args.cluster is None:
        return "--trace needs --cluster"
    if args.scenario is not None and (args.cluster or args.power_schedule):
        flag = "--cluster" if args.cluster else "--power-schedule"
        return (
            f"{flag} is for --trace runs; a --scenario brings its own (write its files with "
            "'python -m solver.simulate.scenarios DIR' and run them with --trace)"
        )
    if not args.server and connection_flags(args):
        return f"{', '.join(connection_flags(args))} only apply with --server"
    if bool(args.tls_cert) != bool(args.tls_key):
        return "--tls-cert and --tls-key go together"
    return None


def settings_overrides(args: argparse.Namespace) -> dict[str, Any] | str:
    """The EngineSettings fields the flags set (grid tweaks under TWEAKS), or the error."""
    overrides: dict[str, Any] = {}
    if args.budget is not None:
        overrides["solver_budget_s"] = args.budget
    if args.interval is not None:
        if args.interval < MIN_ROUND_INTERVAL_S:
            return (
                f"--interval must be at least {MIN_ROUND_INTERVAL_S:g} s (the shortest spacing "
                f"of the simulator's rounds), got {args.interval:g} s"
            )
        overrides["round_interval_s"] = args.interval
    if args.max_time is not None:
        overrides["max_time_s"] = args.max_time
    if args.feedback:
        overrides["feedback"] = True
    if args.no_restart_cost:
        overrides["restart"] = RestartCost(overhead_s=0.0, bandwidth_bytes_per_s=math.inf)
    if args.profile is not None:  # the operator's objective weights, for DSFRO's requests
        w = args.profile.weights
        given = {k: getattr(w, k) for k in WEIGHT_KEYS if getattr(w, k) is not None}
        overrides["weights"] = given
        if w.energy_basis is not None:
            overrides["energy_basis"] = w.energy_basis
    if args.power_headroom is not None:
        if not 0 <= args.power_headroom < 1:
            return "--power-headroom must be in [0, 1)"
        overrides["power_headroom"] = args.power_headroom
    if args.power_guard == "off":
        overrides["power_guard"] = None
    saving = power_saving_of(args)
    if isinstance(saving, str):
        return saving
    if saving.enabled:
        overrides["power_saving"] = saving
    if isinstance(grid := grid_of(args), str):
        return grid
    if grid is not None:
        overrides["grid" if isinstance(grid, GridSettings) else TWEAKS] = grid
    return overrides
