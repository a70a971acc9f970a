"""End to end over a real gRPC server on loopback: the plan carries each running job's GPU power
limit and keeps its power margin, EvaluatePlan reports the margin, and a bad observed power is
named."""

from __future__ import annotations

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.perfmodel.guard import MIN_POWER_LIMIT_FRACTION
from tests.factories import make_request
from tests.service_helpers import serving

WAIT = 60.0


def tight_request() -> pb.SolveRequest:
    """make_request's cluster with a budget the margin binds on, resnet's draw observed."""
    req = make_request()
    req.cluster.power_budget_watts = 4500.0
    del req.cluster.rack_power_budgets[:]
    resnet = next(j for j in req.jobs if j.name == "resnet")
    resnet.current_allocation.observed_watts = 900.0
    req.options.time_budget.FromSeconds(2)
    return req


def test_plan_carries_power_limits_and_keeps_the_margin(
    stub: scheduler_pb2_grpc.SchedulerServiceStub,
) -> None:
    req = tight_request()
    response = stub.Solve(req, timeout=WAIT)
    types = {t.name: t for t in req.cluster.gpu_types}
    runs = [a for a in response.plan.assignments if a.state == pb.JOB_STATE_RUNNING]
    assert runs
    for a in runs:
        assert a.HasField("power_limit_watts")
        tdp = types[a.gpu_type].tdp_watts
        low = max(types[a.gpu_type].idle_watts, MIN_POWER_LIMIT_FRACTION * tdp)
        assert low - 1e-9 <= a.power_limit_watts <= tdp + 1e-9
    for a in response.plan.assignments:
        if a.state != pb.JOB_STATE_RUNNING:
            assert not a.HasField("power_limit_watts")
    m = response.plan.power_margin
    assert m.budget_watts == 4500.0 and m.z == 2.5
    assert m.margin_watts > 0
    assert m.predicted_watts + m.margin_watts <= m.budget_watts + 1e-6
    assert m.slack_watts == pytest.approx(m.budget_watts - m.predicted_watts - m.margin_watts)
    # The limits' sum plus idle GPUs bounds the draw; the margin is at most that headroom.
    assert m.margin_watts <= m.limited_watts - m.predicted_watts + 1e-6


def test_evaluate_plan_reports_the_margin_of_the_callers_plan(
    stub: scheduler_pb2_grpc.SchedulerServiceStub,
) -> None:
    req = tight_request()
    plan = stub.Solve(req, timeout=WAIT).plan
    ev = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=plan), timeout=WAIT)
    assert ev.valid
    assert ev.power_margin.budget_watts == 4500.0
    assert ev.power_margin.predicted_watts == pytest.approx(plan.power_margin.predicted_watts)
    assert ev.power_margin.margin_watts > 0
    # It reads the plan's power limits, as the solver's own report does.
    assert ev.power_margin.limited_watts == pytest.approx(plan.power_margin.limited_watts)
    assert ev.power_margin.slack_watts == pytest.approx(plan.power_margin.slack_watts)
    unlimited = pb.Plan()
    unlimited.CopyFrom(plan)
    for a in unlimited.assignments:
        a.ClearField("power_limit_watts")
    bare = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=unlimited), timeout=WAIT)
    # Without limits there is no bound: the field is unset, never infinity on the wire.
    assert ev.power_margin.HasField("limited_watts")
    assert bare.valid and not bare.power_margin.HasField("limited_watts")


@pytest.mark.parametrize(
    ("state", "limit", "words"),
    [
        (pb.JOB_STATE_RUNNING, float("nan"), "positive finite"),
        (pb.JOB_STATE_RUNNING, -1.0, "positive finite"),
        (pb.JOB_STATE_RUNNING, 1e308, "must be <= 100000"),  # per GPU: the fuzzer's (seed 96)
        (pb.JOB_STATE_QUEUED, 300.0, "unset for a JOB_STATE_QUEUED"),
    ],
)
def test_a_bad_power_limit_in_a_callers_plan_is_named(
    stub: scheduler_pb2_grpc.SchedulerServiceStub, state: int, limit: float, words: str
) -> None:
    req = tight_request()
    plan = stub.Solve(req, timeout=WAIT).plan
    i = next(k for k, a in enumerate(plan.assignments) if a.state == pb.JOB_STATE_RUNNING)
    if state == pb.JOB_STATE_QUEUED:  # the running job queued, its limit left on
        plan.assignments[i].state = pb.JOB_STATE_QUEUED
        del plan.assignments[i].placement[:]
    plan.assignments[i].power_limit_watts = limit
    with pytest.raises(grpc.RpcError) as e:
        stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=plan), timeout=WAIT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"plan.assignments[{i}].power_limit_watts" in str(e.value.details())
    assert words in str(e.value.details())


@pytest.mark.parametrize("watts", [-5.0, 1e308])
def test_a_negative_or_boundless_observed_power_is_named(
    stub: scheduler_pb2_grpc.SchedulerServiceStub, watts: float
) -> None:
    """1e308 W observed made EvaluatePlan's power margin infinite (the fuzzer, seed 96): a
    job's draw is bounded as a profile point's is (MAX_POWER_WATTS)."""
    req = tight_request()
    resnet = next(i for i, j in enumerate(req.jobs) if j.name == "resnet")
    req.jobs[resnet].current_allocation.observed_watts = watts
    with pytest.raises(grpc.RpcError) as e:
        stub.Solve(req, timeout=WAIT)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    field = f"jobs[{resnet}].current_allocation.observed_watts"
    assert field in str(e.value.details())
    checked = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=req), timeout=WAIT)
    assert not checked.valid and [v.field for v in checked.violations] == [field]


def test_the_server_learns_the_pace_its_workers_solved_at() -> None:
    # Solves run on copies of the server's solver in worker processes: the pace the margin's
    # loop sizes its first solve by comes back with each answer.
    solver = Solver(SolverSettings())
    assert solver.first_plan_per_job is None
    req = tight_request()
    with serving(solver) as (_, stub):
        response = stub.Solve(req, timeout=WAIT)
    first = response.stats.time_to_first_plan.ToTimedelta().total_seconds()
    assert solver.first_plan_per_job is not None and solver.first_plan_per_job > 0
    assert solver.first_plan_per_job * len(req.jobs) == pytest.approx(first, abs=2e-6)
