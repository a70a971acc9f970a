"""Benchmark instance generator: seeded, realistic ``SolveRequest`` snapshots from public data.

The command line, ``dsfro generate`` or ``python -m solver.offline.generate``: a benchmark family or
sizes and shares, written as an instance file; ``--tiny DIR`` writes the hand-checkable ones.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from solver.files import write_text
from solver.offline.generate.cluster import MIXES
from solver.offline.generate.instance import generate, to_json
from solver.offline.generate.spec import InstanceSpec, SpecError
from solver.offline.generate.tiny import tiny_instances

FAMILIES: dict[str, tuple[int, int, float]] = {
    "small": (16, 32, 2.0),
    "medium": (128, 256, 5.0),
    "large": (1024, 2048, 20.0),
    "xl": (8192, 16384, 60.0),
}
"""Benchmark families (docs/benchmarks.md): nodes (8 GPUs each in the hybrid mix), jobs, and
the time budget their targets are measured at."""

HETERO_POWER_ARGS: tuple[str, ...] = (
    "--mix",
    "hetero-power",
    "--profile-share",
    "0.75",
    "--power-budget-fraction",
    "0.45",
    "--rack-power-budget-fraction",
    "0.7",
    "--tight-rack-share",
    "0.25",
    "--tight-rack-power-budget-fraction",
    "0.4",
)
"""The hetero-power families' settings (generator choices, not measurements): five GPU types
in 4- and 8-GPU nodes, three quarters of the jobs with measured profiles, a cluster budget of
45 % of the GPUs' TDP, idle GPUs included (without it, the optimum of hetero-power-32 seed 1
draws 48.3 % of TDP, seeds 2 and 3 63 %: 50 % would not bind on seed 1), racks at 70 % of
their TDP and a quarter of them (at least one) at 40 %."""

HETERO_POWER_FAMILIES: dict[str, tuple[int, int, float]] = {
    f"hetero-power-{n}": (n, 3 * n // 2, budget)
    for n, budget in ((32, 2.0), (64, 5.0), (128, 10.0), (256, 20.0))
}
"""Power-bound families (docs/benchmarks.md), named by node count: nodes, 1.5 jobs a node,
time budget. Kept apart from FAMILIES, whose scale targets they do not share."""

FAMILY_ARGS: dict[str, tuple[str, ...]] = dict.fromkeys(HETERO_POWER_FAMILIES, HETERO_POWER_ARGS)
"""Options a family implies, read before the command line's own (which override them)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dsfro generate", description=__doc__.split("\n")[0])
    p.add_argument(
        "--family",
        choices=[*FAMILIES, *HETERO_POWER_FAMILIES],
        default=None,
        help="a benchmark family: sets nodes, jobs, time budget (and a hetero-power family's "
        "mix, shares and budgets) unless given",
    )
    p.add_argument("--nodes", type=int, default=None, help="number of nodes (default 16)")
    p.add_argument("--jobs", type=int, default=None, help="number of jobs (default 32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mix", choices=sorted(MIXES), default="hybrid", help="node types (hybrid)")
    p.add_argument("--profile-share", type=float, default=0.5)
    p.add_argument("--running-share", type=float, default=0.3)
    p.add_argument("--deadline-share", type=float, default=0.2)
    p.add_argument("--unavailable-share", type=float, default=0.01)
    p.add_argument("--power-budget-fraction", type=float, default=None)
    p.add_argument("--rack-power-budget-fraction", type=float, default=None)
    p.add_argument("--tight-rack-share", type=float, default=0.0)
    p.add_argument("--tight-rack-power-budget-fraction", type=float, default=None)
    p.add_argument(
        "--slice-share",
        type=float,
        default=0.0,
        help="share of jobs that are one-GPU MIG slice jobs (docs/mig.md; needs a MIG GPU type)",
    )
    p.add_argument("--philly-view", choices=["snapshot", "arrivals"], default="snapshot")
    p.add_argument("--time-budget", type=float, default=None, help="seconds (default 10)")
    p.add_argument("--out", type=Path, default=None, help="output file (default stdout)")
    p.add_argument(
        "--tiny",
        type=Path,
        default=None,
        metavar="DIR",
        help="write the hand-checkable tiny-*.json instances into DIR instead",
    )
    return p


def spec_from_args(argv: Sequence[str]) -> InstanceSpec:
    """The InstanceSpec that a command line describes (shared by ``main`` and the tests)."""
    a = build_parser().parse_args(list(argv))
    if a.family in FAMILY_ARGS:
        a = build_parser().parse_args([*FAMILY_ARGS[a.family], *argv])
    sizes = {**FAMILIES, **HETERO_POWER_FAMILIES}
    nodes, jobs, budget = sizes[a.family] if a.family else (16, 32, 10.0)
    return InstanceSpec(
        name=a.out.stem if a.out is not None else (a.family or "instance"),
        num_nodes=nodes if a.nodes is None else a.nodes,
        num_jobs=jobs if a.jobs is None else a.jobs,
        node_kinds=MIXES[a.mix](),
        seed=a.seed,
        profile_share=a.profile_share,
        running_share=a.running_share,
        deadline_share=a.deadline_share,
        unavailable_share=a.unavailable_share,
        power_budget_fraction=a.power_budget_fraction,
        rack_power_budget_fraction=a.rack_power_budget_fraction,
        tight_rack_share=a.tight_rack_share,
        tight_rack_power_budget_fraction=a.tight_rack_power_budget_fraction,
        time_budget_seconds=budget if a.time_budget is None else a.time_budget,
        philly_view=a.philly_view,
        slice_share=a.slice_share,
    )


OPTIONS = {"num_nodes": "--nodes", "num_jobs": "--jobs", "time_budget_seconds": "--time-budget"}
"""Spec fields whose option is not the field's name in dashes."""


def option_of(field: str) -> str:
    """The command line's option for an ``InstanceSpec`` field."""
    return OPTIONS.get(field, "--" + field.replace("_", "-"))


def main(argv: Sequence[str] | None = None) -> int:
    """Write the instance; a spec that cannot make one exits 2 naming the option at fault."""
    try:
        return _main(argv)
    except SpecError as e:
        print(f"dsfro generate: error: {option_of(e.field)}: {e.detail}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parsed = build_parser().parse_args(args)
    if parsed.tiny is not None:
        parsed.tiny.mkdir(parents=True, exist_ok=True)
        for name, request in tiny_instances().items():
            write_text(parsed.tiny / f"{name}.json", to_json(request))
        return 0
    text = to_json(generate(spec_from_args(args)))
    if parsed.out is None:
        sys.stdout.write(text)
    else:
        parsed.out.parent.mkdir(parents=True, exist_ok=True)
        write_text(parsed.out, text)
    return 0
