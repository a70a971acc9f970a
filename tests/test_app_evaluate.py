"""EvaluatePlan scores a plan as the solver scores its own (solver.app.evaluate): under a grid
forecast the energy weight is scaled as the solver scales it, and the jobs the carbon rule
defers and the plan queues are out of the round, so DSFRO's own plan evaluates to the objective
its answer reports (real gRPC server on loopback)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import allocations_from_proto, problem_from_proto
from solver.app.evaluate import evaluate_plan
from solver.app.limits import Limits
from solver.app.profile import profile_from_dict
from solver.core.settings import SolverSettings
from solver.domain import Allocation, GpuSlice, Problem, Shape
from tests.service_helpers import serving
from tests.test_carbon_wire import carbon_request

FIELDS = ("total", "throughput", "energy", "deadline", "fairness", "aging", "completion")


def _scaled(req: pb.SolveRequest) -> pb.SolveRequest:
    """carbon_request() with the energy weight scaled (the intensity now, 420, is 1.6x the
    day's mean) and a weight on energy large enough to be seen."""
    req.cluster.grid.scale_energy = True
    req.weights.energy = 1.0
    return req


def _completion(req: pb.SolveRequest) -> pb.SolveRequest:
    """carbon_request() with completion priorities: `bert`, deferred, ranks among the jobs."""
    req.weights.completion = 10.0
    return req


def _max_min(req: pb.SolveRequest) -> pb.SolveRequest:
    """carbon_request() under max-min fairness, whose equal share counts the round's jobs."""
    req.fairness.mode = pb.FAIRNESS_MODE_MAX_MIN
    req.weights.fairness = 5.0
    return req


@pytest.mark.parametrize("edit", [_scaled, _completion, _max_min], ids=lambda f: f.__name__)
def test_dsfro_plan_evaluates_to_its_reported_objective(
    edit: Callable[[pb.SolveRequest], pb.SolveRequest],
) -> None:
    req = edit(carbon_request())
    with serving() as (_, stub):
        answer = stub.Solve(req, timeout=30)
        deferred = [a.job for a in answer.plan.assignments if a.queue_reason]
        assert "bert" in deferred
        out = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=answer.plan), timeout=30)
    assert out.valid, out.violations
    for field in FIELDS:
        assert getattr(out.objective, field) == pytest.approx(
            getattr(answer.plan.objective, field), rel=1e-9, abs=1e-9
        ), field
    assert out.objective.total == pytest.approx(answer.stats.objective, rel=1e-9)


def test_a_plan_that_runs_a_deferred_job_is_scored_with_it() -> None:
    """The rule leaves out only what the plan queues: a plan running `bert` counts its work."""
    req = _scaled(carbon_request())
    problem = problem_from_proto(req, Limits())
    with serving() as (_, stub):
        answer = stub.Solve(req, timeout=30)
    allocations = allocations_from_proto(answer.plan)
    queued = evaluate_plan(problem, allocations, settings=SolverSettings())
    assert queued.plan is not None and not queued.violations
    bert = next(j for j in problem.jobs if j.name == "bert")
    assert allocations["bert"] is None and bert.current is None
    # bert on the GPUs `finetune` does not use: the plan is valid and its throughput counts.
    free = _free_allocation(problem, allocations)
    running = evaluate_plan(problem, {**allocations, "bert": free}, settings=SolverSettings())
    assert running.plan is not None, running.violations
    assert running.plan.objective.throughput > queued.plan.objective.throughput


def _free_allocation(problem: Problem, allocations: Mapping[str, Allocation | None]) -> Allocation:
    """One GPU no allocation holds, whole, at shape 1x1x1 and its type's top clock."""
    used = {
        (slot.node, g)
        for a in allocations.values()
        if a is not None
        for slot in a.placement
        for g in slot.gpu_indices
    }
    for node in problem.cluster.nodes:
        for g in node.available_gpu_indices:
            if (node.name, g) not in used:
                clock = problem.cluster.gpu_types[node.gpu_type].max_clock_mhz
                return Allocation(
                    Shape(node.gpu_type, 1, 1, 1), clock, (GpuSlice(node.name, (g,)),)
                )
    raise AssertionError("no free GPU")


def test_the_servers_profile_weighs_evaluate_plan_as_it_weighs_solve() -> None:
    """A server run with a profile fills the weights the request leaves unset, in Solve and in
    EvaluatePlan alike (before, EvaluatePlan scored with the defaults)."""
    profile = profile_from_dict({"weights": {"energy": 2.0, "migration": 3.0, "locality": 0.5}})
    req = carbon_request()
    with serving(profile=profile) as (_, stub):
        answer = stub.Solve(req, timeout=30)
        out = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=answer.plan), timeout=30)
    assert out.valid, out.violations
    assert answer.plan.objective.energy > 0
    assert out.objective.total == pytest.approx(answer.stats.objective, rel=1e-9)
