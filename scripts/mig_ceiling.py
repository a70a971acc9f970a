"""How much MIG slices can add, at most, to a small-job scenario (issue 20; docs/evaluation.md,
"MIG slices").

A small job that uses a fraction ``u`` of a GPU (Gavel's colocation measurements,
``data/gavel/colocation.csv``) keeps ``min(1, s / u)`` of its whole-GPU speed on an instance of
share ``s`` (the simulator's truth, ``solver.simulate.slicing``). Per Gavel job type, the best
valid layout of one GPU (every layout of the catalog's geometry, ``solver.mig.valid_layouts``)
filled with jobs of that type gives at most that many job-equivalents of speed, against 1 for the
GPU whole. Times the small jobs' share of a scenario's GPU-hours, that bounds the gain in
completed work per GPU-hour that slices can bring. Nothing is asserted; the table goes into
docs/evaluation.md:

    .venv/bin/python scripts/mig_ceiling.py --scenario mig-a --scenario mig-b
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

from solver.mig import valid_layouts
from solver.perfmodel.mig_catalog import load_mig_catalog
from solver.perfmodel.slices import slice_share
from solver.simulate.scenarios import DEFAULT_SCENARIOS
from solver.simulate.slicing import kept_share, load_fractions


def best_per_gpu(gpu_type: str) -> dict[str, float]:
    """Per Gavel job type: the most job-equivalents of speed one GPU of `gpu_type` gives."""
    geometry = load_mig_catalog()[gpu_type]
    layouts = list(valid_layouts(geometry, geometry.plannable()))
    shares = {p.name: slice_share(geometry, p.name) for p in geometry.plannable()}
    return {
        name: max(sum(kept_share(shares[i.profile], used) for i in layout) for layout in layouts)
        for name, used in load_fractions().items()
    }


def small_share(scenario: str) -> float:
    """The slice jobs' share of the scenario's GPU-hours (as the trace asks for them)."""
    jobs = DEFAULT_SCENARIOS[scenario](0).jobs
    small = sum(j.duration_s * j.num_gpus for j in jobs if j.slices)
    return small / sum(j.duration_s * j.num_gpus for j in jobs)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu-type", default="A100-80GB")
    parser.add_argument("--scenario", action="append", default=[])
    args = parser.parse_args(argv)
    best = best_per_gpu(args.gpu_type)
    values = sorted(best.values())
    print(f"Job-equivalents of speed per partitioned {args.gpu_type} (1 = the GPU whole), over")
    print(f"Gavel's {len(values)} job types with a measured fraction of a GPU:\n")
    print("| min | median | mean | max | types gaining < 15 % |")
    print("| --- | --- | --- | --- | --- |")
    under = sum(v < 1.15 for v in values) / len(values)
    print(
        f"| {values[0]:.3f} | {statistics.median(values):.3f} | {statistics.mean(values):.3f} "
        f"| {values[-1]:.3f} | {under:.0%} |"
    )
    if args.scenario:
        mean_gain = statistics.mean(values) - 1.0
        print("\n| scenario | slice jobs' share of GPU-hours | most work per GPU-hour gained |")
        print("| --- | --- | --- |")
        for name in args.scenario:
            share = small_share(name)
            print(f"| {name} | {share:.1%} | +{share * mean_gain:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
