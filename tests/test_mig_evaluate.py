"""EvaluatePlan with MIG slices (solver.scoring.evaluation, solver.app.validation.plan_mig):
a solved plan with instances scores as the solve did; plans that break the slice rules are
reported as violations, malformed ones as INVALID_ARGUMENT with the field path."""

from __future__ import annotations

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from tests.service_helpers import serving
from tests.test_mig_solve import seven_small_request

ONE_G = "1g.10gb"


def solved() -> tuple[pb.SolveRequest, pb.SolveResponse]:
    req = seven_small_request()
    with serving() as (_, stub):
        return req, stub.Solve(req, timeout=30)


@pytest.fixture(scope="module")
def solved_plan() -> tuple[pb.SolveRequest, pb.SolveResponse]:
    return solved()


def evaluate(req: pb.SolveRequest, plan: pb.Plan) -> pb.EvaluatePlanResponse:
    with serving() as (_, stub):
        out: pb.EvaluatePlanResponse = stub.EvaluatePlan(
            pb.EvaluatePlanRequest(request=req, plan=plan), timeout=30
        )
        return out


def test_the_solved_plan_with_instances_is_valid_and_scores_as_solved(
    solved_plan: tuple[pb.SolveRequest, pb.SolveResponse],
) -> None:
    req, response = solved_plan
    assert len(response.plan.layout_changes) == 1
    out = evaluate(req, response.plan)
    assert out.valid, out.violations
    assert out.objective.total == pytest.approx(response.plan.objective.total, abs=1e-9)
    assert out.objective.migration == pytest.approx(1.0)  # the one reconfiguration


def test_two_jobs_on_one_instance_and_a_missing_layout_change_are_violations(
    solved_plan: tuple[pb.SolveRequest, pb.SolveResponse],
) -> None:
    req, response = solved_plan
    plan = pb.Plan()
    plan.CopyFrom(response.plan)
    plan.assignments[1].mig_instance.start = plan.assignments[0].mig_instance.start
    out = evaluate(req, plan)
    assert not out.valid
    assert [(v.constraint, v.job) for v in out.violations] == [("mig_capacity", "s1")]
    del plan.layout_changes[:]
    plan.assignments[1].mig_instance.start = 6 - plan.assignments[0].mig_instance.start
    out = evaluate(req, plan)
    assert not out.valid and not out.HasField("objective")


def test_a_job_that_does_not_allow_slices_cannot_run_on_one(
    solved_plan: tuple[pb.SolveRequest, pb.SolveResponse],
) -> None:
    req, response = solved_plan
    other = pb.SolveRequest()
    other.CopyFrom(req)
    other.jobs[0].ClearField("slices")
    out = evaluate(other, response.plan)
    assert not out.valid
    mine = [v for v in out.violations if v.job == "s0"]
    assert mine[0].constraint == "configuration", mine
    assert "does not allow slices" in mine[0].message


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda p: setattr(p.assignments[0].mig_instance, "profile", "9g.99gb"),
         "plan.assignments[0].mig_instance.profile"),
        (lambda p: setattr(p.layout_changes[0], "node", "nowhere"), "plan.layout_changes[0].node"),
        (lambda p: setattr(p.layout_changes[0].layout, "gpu_index", 3),
         "plan.layout_changes[0].layout.gpu_index"),
        (lambda p: setattr(p.layout_changes[0].layout.instances[0], "profile", "x"),
         "plan.layout_changes[0].layout.instances[0].profile"),
        (lambda p: setattr(p.assignments[0], "data_parallel", 2),
         "plan.assignments[0].data_parallel"),
    ],
)  # fmt: skip
def test_malformed_mig_fields_are_invalid_argument_with_the_field(
    solved_plan: tuple[pb.SolveRequest, pb.SolveResponse], edit: object, field: str
) -> None:
    req, response = solved_plan
    plan = pb.Plan()
    plan.CopyFrom(response.plan)
    edit(plan)  # type: ignore[operator]
    with pytest.raises(grpc.RpcError) as e:
        evaluate(req, plan)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert field in (e.value.details() or "")
