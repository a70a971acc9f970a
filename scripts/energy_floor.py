"""How far each policy's energy is from the floor no policy can go below (issue 19;
docs/evaluation.md, "The energy floor").

A job's floor is its work at its most frugal true cost (``Truth.least_joules_per_sample``: any
GPU type it runs on, any GPU count it may take, any clock, one MIG instance where it may take
one), whatever its pace: no restart, no wait for a resume, no idle GPU, no other job. The sum of
the floors bounds from below the energy the jobs' GPUs draw under any policy, and so the
cluster's energy, which adds the idle and sleeping GPUs and nodes to it; the floor over a
reference policy's energy at the equal horizon is the lowest ratio to it any policy could reach,
at any mean JCT. For each policy whose summaries are given, the table shows its mean JCT, its
energy at the equal horizon and the jobs' own, and the floor's share of its energy. (A job's
JCT is at least its run time, and a run that splits its samples among configurations spends,
per sample, a convex combination of their seconds and joules, ``Truth.costs``; a cap on the
mean JCT of 0.8x Gavel's, relaxed so, raised this floor by at most 2 % on ``philly-a``,
``llm-b`` and ``gavel-physical`` in a version of this script that computed it: the cap binds
through queueing, which the floor leaves out.)
Nothing is asserted; the table goes into docs/evaluation.md:

    .venv/bin/python -m scripts.energy_floor --scenario philly-a --seeds 1,2,3 \\
        --runs simulation/philly-a --reference gavel

where ``simulation/philly-a`` holds the files of one ``dsfro simulate --compare --out`` run
(``<scenario>-<policy>-s<seed>-summary.json``, written at the comparison's equal horizon).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from scripts.jct_floor import NeverAsked, floor_arguments
from solver.simulate.engine import Simulation
from solver.simulate.scenarios import DEFAULT_SCENARIOS

JOULES_PER_KWH = 3.6e6


def floor_kwh(scenario: str, seed: int) -> float:
    """The jobs' energy floor of the scenario at this seed (kWh)."""
    sc = DEFAULT_SCENARIOS[scenario](seed)
    sims = sc.sim_jobs()
    run = Simulation(
        sc.cluster, sims, NeverAsked(), schedule=sc.power, settings=sc.settings, seed=seed
    )
    joules = sum(run.samples_to_train(s.name) * run.truth.least_joules_per_sample(s) for s in sims)
    return joules / JOULES_PER_KWH


def summaries(runs: Path, scenario: str, seed: int) -> dict[str, dict[str, float]]:
    """Per policy with a summary in `runs`: its energy at the equal horizon and its jobs' own
    (kWh), and its mean JCT (s; nan without a finished job)."""
    out: dict[str, dict[str, float]] = {}
    prefix, suffix = f"{scenario}-", f"-s{seed}-summary.json"
    for path in sorted(runs.glob(f"{prefix}*{suffix}")):
        data = json.loads(path.read_text())
        policy = path.name[len(prefix) : -len(suffix)]
        out[policy] = {
            "horizon": float(data["energy_horizon_kwh"]),
            "jobs": float(data["jobs_energy_kwh"]),
            "jct": float(data["jct_mean_s"] if data["jct_mean_s"] is not None else "nan"),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args, seeds = floor_arguments(argv, __doc__.split("\n\n")[0], "gavel")
    print(
        "| seed | policy | mean JCT (s) | energy, equal horizon (kWh) | jobs' own (kWh) "
        "| its energy / reference's | floor / its energy |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for seed in seeds:
        floor = floor_kwh(args.scenario, seed)
        runs = summaries(args.runs, args.scenario, seed) if args.runs else {}
        reference = runs.get(args.reference)
        share = f"{floor / reference['horizon']:.3f}" if reference else ""
        print(f"| {seed} | floor (the jobs') | | | {floor:,.0f} | {share} | |")
        for policy, e in runs.items():
            ratio = f"{e['horizon'] / reference['horizon']:.3f}" if reference else ""
            print(
                f"| {seed} | {policy} | {e['jct']:,.0f} | {e['horizon']:,.0f} | {e['jobs']:,.0f} "
                f"| {ratio} | {floor / e['horizon']:.3f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
