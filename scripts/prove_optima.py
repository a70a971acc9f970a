"""Prove the optimum of instance files with HiGHS on the full model, and store it.

For each file: the validated problem (as ``dsfro solve`` reads it), every job's configurations,
the full formulation (``solver.exact.formulation.build``) solved by HiGHS with relative gap 0 on
one thread, the plan checked by ``solver.scoring.checker`` and re-scored by
``solver.scoring.objective``. One entry per instance goes into the JSON file ``--out`` (entries of
other instances are kept), written after every instance so that a long run leaves its finished
proofs behind. An instance whose proof does not close in the time limit is stored with its best
plan's objective, the proven bound and ``proven_optimal: false``::

    nice -n 10 .venv/bin/python scripts/prove_optima.py instances/hetero-power/*.json \\
        --time-limit 1800 --out instances/hetero-power/optima.json
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.domain import Backend, Problem
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus
from solver.exact.solve import ExactResult, solve_full
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import PlanView, check_plan, rack_watts
from solver.scoring.objective import score_plan

SCORE_TOLERANCE = 1e-9
"""Relative difference allowed between the plan's objective and its re-scoring."""


def load_problem(path: Path) -> Problem:
    """The validated domain problem of an instance file, as ``dsfro solve`` reads it."""
    return pipeline.to_problem(load_request_json(path), Limits())


def relative_gap(objective: float, bound: float | None) -> float | None:
    """(bound - objective) / max(|objective|, 1e-9), the gap the service reports."""
    if bound is None:
        return None
    return (bound - objective) / max(abs(objective), 1e-9)


def prove(path: Path, time_limit: float, threads: int, seed: int) -> dict[str, Any]:
    """Solve one instance's full model on HiGHS and return its optima.json entry."""
    problem = load_problem(path)
    configs = build_config_set(problem)
    start = time.monotonic()
    model = formulation.build(problem, configs)
    build_seconds = time.monotonic() - start
    result = solve_full(
        model,
        Backend.HIGHS,
        options=ExactOptions(time_limit=time_limit, relative_gap=0.0, seed=seed, threads=threads),
    )
    objective = checked_objective(problem, result, configs.best_samples_per_second)
    proven = result.status is SolverStatus.OPTIMAL
    assert result.plan is not None
    view = PlanView(problem, result.plan.assignments)
    return {
        "instance": path.name,
        "instance_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "objective": objective,
        "best_bound": result.best_bound,
        "relative_gap": relative_gap(objective, result.best_bound),
        "proven_optimal": proven,
        "status": result.status.value,
        "proof_seconds": round(result.wall_seconds, 2),
        "build_seconds": round(build_seconds, 2),
        "variables": len(model.variables),
        "configurations": configs.num_configurations,
        "plan_watts": round(sum(rack_watts(view).values()), 1),
        "power_budget_watts": problem.cluster.power_budget_watts,
        "gpus_used": len(view.used),
        "gpus_available": sum(n.available_gpus for n in problem.cluster.nodes),
        "time_limit_seconds": time_limit,
        "threads": threads,
        "highs_version": metadata.version("highspy"),
        "date": datetime.date.today().isoformat(),
        "detail": result.detail,
    }


def checked_objective(problem: Problem, result: ExactResult, best: Mapping[str, float]) -> float:
    """The plan's objective after the checker passed it and the objective re-scored it."""
    if result.plan is None:
        raise RuntimeError(f"HiGHS found no plan: {result.status.value} {result.detail}")
    violations = check_plan(problem, result.plan.assignments)
    if violations:
        raise RuntimeError(f"HiGHS plan fails the checker: {violations[0]}")
    total = result.plan.objective.total
    rescored = score_plan(problem, result.plan.assignments, best).total
    if abs(rescored - total) > SCORE_TOLERANCE * max(1.0, abs(total)):
        raise RuntimeError(f"objective {total} differs from its re-scoring {rescored}")
    return total


def store(out: Path, entry: dict[str, Any]) -> None:
    """Replace the instance's entry in ``out`` (created if missing), entries sorted by name."""
    entries = json.loads(out.read_text())["instances"] if out.exists() else []
    entries = [e for e in entries if e["instance"] != entry["instance"]] + [entry]
    entries.sort(key=lambda e: e["instance"])
    doc = {
        "description": (
            "Optima of the instances beside this file: the full model (solver.exact.formulation) "
            "solved by HiGHS with relative gap 0 by scripts/prove_optima.py. objective: the "
            "plan's objective (solver.scoring.objective), checked by solver.scoring.checker; "
            "best_bound: HiGHS's proven upper bound; proven_optimal: HiGHS closed the gap; "
            "proof_seconds: HiGHS's wall time on a shared 2-core machine."
        ),
        "instances": entries,
    }
    out.write_text(json.dumps(doc, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--time-limit", type=float, default=1800.0, help="seconds per instance")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("instances/hetero-power/optima.json"))
    args = parser.parse_args()
    for path in args.files:
        entry = prove(path, args.time_limit, args.threads, args.seed)
        store(args.out, entry)
        print(
            f"{path.name}: objective {entry['objective']:.6f} bound {entry['best_bound']} "
            f"gap {entry['relative_gap']} {entry['status']} in {entry['proof_seconds']} s",
            file=sys.stderr,
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
