"""A plan from a solve on a tightened budget is scored on the request's problem
(solver.core.power_guard): its objective is EvaluatePlan's."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import allocations_from_proto
from solver.app.convert_power import power_limits_from_proto
from solver.app.limits import Limits
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.scoring.evaluation import evaluate_allocations
from solver.wire import load_request_json

SNAPSHOT = Path(__file__).resolve().parent / "data" / "power_guard" / "drf-tenant-tightened.json"
"""4 nodes, 8 jobs, five tenant queues in a cohort, DRF by tenant, a cluster budget at 30 % of
peak: case 20 of `scripts/bench_unseen.py --seed 27 --cases 30 --request-features`, where the
answer's objective was 8.2807 and EvaluatePlan's 8.2664 (DRF's watts share had been taken of
the tightened budget)."""


def test_a_plan_solved_on_a_tightened_budget_has_the_objective_evaluateplan_gives_it() -> None:
    request = load_request_json(SNAPSHOT)
    request.options.time_budget.FromSeconds(3)
    request.options.backend = pb.BACKEND_HEURISTIC
    solved = pipeline.solve_request(request, Solver(SolverSettings(power_margin_z=2.5)))
    response = solved.response()
    assert "power margin" in response.stats.detail  # the margin's path was taken
    problem = pipeline.to_problem(request, Limits())
    evaluation = evaluate_allocations(
        problem,
        allocations_from_proto(response.plan),
        power_limits=power_limits_from_proto(response.plan),
    )
    assert evaluation.plan is not None, evaluation.violations
    scored = evaluation.plan.objective
    assert response.stats.objective == pytest.approx(scored.total, abs=1e-9)
    assert response.plan.objective.fairness == pytest.approx(scored.fairness, abs=1e-9)
