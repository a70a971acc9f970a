"""Per-job node exclusions: what they cost a solve, and what the aggregated LP's rows per
barred set (``solver.search.bound_rules``) buy.

    .venv/bin/python -m scripts.bench_exclusions --budgets 1 2 5 [--stress]

Snapshots: ``instances/medium.json`` and ``--family hetero-power-256 --seed 1`` (power-capped,
five GPU types). Scenarios: ``none``; ``selectors`` (a third of the jobs under one of four
rules, each barring a random fifth of the nodes, seed 5: few rules, many jobs each, as node
selectors and taints give); ``one-rack`` (every waiting job barred from all but the first rack
of each GPU type: a quarter or less of the cluster). With `--stress`, also a 1,024-node
snapshot (``--family hetero-power-256 --nodes 1024 --jobs 1600 --seed 2``) with ``none`` and
``distinct-halves`` (every job its own random half of the nodes, seed 1: no two jobs share a
set, the worst case for every cache keyed by a job's set; a 10 MB request).

The first table: each solved by AUTO at each budget (the plan's objective, the reported bound
and gap, the first plan's time, the wall time). The second (alone with ``--lp-only``): the
aggregated LP alone, with its rows per barred set and its split over racks per rule and without
them (the LP of the code before them, patched in this process), its bound and
its guide placed by the heuristic's guided placement (the solve's ``guided`` step, without its
local search), in process. Nothing is asserted (docs/benchmarks.md keeps the runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import solver.search.bound as bound_module
from scripts.common.exclusions import distinct_halves, one_rack, selectors
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.core.deadline import Deadline
from solver.core.solver import Solver
from solver.domain import Backend, Job, Problem
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.search.bound import solve_aggregate
from solver.search.bound_rules import RackRules, add_exclusion_rows
from solver.search.heuristic import Heuristic
from solver.wire import load_request_json

ROOT = Path(__file__).resolve().parent.parent
LIMITS = Limits(max_time_budget_seconds=600)


def snapshots() -> dict[str, Problem]:
    medium = load_request_json(ROOT / "instances" / "medium.json")
    hetero = generate(spec_from_args(["--family", "hetero-power-256", "--seed", "1"]))
    return {
        "medium": problem_from_proto(medium, LIMITS),
        "hetero-power-256-s1": problem_from_proto(hetero, LIMITS),
    }


SCENARIOS: dict[str, Callable[[Problem], Problem]] = {
    "none": lambda p: p,
    "selectors": selectors,
    "one-rack": one_rack,
}
STRESS: dict[str, Callable[[Problem], Problem]] = {
    "none": lambda p: p,
    "distinct-halves": distinct_halves,
}


def solve(p: Problem, budget: float) -> tuple[float, float | None, float, float]:
    p = dataclasses.replace(
        p, options=dataclasses.replace(p.options, backend=Backend.AUTO, time_budget_seconds=budget)
    )
    solver = Solver()
    try:
        start = time.perf_counter()
        r = solver.solve(p, Deadline.after(budget, solver.settings, len(p.jobs)))
        wall = time.perf_counter() - start
    finally:
        solver.close()
    if check_plan(p, r.plan.assignments, r.plan.layout_changes, r.plan.power_actions):
        raise SystemExit("a plan failed the checker")
    return r.plan.objective.total, r.stats.best_bound, r.stats.first_plan_seconds, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", type=float, nargs="+", default=[1.0, 2.0, 5.0])
    ap.add_argument("--stress", action="store_true", help="also the 1,024-node stress case")
    ap.add_argument("--lp-only", action="store_true", help="the second table only")
    a = ap.parse_args()
    if not a.lp_only:
        solves(a.budgets, a.stress)
    lp_table()


def solves(budgets: list[float], stress: bool) -> None:
    print("| snapshot | scenario | barred jobs | budget s | objective | bound | gap % "
          "| first plan s | wall s |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    cases = [(name, base, SCENARIOS) for name, base in snapshots().items()]
    if stress:
        spec = ["--family", "hetero-power-256", "--nodes", "1024", "--jobs", "1600", "--seed", "2"]
        cases.append(
            ("1024x1600-s2", problem_from_proto(generate(spec_from_args(spec)), LIMITS), STRESS)
        )
    for name, base, scenarios in cases:
        solve(base, 1.0)  # warm-up: the models loaded, the code paths compiled
        for scenario, make in scenarios.items():
            p = make(base)
            barred = sum(bool(j.barred_nodes) for j in p.jobs)
            for budget in budgets:
                value, bound, first, wall = solve(p, budget)
                gap = "" if bound is None else f"{100 * (bound - value) / abs(bound):.3f}"
                shown = "" if bound is None else f"{bound:.2f}"
                print(f"| {name} | {scenario} | {barred} | {budget:g} | {value:.2f} | {shown} "
                      f"| {gap} | {first:.3f} | {wall:.2f} |", flush=True)  # fmt: skip
    print()


def lp_table() -> None:
    rows_on, rule_on = add_exclusion_rows, RackRules.rule
    print("| snapshot | scenario | rows | LP bound | LP s | guide placed | placing s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for name, base in snapshots().items():
        for scenario, make in SCENARIOS.items():
            p = make(base)
            if not any(j.barred_nodes for j in p.jobs):
                continue
            configs = build_config_set(p)
            for rows in ("on", "off"):
                vars(bound_module)["add_exclusion_rows"] = rows_on if rows == "on" else _none
                RackRules.rule = rule_on if rows == "on" else _no_rule  # type: ignore[method-assign]
                lp = solve_aggregate(p, configs)
                start = time.monotonic()
                plan = Heuristic(p, configs).run_guided(lp.choice, start + 60, lp.racks, start)
                placing = time.monotonic() - start
                if check_plan(p, plan.assignments):
                    raise SystemExit("a guided plan failed the checker")
                print(f"| {name} | {scenario} | {rows} | {lp.best_bound or 0.0:.2f} | "
                      f"{lp.wall_seconds:.3f} | {plan.objective.total:.2f} | {placing:.2f} |",
                      flush=True)  # fmt: skip
    vars(bound_module)["add_exclusion_rows"] = rows_on
    RackRules.rule = rule_on  # type: ignore[method-assign]


def _none(*_: object) -> None:
    """The aggregated LP without the rows per barred set."""


def _no_rule(self: RackRules, job: Job) -> frozenset[str]:
    """The aggregated LP's split over racks without the rules."""
    return frozenset()


if __name__ == "__main__":
    main()
