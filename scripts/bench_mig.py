"""Solve time with MIG slices (issue 20): 1,024 GPUs of the modern mix (A100-80GB, H100-80GB,
H200 with MIG geometries, L40S without), 1,000 jobs, half of them one-GPU slice jobs, from
``dsfro generate --mix modern --profile-share 0 --nodes 128 --jobs 1000 --slice-share 0.5``.

For each seed and backend (HEURISTIC, AUTO) at a 5 s budget, in this process as the service's
worker solves it: the first checked plan's time, the wall time, the objective, the proven bound
(the joint model's or the slice aggregate's, solver.core.mig.slice_bound) and the gap, the jobs
on instances and the layout changes. Every plan is checked by ``solver.scoring.checker``.
Nothing is asserted; the table goes, with the command, into docs/benchmarks.md:

    .venv/bin/python scripts/bench_mig.py --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence

from solver.app import pipeline
from solver.app.limits import Limits
from solver.core.deadline import Deadline
from solver.core.solver import Solver
from solver.domain import Backend, Plan, SolveOptions
from solver.offline.generate import generate, spec_from_args
from solver.scoring.checker import check_plan

GENERATE = "--mix modern --profile-share 0 --nodes 128 --jobs 1000 --slice-share 0.5"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--budget", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument(
        "--generate", default="", help="more `dsfro generate` options, e.g. a power budget"
    )
    args = parser.parse_args(argv)
    solver = Solver()
    print("| seed | backend | first plan (s) | wall (s) | objective | bound | gap | on slices "
          "| layout changes | checker |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for seed in args.seeds:
        command = [*GENERATE.split(), *args.generate.split(), "--seed", str(seed)]
        request = generate(spec_from_args(command))
        base = pipeline.to_problem(request, Limits(max_time_budget_seconds=600))
        for backend in (Backend.HEURISTIC, Backend.AUTO):
            options = SolveOptions(args.budget, backend, seed=seed)
            problem = dataclasses.replace(base, options=options)
            first: list[float] = []
            start = time.monotonic()

            def on_first(_: Plan, first: list[float] = first, start: float = start) -> None:
                first.append(time.monotonic() - start)

            deadline = Deadline.after(args.budget, solver.settings, len(problem.jobs))
            result = solver.solve(problem, deadline, on_first_plan=on_first)
            wall = time.monotonic() - start
            plan, s = result.plan, result.stats
            ok = not check_plan(problem, plan.assignments, plan.layout_changes)
            on = sum(1 for a in plan.assignments if a.mig is not None)
            bound = "-" if s.best_bound is None else f"{s.best_bound:.3f}"
            gap = "-" if s.relative_gap is None else f"{100 * s.relative_gap:.3f} %"
            print(f"| {seed} | {backend.value} | {first[0] if first else s.first_plan_seconds:.3f} "
                  f"| {wall:.2f} | {s.objective:.3f} | {bound} | {gap} | {on} "
                  f"| {len(plan.layout_changes)} | {'ok' if ok else 'VIOLATED'} |")  # fmt: skip
            sys.stdout.flush()
    solver.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
