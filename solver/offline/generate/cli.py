"""Benchmark instance generator: seeded, realistic ``SolveRequest`` snapshots from public data.

The command line, ``dsfro generate`` or ``python -m solver.offline.generate``: a benchmark family or
sizes and shares, written as an instance file; ``--tiny DIR`` writes the hand-checkable ones.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from solver.offline.generate.cluster import MIXES
from solver.offline.generate.instance import generate, to_json
from solver.offline.generate.spec import InstanceSpec
from solver.offline.generate.tiny import tiny_instances

FAMILIES: dict[str, tuple[int, int, float]] = {
    "small": (16, 32, 2.0),
    "medium": (128, 256, 5.0),
    "large": (1024, 2048, 20.0),
    "xl": (8192, 16384, 60.0),
}
"""Benchmark families (docs/benchmarks.md): nodes (8 GPUs each in the hybrid mix), jobs, and
the time budget their targets are measured at."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dsfro generate", description=__doc__.split("\n")[0])
    p.add_argument(
        "--family",
        choices=list(FAMILIES),
        default=None,
        help="a benchmark family: sets nodes, jobs and time budget unless given",
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
    nodes, jobs, budget = FAMILIES[a.family] if a.family else (16, 32, 10.0)
    if min(a.nodes or 1, a.jobs or 1) < 1 or (a.time_budget is not None and a.time_budget <= 0):
        raise SystemExit("dsfro generate: --nodes, --jobs and --time-budget must be positive")
    return InstanceSpec(
        name=a.out.stem if a.out is not None else (a.family or "instance"),
        num_nodes=a.nodes or nodes,
        num_jobs=a.jobs or jobs,
        node_kinds=MIXES[a.mix](),
        seed=a.seed,
        profile_share=a.profile_share,
        running_share=a.running_share,
        deadline_share=a.deadline_share,
        unavailable_share=a.unavailable_share,
        power_budget_fraction=a.power_budget_fraction,
        time_budget_seconds=a.time_budget or budget,
        philly_view=a.philly_view,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parsed = build_parser().parse_args(args)
    if parsed.tiny is not None:
        parsed.tiny.mkdir(parents=True, exist_ok=True)
        for name, request in tiny_instances().items():
            (parsed.tiny / f"{name}.json").write_text(to_json(request))
        return 0
    text = to_json(generate(spec_from_args(args)))
    if parsed.out is None:
        sys.stdout.write(text)
    else:
        parsed.out.parent.mkdir(parents=True, exist_ok=True)
        parsed.out.write_text(text)
    return 0
