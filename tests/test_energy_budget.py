"""Energy budget mode (solver.app.energy_budget, docs/objective.md "Energy budget"): the round's
cap is what is left per second of the horizon left, never below the unavoidable draw; every plan
keeps it; bad input names the field."""

from __future__ import annotations

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.energy_budget import capped_budget, energy_cap_watts, unavoidable_watts
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.core.solver import Solver
from solver.perfmodel import budgets
from tests.factories import make_request
from tests.service_helpers import serving

IDLE = 2 * 8 * 50 + 4 * 70  # make_request: two 8-GPU A100 nodes (50 W idle), one 4-GPU H100


def with_energy(joules: float, seconds: float, budget: float | None = None) -> pb.SolveRequest:
    req = make_request()
    req.cluster.ClearField("rack_power_budgets")
    if budget is None:
        req.cluster.ClearField("power_budget_watts")
    else:
        req.cluster.power_budget_watts = budget
    for j in req.jobs:
        j.preemptible = True
    req.cluster.energy_budget.remaining_joules = joules
    req.cluster.energy_budget.horizon_left.FromSeconds(int(seconds))
    return req


def test_the_cap_is_the_allowance_per_second_left() -> None:
    req = with_energy(3600 * 4000.0, 3600)
    assert unavoidable_watts(req) == IDLE
    assert energy_cap_watts(req) == pytest.approx(4000.0)
    budget, cap = capped_budget(req)
    assert budget == pytest.approx(4000.0) and cap == pytest.approx(4000.0)
    req = with_energy(3600 * 4000.0, 3600, budget=3000.0)
    assert capped_budget(req)[0] == pytest.approx(3000.0)  # the tighter of the two


def test_an_exhausted_allowance_leaves_the_unavoidable_draw() -> None:
    req = with_energy(0.0, 60)
    assert energy_cap_watts(req) == pytest.approx(IDLE)
    running = next(j for j in req.jobs if j.HasField("current_allocation"))
    running.preemptible = False
    gpus = sum(len(s.gpu_indices) for s in running.current_allocation.placement)
    assert energy_cap_watts(req) == pytest.approx(IDLE + gpus * (400 - 50))


def test_without_an_energy_budget_nothing_changes() -> None:
    req = make_request()
    assert energy_cap_watts(req) is None
    assert capped_budget(req) == (req.cluster.power_budget_watts, None)


@pytest.mark.parametrize(
    ("joules", "seconds", "field"),
    [
        (-1.0, 60, "cluster.energy_budget.remaining_joules"),
        (float("nan"), 60, "cluster.energy_budget.remaining_joules"),
        (1e18, 60, "cluster.energy_budget.remaining_joules"),
        (1e6, 0, "cluster.energy_budget.horizon_left"),
        (1e6, -5, "cluster.energy_budget.horizon_left"),
        (1e6, 400 * 365 * 86400, "cluster.energy_budget.horizon_left"),
    ],
)
def test_bad_energy_budgets_name_the_field(joules: float, seconds: int, field: str) -> None:
    req = with_energy(joules, 60)
    req.cluster.energy_budget.horizon_left.FromSeconds(seconds)
    assert field in {v.field for v in validate_request(req, Limits())}


def test_every_plan_keeps_the_cap_and_says_so() -> None:
    loose = pipeline.solve_request(with_energy(1e12, 3600), _solver())
    tight_req = with_energy(3600 * (IDLE + 900.0), 3600)
    tight = pipeline.solve_request(tight_req, _solver())
    cluster = tight.problem.cluster
    assert cluster.power_budget_watts == pytest.approx(IDLE + 900.0)
    drawn = budgets.floor_watts(cluster) + sum(
        budgets.extra_watts(cluster, a.config)
        for a in tight.result.plan.assignments
        if a.config is not None
    )
    assert drawn <= IDLE + 900.0 + 1e-6
    assert "energy budget: this round's cap" in tight.result.stats.detail
    running = [a for a in tight.result.plan.assignments if a.config is not None]
    assert tight.result.plan.objective.total < loose.result.plan.objective.total
    assert running, "some job fits 900 W above idle"


def test_over_grpc_a_bad_energy_budget_is_invalid_argument() -> None:
    req = with_energy(-5.0, 60)
    with serving() as (_, stub), pytest.raises(grpc.RpcError) as e:
        stub.Solve(req, timeout=30)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "cluster.energy_budget.remaining_joules" in (e.value.details() or "")


def _solver() -> Solver:
    return Solver()
