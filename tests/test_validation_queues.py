"""Tenant queues on the wire: each bad field is an INVALID_ARGUMENT naming it, and a valid
snapshot with queues converts and answers with each queue's usage and the borrowed jobs."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import FieldViolation, validate_request
from solver.domain import Quota
from tests.factories import A100_80GB, H100_SXM, make_request
from tests.service_helpers import WAIT, serving
from tests.validation_helpers import INF, NAN, Mutation


def with_queues() -> pb.SolveRequest:
    """make_request() with a queue per tenant: research and nlp share a cohort."""
    r = make_request()
    r.cluster.queues.add(
        name="research",
        cohort="ml",
        weight=2.0,
        quotas=[
            pb.ResourceQuota(resource=A100_80GB, nominal=4, borrowing_limit=8),
            pb.ResourceQuota(resource="power", nominal=5000),
        ],
    )
    r.cluster.queues.add(
        name="nlp",
        cohort="ml",
        quotas=[pb.ResourceQuota(resource=A100_80GB, nominal=8, lending_limit=4)],
    )
    r.cluster.queues.add(
        name="vision",
        quotas=[
            pb.ResourceQuota(resource=A100_80GB, nominal=4),
            pb.ResourceQuota(resource=H100_SXM, nominal=4),
        ],
    )
    return r


def test_a_request_with_queues_is_valid_and_converts() -> None:
    r = with_queues()
    r.jobs[0].attained.gpu_seconds = 3600
    assert validate_request(r, Limits()) == []
    p = problem_from_proto(r, Limits())
    research = p.cluster.queue_of("research")
    assert research is not None and research.weight == 2.0 and research.cohort == "ml"
    assert research.quotas[A100_80GB] == Quota(4, 8, None)
    nlp = p.cluster.queue_of("nlp")
    assert nlp is not None and nlp.quotas[A100_80GB].guaranteed == 4
    assert p.jobs[0].attained.gpu_seconds == 3600
    assert p.cluster.queue_of("") is None  # no default queue declared: not limited


def _quota(r: pb.SolveRequest, q: int = 0, k: int = 0) -> pb.ResourceQuota:
    return r.cluster.queues[q].quotas[k]


def _rename_nlp(r: pb.SolveRequest, name: str, tenant: str) -> None:
    """The queue "nlp" renamed to `name`, and bert (jobs[1], its job) moved to `tenant`."""
    r.cluster.queues[1].name = name
    r.jobs[1].tenant = tenant


CASES = [
    pytest.param(
        lambda r: setattr(_quota(r), "resource", "TPUv5"),
        "cluster.queues[0].quotas[0].resource",
        'must be a gpu type of the snapshot or "power", got "TPUv5"',
        id="unknown-gpu-type",
    ),
    pytest.param(
        lambda r: setattr(_quota(r, 0, 1), "resource", A100_80GB),
        "cluster.queues[0].quotas[1].resource",
        "duplicate quota on",
        id="duplicate-resource",
    ),
    pytest.param(
        lambda r: setattr(_quota(r), "nominal", -1.0),
        "cluster.queues[0].quotas[0].nominal",
        "must be a non-negative finite number",
        id="negative-nominal",
    ),
    pytest.param(
        lambda r: setattr(_quota(r), "nominal", NAN),
        "cluster.queues[0].quotas[0].nominal",
        "must be a non-negative finite number",
        id="nan-nominal",
    ),
    pytest.param(
        lambda r: setattr(_quota(r), "borrowing_limit", INF),
        "cluster.queues[0].quotas[0].borrowing_limit",
        "must be a non-negative finite number",
        id="infinite-borrowing",
    ),
    pytest.param(
        lambda r: setattr(_quota(r, 2, 0), "borrowing_limit", 4.0),
        "cluster.queues[2].quotas[0].borrowing_limit",
        "needs the queue's cohort",
        id="borrowing-without-cohort",
    ),
    pytest.param(
        lambda r: setattr(_quota(r, 2, 0), "lending_limit", 4.0),
        "cluster.queues[2].quotas[0].lending_limit",
        "needs the queue's cohort",
        id="lending-without-cohort",
    ),
    pytest.param(
        lambda r: setattr(r.cluster.queues[1], "weight", 0.0),
        "cluster.queues[1].weight",
        "must be a number from 0.001 to 1000, got 0",
        id="weight-zero",
    ),
    pytest.param(
        lambda r: setattr(r.cluster.queues[1], "weight", -2.0),
        "cluster.queues[1].weight",
        "must be a number from 0.001 to 1000, got -2",
        id="weight-negative",
    ),
    pytest.param(  # HiGHS refused the max-min model, CP-SAT overflowed; 1e-320: an internal error
        lambda r: setattr(r.cluster.queues[1], "weight", 1e-200),
        "cluster.queues[1].weight",
        "must be a number from 0.001 to 1000, got 1e-200",
        id="weight-tiny",
    ),
    pytest.param(
        lambda r: _rename_nlp(r, "research", "research"),
        "cluster.queues[1].name",
        'duplicate name "research"',
        id="duplicate-queue",
    ),
    pytest.param(
        lambda r: _rename_nlp(r, "", ""),
        "cluster.queues[1].name",
        "must not be empty",
        id="empty-queue-name",
    ),
    pytest.param(
        lambda r: setattr(r.jobs[1], "tenant", "finance"),
        "jobs[1].tenant",
        'names no queue of cluster.queues: "finance"',
        id="missing-queue",
    ),
    pytest.param(
        lambda r: setattr(r.jobs[0].attained, "gpu_seconds", -5.0),
        "jobs[0].attained.gpu_seconds",
        "must be a non-negative finite number",
        id="negative-attained",
    ),
    pytest.param(
        lambda r: setattr(r.cluster.queues[0].attained, "normalized_seconds", NAN),
        "cluster.queues[0].attained.normalized_seconds",
        "must be a non-negative finite number",
        id="nan-queue-attained",
    ),
]


@pytest.mark.parametrize(("mutate", "field", "says"), CASES)
def test_each_bad_queue_field_is_named(mutate: Mutation, field: str, says: str) -> None:
    r = with_queues()
    mutate(r)
    violations = validate_request(r, Limits())
    assert [v.field for v in violations] == [field], violations
    assert says in violations[0].description


def test_too_many_queues_are_refused_before_their_entries() -> None:
    r = with_queues()
    violations = validate_request(r, Limits(max_queues=2))
    assert violations == [
        FieldViolation("cluster.queues", "3 entries exceed the limit of 2 (max_queues)")
    ]


def test_without_queues_a_tenant_names_nothing_and_is_valid() -> None:
    r = make_request()
    r.jobs[1].tenant = "anything"
    assert validate_request(r, Limits()) == []


def test_the_service_answers_with_queue_usage_and_refuses_bad_quotas() -> None:
    """Over gRPC on loopback: usage per declared queue in the plan, every running job within
    its queue's quota; a quota on an unknown GPU type is INVALID_ARGUMENT naming the field."""
    r = with_queues()
    r.options.time_budget.FromSeconds(2)
    with serving() as (_, stub):
        response = stub.Solve(r, timeout=WAIT)
        bad = pb.SolveRequest()
        bad.CopyFrom(r)
        bad.cluster.queues[0].quotas[0].resource = "TPUv5"
        with pytest.raises(grpc.RpcError) as e:
            stub.Solve(bad, timeout=WAIT)
        evaluated = stub.EvaluatePlan(
            pb.EvaluatePlanRequest(request=r, plan=response.plan), timeout=WAIT
        )
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "cluster.queues[0].quotas[0].resource" in (e.value.details() or "")
    assert evaluated.valid, evaluated.violations
    usage = {q.queue: {u.resource: u for u in q.resources} for q in response.plan.queues}
    assert set(usage) == {"research", "nlp", "vision"}
    assert usage["vision"][A100_80GB].used <= 4 and usage["vision"][H100_SXM].used <= 4
    assert usage["research"][A100_80GB].used <= 12
    tenants = {j.name: j.tenant for j in r.jobs}
    running = [a for a in response.plan.assignments if a.state == pb.JOB_STATE_RUNNING]
    assert running, "something runs"
    for a in response.plan.assignments:
        # one job per tenant here: it borrows exactly when its queue is over a nominal quota
        over = any(u.borrowed > 0 for u in usage[tenants[a.job]].values())
        assert a.borrowed == over, a.job


def test_the_example_is_this_request_and_valid() -> None:
    """examples/queues.json (docs/fairness.md) is with_queues() with a 2 s budget."""
    path = Path(__file__).resolve().parent.parent / "examples" / "queues.json"
    want = with_queues()
    want.options.time_budget.FromSeconds(2)
    got = load_request_json(path)
    assert got == want
    assert validate_request(got, Limits()) == []
