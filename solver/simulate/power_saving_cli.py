"""``dsfro simulate``'s node power-saving flags (``--power-saving``, ``--suspend-after``,
``--resume-time``, ``--spare-nodes``, ``--node-base-watts``) and the ``PowerSavingSettings``
they give."""

from __future__ import annotations

import argparse

from solver.app.arguments import duration_arg, float_arg, int_arg
from solver.app.validation.power_states import MAX_PERIOD_SECONDS
from solver.simulate.power_saving import PowerSavingSettings


def add_power_saving(p: argparse.ArgumentParser) -> None:
    """The flags of the rule, in their own group."""
    d = PowerSavingSettings()
    g = p.add_argument_group("node power saving (the cluster's rule, the same for every policy)")
    g.add_argument(
        "--power-saving",
        choices=("on", "off"),
        default="off",
        help="on: nodes empty for --suspend-after are suspended and resumed when a job is "
        "placed on them (docs/simulation.md, 'Node power saving'); off (default)",
    )
    g.add_argument(
        "--suspend-after",
        type=duration_arg,
        metavar="DURATION",
        help=f"idle time before a node suspends (default {d.suspend_after_s:g}s)",
    )
    g.add_argument(
        "--resume-time",
        type=duration_arg,
        metavar="DURATION",
        help=f"a resume, before a job placed there starts (default {d.resume_s:g}s)",
    )
    g.add_argument(
        "--spare-nodes",
        type=int_arg(0, 1_000_000),
        metavar="N",
        help="empty nodes of each GPU type kept up (default 0)",
    )
    g.add_argument(
        "--node-base-watts",
        type=float_arg(0.0, 1e6),
        metavar="W",
        help="every node's draw when up beside its GPUs (CPU, memory, fans, NICs), in the "
        "truth and in every request (default 0: no public measurement was at hand; give "
        "your site's); needs --power-saving on",
    )


def power_saving_of(args: argparse.Namespace) -> PowerSavingSettings | str:
    """The rule of the flags, or the error naming the flag."""
    given = [
        f
        for f, v in (
            ("--suspend-after", args.suspend_after),
            ("--resume-time", args.resume_time),
            ("--spare-nodes", args.spare_nodes),
            ("--node-base-watts", args.node_base_watts),
        )
        if v is not None
    ]
    if args.power_saving == "off":
        return f"{given[0]} needs --power-saving on" if given else PowerSavingSettings()
    d = PowerSavingSettings()
    for flag, v in (("--suspend-after", args.suspend_after), ("--resume-time", args.resume_time)):
        if v is not None and v > MAX_PERIOD_SECONDS:
            return f"{flag} must be at most {MAX_PERIOD_SECONDS:g}s (ten years), got {v:g}s"
    return PowerSavingSettings(
        enabled=True,
        suspend_after_s=d.suspend_after_s if args.suspend_after is None else args.suspend_after,
        resume_s=d.resume_s if args.resume_time is None else args.resume_time,
        spare_nodes_per_type=args.spare_nodes or 0,
        node_base_watts=args.node_base_watts or 0.0,
    )
