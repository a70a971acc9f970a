"""Fairness-mode benchmark: every mode's round on snapshots of 256, 1,024 and 2,048 jobs.

Beside DSFRO's modes, the same snapshot's round of Gavel's max-min policy (its LP, HiGHS) and
of POP-4 over it, as the simulator runs them (``gavel-maxmin``, ``pop-maxmin``: the LP, then
the round's placement), timed the same way; their plans are checked too.

Each snapshot is generated from the bundled public data (``dsfro generate --mix hybrid``,
deterministic by seed), its jobs spread over eight tenant queues of unequal weight, with
attained service, ages and remaining work drawn from the seed; then solved in-process (AUTO)
with the round's budget (5 s up to 256 jobs, else 1 s). The table gives the wall time, the
proven gap where a bound was proven, the termination, and whether the independent checker
passed the plan. Nothing is asserted: the figures are recorded, with the command, in
docs/benchmarks.md:

    .venv/bin/python scripts/bench_fairness.py --seeds 1
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import time

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.core.solver import Solver
from solver.domain import (
    AttainedService,
    Fairness,
    FairnessMode,
    FairnessScope,
    Problem,
    Quota,
    SolveResult,
    TenantQueue,
)
from solver.offline.generate import generate, spec_from_args
from solver.runtime.executors import make_executor
from solver.runtime.pools import Executor
from solver.scoring.checker import check_plan
from solver.simulate.core import JobHistory, RoundInput, SimulationError
from solver.simulate.policies import make_policy
from solver.simulate.rounds import check_decision

SIZES = {256: (128, 5.0), 1024: (512, 1.0), 2048: (1024, 1.0)}
"""Jobs: (nodes of 8 GPUs, time budget in seconds)."""
MODES = [
    (FairnessMode.WEIGHTED_SUM, FairnessScope.JOB),
    (FairnessMode.MAX_MIN, FairnessScope.JOB),
    (FairnessMode.MAX_MIN, FairnessScope.TENANT),
    (FairnessMode.PROPORTIONAL, FairnessScope.JOB),
    (FairnessMode.PROPORTIONAL, FairnessScope.TENANT),
    (FairnessMode.DRF, FairnessScope.TENANT),
    (FairnessMode.FINISH_TIME, FairnessScope.JOB),
]
TENANTS = 8


def snapshot(jobs: int, seed: int) -> Problem:
    """The generated snapshot with tenants, attained service, ages and remaining work."""
    nodes, budget = SIZES[jobs]
    argv = ["--mix", "hybrid", "--nodes", str(nodes), "--jobs", str(jobs), "--seed", str(seed)]
    request = generate(spec_from_args(argv))
    p = problem_from_proto(request, Limits(max_time_budget_seconds=600))
    rnd = random.Random(seed)
    # Weights differ; quotas do not bind (every type's GPUs): fairness, not quota, decides.
    whole = {
        t: float(sum(n.gpu_count for n in p.cluster.nodes if n.gpu_type == t))
        for t in p.cluster.gpu_types
    }
    queues = tuple(
        TenantQueue(
            f"t{k}",
            weight=rnd.choice([1.0, 2.0, 4.0]),
            quotas={t: Quota(g) for t, g in whole.items()},
        )
        for k in range(TENANTS)
    )
    out = []
    for j in p.jobs:
        served = rnd.uniform(0, 3600) * j.min_gpus
        out.append(
            dataclasses.replace(
                j,
                tenant=f"t{rnd.randrange(TENANTS)}",
                attained=AttainedService(served, served / max(j.min_gpus, 1)),
                age_seconds=rnd.uniform(0, 86400),
                remaining_samples=j.remaining_samples or rnd.uniform(1e5, 1e8),
            )
        )
    return dataclasses.replace(
        p,
        cluster=dataclasses.replace(p.cluster, queues=queues),
        jobs=tuple(out),
        options=dataclasses.replace(p.options, time_budget_seconds=budget, seed=seed),
    )


def run(
    problem: Problem, mode: FairnessMode, scope: FairnessScope, executor: Executor
) -> tuple[SolveResult, float, bool]:
    p = dataclasses.replace(problem, fairness=Fairness(mode, scope))
    t = time.monotonic()
    result = Solver(executor=executor).solve(p)
    wall = time.monotonic() - t
    checked = not check_plan(p, result.plan.assignments)
    return result, wall, checked


def baseline_round(problem: Problem, name: str) -> tuple[float, bool]:
    """Seconds of one round of a simulator baseline on the snapshot, and whether the checker
    passed its plan (every job submitted at 0, none has run: the first round)."""
    history = {j.name: JobHistory(0.0, j.min_gpus) for j in problem.jobs}
    round_input = RoundInput(pb.SolveRequest(), problem, 0.0, 0, history, 300.0)
    policy = make_policy(name)
    t = time.monotonic()
    decision = policy.decide(round_input)
    wall = time.monotonic() - t
    policy.close()
    try:
        check_decision(problem, decision, name, 0.0)
    except SimulationError:
        return wall, False
    return wall, True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    args = parser.parse_args()
    executor = make_executor(None)
    print(
        "| jobs / GPUs | budget | mode | scope | seed | wall (s) | gap | "
        "termination (plan from) | checked | F |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        for jobs in args.sizes:
            for seed in args.seeds:
                t = time.monotonic()
                problem = snapshot(jobs, seed)
                print(
                    f"  snapshot {jobs} jobs seed {seed}: {time.monotonic() - t:.1f} s",
                    file=sys.stderr,
                )
                gpus = sum(n.gpu_count for n in problem.cluster.nodes)
                for mode, scope in MODES:
                    r, wall, checked = run(problem, mode, scope, executor)
                    s = r.stats
                    gap = "-" if s.relative_gap is None else f"{100 * s.relative_gap:.2f} %"
                    print(
                        f"| {jobs:,} / {gpus:,} | {problem.options.time_budget_seconds:g} s | "
                        f"{mode.name} | {scope.name} | {seed} | {wall:.3f} | {gap} | "
                        f"{s.termination.name} ({s.backend_used.name}) | "
                        f"{'yes' if checked else 'NO'} | "
                        f"{r.plan.objective.fairness:.4g} |",
                        flush=True,
                    )
                # After DSFRO's rounds: a HiGHS interior-point solve in this process slows
                # the later HiGHS MIPs of the solver (its thread pool is process-wide).
                for name in ("gavel-maxmin", "pop-maxmin"):
                    wall, checked = baseline_round(problem, name)
                    print(
                        f"| {jobs:,} / {gpus:,} | - | {name} (baseline) | - | {seed} | "
                        f"{wall:.3f} | - | - | {'yes' if checked else 'NO'} | - |",
                        flush=True,
                    )
    finally:
        executor.close()


if __name__ == "__main__":
    main()
