"""Short budgets: does every Solve answer within its budget, at every size?

For each family (seed 1) and budget, the request is handled as the service handles it
(solver/service/servicer.py): validated, converted (solver.app.convert.problem_from_proto), then
solved by a Solver with the call's Deadline (the budget from the call's start) and the
service's kind of executor, then turned back into protobuf. The clock starts before
validation, as an RPC deadline's does, so validation and conversion count against the budget.
The table gives medians over the repeats of: conversion (validation + problem_from_proto),
the answer's time, how late it is (answer - budget; negative: early), the termination and
where the plan came from, whether the plan passes the checker, and the objective.

`--profile` prints where the time goes before the first plan (validation, conversion,
enumeration, the heuristic's set-up, its first greedy pass, turning it into a plan, the
checker, the protobuf), the quick plan's time (complete, and stopped at once: the plan that only
keeps the running jobs), and the floor: reading the snapshot, the keep-only plan, checking it
and answering.

    .venv/bin/python scripts/bench_deadline.py --repeats 3
    .venv/bin/python scripts/bench_deadline.py --profile
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import problem_from_proto, result_to_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.core.incumbent import Incumbent
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Backend, Problem
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel.configs import build_config_set
from solver.runtime.executors import make_executor
from solver.runtime.pools import Executor
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.heuristic import Heuristic

FAMILIES = ("small", "medium", "large", "xl")
BUDGETS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
LIMITS = Limits(max_time_budget_seconds=600)
T = TypeVar("T")


@dataclass(frozen=True)
class Run:
    convert: float
    answered: float
    termination: str
    valid: bool
    objective: float
    first_plan: float
    check: float


def request_of(family: str, seed: int) -> pb.SolveRequest:
    # Exactly what `dsfro generate --family NAME --seed N` writes.
    return generate(spec_from_args(["--family", family, "--seed", str(seed)]))


def solve_once(
    request: pb.SolveRequest, budget: float, backend: Backend, executor: Executor
) -> Run:
    overrides = pipeline.Overrides(time_budget_seconds=budget, backend=backend)
    request = pipeline.prepare(request, None, overrides)
    start = time.monotonic()
    violations = validate_request(request, LIMITS)
    assert not violations, violations[0]
    problem = problem_from_proto(request, LIMITS)
    converted = time.monotonic()
    solver = Solver(executor=executor)
    result = solver.solve(problem, pipeline.deadline_of(solver, problem, arrival=start))
    result_to_proto(result)
    answered = time.monotonic()
    check_start = time.monotonic()
    bad = check_plan(problem, result.plan.assignments)
    check = time.monotonic() - check_start
    s = result.stats
    source = _source(s.detail, s.backend_used.name)
    return Run(
        convert=converted - start,
        answered=answered - start,
        termination=f"{s.termination.name} ({source})",
        valid=not bad,
        objective=s.objective,
        first_plan=s.first_plan_seconds,
        check=check,
    )


def _source(detail: str, backend: str) -> str:
    return "quick plan" if "quick plan" in detail else backend


def table(families: list[str], budgets: list[float], backends: list[str], repeats: int) -> None:
    executor = make_executor()
    print(
        "| family | backend | budget (s) | convert (s) | answered (s) | late (s), median / max "
        "| termination (plan from) | checker | objective |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    try:
        for family in families:
            request = request_of(family, 1)
            for name in backends:
                for budget in budgets:
                    runs = [
                        solve_once(request, budget, Backend[name], executor) for _ in range(repeats)
                    ]
                    late = [r.answered - budget for r in runs]
                    terms = sorted({r.termination for r in runs})
                    ok = "pass" if all(r.valid for r in runs) else "FAIL"
                    print(
                        f"| {family} | {name} | {budget:.2f} | "
                        f"{statistics.median(r.convert for r in runs):.3f} | "
                        f"{statistics.median(r.answered for r in runs):.3f} | "
                        f"{statistics.median(late):+.3f} / {max(late):+.3f} | "
                        f"{', '.join(terms)} | {ok} | "
                        f"{statistics.median(r.objective for r in runs):.4f} |",
                        flush=True,
                    )
    finally:
        executor.close()


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    t = time.monotonic()
    out = fn()
    return out, time.monotonic() - t


def profile(families: list[str], repeats: int) -> None:
    """Stages before the first plan, medians over the repeats, and the floor."""
    print(
        "| family | nodes / jobs | validate | convert | enumerate | heuristic set-up "
        "| greedy pass | plan (materialize) | checker | to protobuf | quick plan "
        "| keep-only plan | floor |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for family in families:
        request = request_of(family, 1)
        rows = [_stages(request) for _ in range(repeats)]
        problem = problem_from_proto(request, LIMITS)
        med = [statistics.median(col) for col in zip(*rows, strict=True)]
        cells = " | ".join(f"{v:.3f}" for v in med)
        print(
            f"| {family} | {len(problem.cluster.nodes):,} / {len(problem.jobs):,} | {cells} |",
            flush=True,
        )


def _stages(request: pb.SolveRequest) -> list[float]:
    """Seconds of each stage before the first plan, of the quick plan (complete, and stopped
    at once: the plan that only keeps the running jobs), and the floor: reading the snapshot,
    the keep-only plan, checking it and answering."""
    _, validate = _timed(lambda: validate_request(request, LIMITS))
    p, convert = _timed(lambda: problem_from_proto(request, LIMITS))
    configs, enumerate_ = _timed(lambda: build_config_set(p))
    heuristic, setup = _timed(lambda: Heuristic(p, configs))
    state, greedy = _timed(lambda: heuristic.greedy(0.0))
    plan, mat = _timed(lambda: materialize(p, configs, dict(state.choices)))
    _, check = _timed(lambda: check_plan(p, plan.assignments))
    incumbent = Incumbent(p, improve=False)
    incumbent.offer(plan, "heuristic", Backend.HEURISTIC)
    result = incumbent.result(
        wall_seconds=0.0,
        first_plan_seconds=0.0,
        configs=configs,
    )
    _, proto = _timed(lambda: result_to_proto(result))
    quick = _quick_seconds(p, float("inf"))
    keep_only = _quick_seconds(p, float("-inf"))
    floor = validate + convert + keep_only + check + proto
    return [
        validate,
        convert,
        enumerate_,
        setup,
        greedy,
        mat,
        check,
        proto,
        quick,
        keep_only,
        floor,
    ]


def _quick_seconds(problem: Problem, end: float) -> float:
    """The quick plan's time alone (enumeration included), or nan where it does not exist."""
    try:
        from solver.search.quick import quick_plan  # absent before the change
    except ImportError:
        return float("nan")
    s = SolverSettings()
    t = time.monotonic()
    quick_plan(problem, end, chunk_jobs=s.quick_chunk_jobs, check_every=s.quick_check_every)
    return time.monotonic() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--budgets", type=float, nargs="+", default=list(BUDGETS))
    parser.add_argument("--backends", nargs="+", default=["AUTO", "HEURISTIC"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="stages before the first plan")
    args = parser.parse_args()
    print(f"# {' '.join(sys.argv)}", flush=True)
    if args.profile:
        profile(args.families, args.repeats)
    else:
        table(args.families, args.budgets, args.backends, args.repeats)


if __name__ == "__main__":
    main()
