"""How far each policy's mean JCT is from the floor no policy can go below (issue 17;
docs/evaluation.md, "Issue 17: shared clusters").

A job's floor is its work at its fastest true pace (``Truth.fastest_rate``: any GPU type it runs
on, any GPU count it may take, full clock), started at its submission: no queueing, no restart,
no quota, no other job. The mean of the floors bounds every policy's mean JCT from below; the
floor over a reference policy's mean JCT is the lowest ratio to it any policy could reach. For
each policy whose per-job files are given, the table shows its mean JCT, its excess over the
floor, and the share of that excess carried by its five jobs furthest above their floors (where
a policy loses its time). Nothing is asserted; the table goes into docs/evaluation.md:

    .venv/bin/python scripts/jct_floor.py --scenario tenants-a --seeds 1,2,3 \\
        --runs simulation/tenants-a --reference gavel-maxmin

where ``simulation/tenants-a`` holds ``dsfro simulate --out`` files
(``<scenario>-<policy>-s<seed>-jobs.csv``).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from solver.simulate.core import Decision, RoundInput
from solver.simulate.engine import Simulation
from solver.simulate.scenarios import DEFAULT_SCENARIOS

TOP = 5
"""Jobs furthest above their floor whose share of the excess the table shows."""


class NeverAsked:
    """A policy for a simulation that is built to read its truth, never run."""

    name = "none"

    def decide(self, round_input: RoundInput) -> Decision:
        raise RuntimeError("the floor's simulation is not run")

    def close(self) -> None:
        pass


def floors(scenario: str, seed: int) -> dict[str, float]:
    """Each job's JCT floor (s): its work at its fastest true pace."""
    sc = DEFAULT_SCENARIOS[scenario](seed)
    sims = sc.sim_jobs()
    run = Simulation(
        sc.cluster, sims, NeverAsked(), schedule=sc.power, settings=sc.settings, seed=seed
    )
    return {s.name: run.samples_to_train(s.name) / run.truth.fastest_rate(s) for s in sims}


def policy_jcts(runs: Path, scenario: str, seed: int) -> dict[str, dict[str, float]]:
    """Per policy with a job file in `runs`: each finished job's JCT (s)."""
    out: dict[str, dict[str, float]] = {}
    prefix, suffix = f"{scenario}-", f"-s{seed}-jobs.csv"
    for path in sorted(runs.glob(f"{prefix}*{suffix}")):
        policy = path.name[len(prefix) : -len(suffix)]
        with path.open(newline="") as f:
            out[policy] = {r["job_id"]: float(r["jct_s"]) for r in csv.DictReader(f) if r["jct_s"]}
    return out


def floor_arguments(
    argv: Sequence[str] | None, description: str, reference: str
) -> tuple[argparse.Namespace, list[int]]:
    """What a floor's table takes (this one's and scripts/energy_floor.py's): the scenario, its
    seeds, a directory of runs and the policy ratios are to."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--scenario", required=True, choices=sorted(DEFAULT_SCENARIOS))
    parser.add_argument("--seeds", default="1", help="comma-separated, e.g. 1,2,3")
    parser.add_argument("--runs", type=Path, help="a directory of dsfro simulate --out files")
    parser.add_argument("--reference", default=reference, help="the policy ratios are to")
    args = parser.parse_args(argv)
    return args, [int(s) for s in args.seeds.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    args, seeds = floor_arguments(argv, __doc__.split("\n\n")[0], "gavel-maxmin")
    print("| seed | policy | mean JCT (s) | / floor | / reference | floor / reference "
          f"| excess over the floor | its share in the {TOP} worst jobs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for seed in seeds:
        floor = floors(args.scenario, seed)
        mean_floor = statistics.mean(floor.values())
        print(f"| {seed} | floor | {mean_floor:,.0f} | 1 | | | | |")
        jcts = policy_jcts(args.runs, args.scenario, seed) if args.runs else {}
        reference = jcts.get(args.reference)
        ref_mean = statistics.mean(reference.values()) if reference else None
        for policy, jct in jcts.items():
            if set(jct) != set(floor):
                print(f"| {seed} | {policy} | (not every job finished) | | | | | |")
                continue
            mean = statistics.mean(jct.values())
            excess = sorted((jct[j] - floor[j] for j in floor), reverse=True)
            total = sum(excess)
            top = sum(excess[:TOP]) / total if total > 0 else 0.0
            ratio = f"{mean / ref_mean:.3f}" if ref_mean else ""
            floor_ratio = f"{mean_floor / ref_mean:.3f}" if ref_mean else ""
            print(f"| {seed} | {policy} | {mean:,.0f} | {mean / mean_floor:.3f} | {ratio} "
                  f"| {floor_ratio} | {total / len(excess):,.0f} s per job | {top:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
