"""Scale benchmark: the instance families of docs/benchmarks.md, median of several seeds.

Each family is generated from the bundled public data (solver.offline.generate, deterministic by
seed) and solved in-process with the family's time budget; the table gives, per family and
backend, the median time to the first valid plan, the time the solve returned, the proven
relative gap, and the termination. With ``--repeat N`` each seed is solved N times in this
process, as a service's solve worker answers call after call (what one process's earlier
solves leave, for its allocator and its garbage collector, is on the later calls' clock); the
slowest first plan of all calls is shown beside the median. Nothing is asserted: the figures
are recorded, with the command, in docs/benchmarks.md:

    .venv/bin/python scripts/bench_scale.py --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from dataclasses import dataclass

from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.core.solver import Solver
from solver.domain import Backend, SolveResult
from solver.offline.generate import FAMILIES as GENERATED_FAMILIES
from solver.offline.generate import generate, spec_from_args
from solver.runtime.executors import make_executor
from solver.runtime.pools import Executor
from solver.scoring.checker import check_plan


@dataclass(frozen=True)
class Family:
    name: str
    nodes: int
    jobs: int
    budget: float
    first_target: str
    final_target: str


TARGETS = {
    "small": ("<= 50 ms", "proven optimal <= 2 s"),
    "medium": ("<= 200 ms", "gap <= 1 % within 5 s"),
    "large": ("<= 1 s", "gap <= 2 % within 20 s"),
    "xl": ("<= 10 s", "gap <= 5 % within 60 s"),
}
FAMILIES = [
    Family(name, nodes, jobs, budget, *TARGETS[name])
    for name, (nodes, jobs, budget) in GENERATED_FAMILIES.items()
]


def run(
    family: Family, seed: int, backend: Backend, executor: Executor, repeat: int = 1
) -> list[SolveResult]:
    """`repeat` solves of the family's snapshot of `seed`, one after another."""
    # Exactly what `dsfro generate --family NAME --seed N` writes.
    request = generate(spec_from_args(["--family", family.name, "--seed", str(seed)]))
    problem = problem_from_proto(request, Limits(max_time_budget_seconds=600))
    problem = dataclasses.replace(
        problem,
        options=dataclasses.replace(
            problem.options, time_budget_seconds=family.budget, backend=backend, seed=seed
        ),
    )
    results = []
    for _ in range(repeat):
        result = Solver(executor=executor).solve(problem)
        if result.plan.assignments:
            violations = check_plan(problem, result.plan.assignments)
            assert not violations, f"{family.name}/{seed}: {violations[0]}"
        results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--families", nargs="+", default=[f.name for f in FAMILIES])
    parser.add_argument("--backends", nargs="+", default=["AUTO"])
    parser.add_argument("--ray-address", default=None, help="run sub-problems on Ray")
    parser.add_argument("--repeat", type=int, default=1, help="solves of each seed in a row")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat: at least 1, got {args.repeat}")
    executor = make_executor(args.ray_address)
    print("| family | GPUs / jobs | backend | first plan (s) | slowest first plan (s) | "
          "final plan (s) | gap | status (plan from) | target: first | target: final |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        for family in (f for f in FAMILIES if f.name in args.families):
            for name in args.backends:
                results = []
                for seed in args.seeds:
                    t = time.monotonic()
                    results += run(family, seed, Backend[name], executor, args.repeat)
                    print(f"  {family.name} seed {seed} {name}: {time.monotonic() - t:.1f} s",
                          file=sys.stderr)
                firsts = [r.stats.first_plan_seconds for r in results]
                first, slowest = statistics.median(firsts), max(firsts)
                final = statistics.median(r.stats.wall_seconds for r in results)
                gaps = [r.stats.relative_gap for r in results]
                gap = (f"{100 * statistics.median(g for g in gaps if g is not None):.3f} %"
                       if all(g is not None for g in gaps) else "-")
                statuses = sorted({f"{r.stats.termination.name} ({r.stats.backend_used.name})"
                                   for r in results})
                print(f"| {family.name} | {family.nodes * 8:,} / {family.jobs:,} | {name} | "
                      f"{first:.3f} | {slowest:.3f} | {final:.3f} | {gap} | "
                      f"{', '.join(statuses)} | "
                      f"{family.first_target} | {family.final_target} |", flush=True)
    finally:
        executor.close()


if __name__ == "__main__":
    main()
