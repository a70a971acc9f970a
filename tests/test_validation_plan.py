"""validate_plan on caller-made plans (solver.app.validation.plan): a well-formed plan is valid,
and each bad assignment is reported with its exact path."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.validation import validate_plan
from tests.factories import make_request
from tests.validation_helpers import _set, make_plan

PA = "plan.assignments"

PLAN_CASES = [
    pytest.param(
        lambda p: p.assignments.add().CopyFrom(p.assignments[1]),
        f"{PA}[3].job",
        'duplicate assignment for job "bert" (also plan.assignments[1])',
        id="dup",
    ),
    pytest.param(
        lambda p: p.assignments.add(job="ghost", state=pb.JOB_STATE_QUEUED),
        f"{PA}[3].job",
        'unknown job "ghost"',
        id="unknown-job",
    ),
    pytest.param(
        lambda p: p.assignments.add(state=pb.JOB_STATE_QUEUED),
        f"{PA}[3].job",
        "must not be empty",
        id="no-job",
    ),
    pytest.param(
        lambda p: p.assignments.pop(1), PA, 'no assignment for job "bert"', id="missing-job"
    ),
    pytest.param(
        _set("assignments[0].placement[0].node", "nope"),
        f"{PA}[0].placement[0].node",
        'unknown node "nope"',
        id="unknown-node",
    ),
    pytest.param(
        _set("assignments[2].placement[0].gpu_indices[0]", 8),
        f"{PA}[2].placement[0].gpu_indices[0]",
        "must be in [0, 8)",
        id="index",
    ),
    pytest.param(
        _set("assignments[0].gpu_type", "V100"),
        f"{PA}[0].gpu_type",
        'unknown gpu type "V100"',
        id="unknown-type",
    ),
    pytest.param(
        _set("assignments[0].data_parallel", 0),
        f"{PA}[0].data_parallel",
        "must be >= 1",
        id="no-shape",
    ),
    pytest.param(
        _set("assignments[0].sm_clock_mhz", 0),
        f"{PA}[0].sm_clock_mhz",
        "0 is not a supported clock",
        id="no-clock",
    ),
    pytest.param(
        _set("assignments[0].num_gpus", 3),
        f"{PA}[0].num_gpus",
        "(2) when set, got 3",
        id="num-gpus",
    ),
    pytest.param(
        lambda p: p.assignments[0].ClearField("placement"),
        f"{PA}[0].placement",
        "must not be empty for a JOB_STATE_RUNNING assignment",
        id="no-placement",
    ),
    pytest.param(
        lambda p: p.assignments[1].placement.add(node="a100-1", gpu_indices=[0]),
        f"{PA}[1].placement",
        "must be empty for a JOB_STATE_QUEUED assignment",
        id="queued-with-gpus",
    ),
    pytest.param(
        _set("assignments[1].state", pb.JOB_STATE_UNSPECIFIED),
        f"{PA}[1].state",
        "must be JOB_STATE_RUNNING or JOB_STATE_QUEUED",
        id="no-state",
    ),
]


def test_a_well_formed_plan_is_valid() -> None:
    assert validate_plan(make_request(), make_plan()) == []


@pytest.mark.parametrize(("mutate", "field", "text"), PLAN_CASES)
def test_bad_plans_are_reported_at_their_field(
    mutate: Callable[[pb.Plan], object], field: str, text: str
) -> None:
    plan = make_plan()
    mutate(plan)
    violations = validate_plan(make_request(), plan)
    assert [v.field for v in violations] == [field], violations
    assert text in violations[0].description


def test_a_running_assignment_without_shape_reports_each_field() -> None:
    plan = make_plan()
    plan.assignments[0].CopyFrom(pb.JobAssignment(job="llm", state=pb.JOB_STATE_RUNNING))
    assert [v.field for v in validate_plan(make_request(), plan)] == [
        f"{PA}[0].gpu_type",
        f"{PA}[0].data_parallel",
        f"{PA}[0].tensor_parallel",
        f"{PA}[0].pipeline_parallel",
        f"{PA}[0].placement",
    ]
