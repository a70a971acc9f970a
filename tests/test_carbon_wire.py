"""Carbon-aware rounds on the wire (docs/carbon.md): the grid forecast and max_deferral in,
QUEUE_REASON_DEFERRED and its detail out (real gRPC server on loopback); bad input names the
field; JSON keeps both; examples/carbon-aware.json is carbon_request()."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.pipeline import solve_request
from solver.app.validation import validate_request
from solver.client import Client
from solver.core.solver import Solver
from solver.domain import JobState, QueueReason
from solver.grid import GridForecast, GridPoint
from solver.wire import load_request_json, message_to_json, request_from_dict, request_from_json
from tests.factories import A100_80GB, make_request
from tests.service_helpers import bad_request, serving

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "carbon-aware.json"
H = 3600


def carbon_request() -> pb.SolveRequest:
    """make_request() under an evening-to-night forecast (420 falling to 110 gCO2/kWh at 3 h,
    then up to 300): `bert` (1 h at its best 360 samples/s, deadline 8 h) waits for the start at
    3 h; `finetune` (1 h, deadline 1.5 h: no slack past the margin) starts; `resnet` runs
    already; `llm` may wait only 30 min, before the first cleaner hour."""
    req = make_request()
    for k, carbon in enumerate((420.0, 380.0, 250.0, 110.0, 120.0, 300.0)):
        point = req.cluster.grid.points.add(carbon_g_per_kwh=carbon, price_per_kwh=0.1 + k / 100)
        point.start.FromSeconds(k * H)
    bert = req.jobs[1]
    bert.remaining_samples = 360.0 * H
    bert.time_to_deadline.FromSeconds(8 * H)
    req.jobs[0].max_deferral.FromSeconds(H // 2)
    finetune = req.jobs.add(name="finetune", tenant="nlp", min_gpus=2, max_gpus=2)
    finetune.profile.points.add(
        gpu_type=A100_80GB,
        num_gpus=2,
        tensor_parallel=1,
        pipeline_parallel=1,
        sm_clock_mhz=1410,
        samples_per_second=400.0,
        watts=600.0,
        memory_per_gpu_gib=30,
    )
    finetune.remaining_samples = 400.0 * H
    finetune.time_to_deadline.FromSeconds(H * 3 // 2)
    req.options.time_budget.FromSeconds(2)
    return req


def test_the_example_is_carbon_request_and_valid() -> None:
    """examples/carbon-aware.json is carbon_request() as protobuf JSON (regenerate it from
    there, as json_format.MessageToJson with preserving_proto_field_name and indent 1)."""
    got = load_request_json(EXAMPLE)
    assert got == carbon_request()
    assert validate_request(got, Limits()) == []


def test_the_example_solves_with_bert_deferred_and_the_rest_not() -> None:
    solver = Solver()
    try:
        out = solve_request(load_request_json(EXAMPLE), solver)
    finally:
        solver.close()
    plan = out.result.plan
    deferred = {a.job for a in plan.assignments if a.queue_reason is QueueReason.DEFERRED}
    assert deferred == {"bert"}
    assert plan.assignment("finetune").state is JobState.RUNNING
    assert "a start in 3.0 h runs at 115 gCO2/kWh" in plan.assignment("bert").queue_detail


def test_the_response_carries_deferred_and_its_detail_and_evaluates_valid() -> None:
    """Through the server and the typed client, the request given as JSON data."""
    req = carbon_request()
    with serving() as (srv, stub), Client(f"127.0.0.1:{srv.port}") as client:
        response = client.solve(json_format.MessageToDict(req))
        by_job = {a.job: a for a in response.plan.assignments}
        assert by_job["bert"].state == pb.JOB_STATE_QUEUED
        assert by_job["bert"].queue_reason == pb.QUEUE_REASON_DEFERRED
        assert by_job["bert"].queue_detail.startswith("carbon: a start in 3.0 h")
        others = [a for a in response.plan.assignments if a.job != "bert"]
        assert all(a.queue_reason != pb.QUEUE_REASON_DEFERRED for a in others)
        assert "carbon: 1 jobs deferred (intensity now 420 gCO2/kWh)" in response.stats.detail
        out = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=response.plan), timeout=30)
        assert out.valid, out.violations


def test_a_bad_grid_point_is_invalid_argument_naming_it() -> None:
    req = carbon_request()
    req.cluster.grid.points[1].start.FromSeconds(0)
    with serving() as (_, stub), pytest.raises(grpc.RpcError) as e:
        stub.Solve(req, timeout=30)
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "cluster.grid.points[1].start" in {f for f, _ in bad_request(e.value)}


def test_json_keeps_the_grid_and_max_deferral() -> None:
    req = carbon_request()
    assert request_from_dict(json_format.MessageToDict(req)) == req
    assert request_from_json(message_to_json(req)) == req
    data = {
        "cluster": {
            "grid": {
                "points": [
                    {"start": "0s", "carbonGPerKwh": 400, "pricePerKwh": 0.2},
                    {"start": "1800s", "carbon_g_per_kwh": 90.5},
                ],
                "minSaving": 0.25,
                "scaleEnergy": True,
            }
        },
        "jobs": [{"name": "j", "maxDeferral": "5400s"}],
    }
    got = request_from_dict(data)
    g = got.cluster.grid
    assert [(p.start.seconds, p.carbon_g_per_kwh) for p in g.points] == [(0, 400.0), (1800, 90.5)]
    assert g.points[0].HasField("price_per_kwh") and not g.points[1].HasField("price_per_kwh")
    assert (g.min_saving, g.scale_energy) == (0.25, True)
    assert got.jobs[0].max_deferral.seconds == 5400


def test_the_domain_gets_the_forecast_and_max_deferral() -> None:
    p = problem_from_proto(carbon_request(), Limits())
    grid = p.cluster.grid
    assert isinstance(grid, GridForecast)
    assert grid.points[3] == GridPoint(3 * H, 110.0, 0.1 + 3 / 100)
    assert (grid.min_saving, grid.scale_energy) == (0.1, False)  # unset: the defaults
    assert {j.name: j.max_deferral_seconds for j in p.jobs}["llm"] == 1800.0
    assert {j.name: j.max_deferral_seconds for j in p.jobs}["bert"] is None
    assert problem_from_proto(make_request(), Limits()).cluster.grid is None


Edit = Callable[[pb.SolveRequest], object]


def _set(path: str, value: float) -> Edit:
    def edit(r: pb.SolveRequest) -> None:
        *head, last = path.split(".")
        target: object = r
        for part in head:
            name, _, index = part.partition("[")
            target = getattr(target, name)
            if index:
                target = target[int(index.rstrip("]"))]  # type: ignore[index]
        setattr(target, last, value)

    return edit


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.cluster.grid.ClearField("points"), "cluster.grid.points"),
        (lambda r: r.cluster.grid.points[0].start.FromSeconds(60), "cluster.grid.points[0].start"),
        (lambda r: r.cluster.grid.points[2].start.FromSeconds(H), "cluster.grid.points[2].start"),
        (lambda r: r.cluster.grid.points[2].start.FromSeconds(60), "cluster.grid.points[2].start"),
        (lambda r: r.cluster.grid.points[1].start.FromSeconds(-H), "cluster.grid.points[1].start"),
        (_set("cluster.grid.points[1].carbon_g_per_kwh", -1.0),
         "cluster.grid.points[1].carbon_g_per_kwh"),
        (_set("cluster.grid.points[1].carbon_g_per_kwh", math.nan),
         "cluster.grid.points[1].carbon_g_per_kwh"),
        (_set("cluster.grid.points[1].carbon_g_per_kwh", math.inf),
         "cluster.grid.points[1].carbon_g_per_kwh"),
        (_set("cluster.grid.points[4].price_per_kwh", math.nan),
         "cluster.grid.points[4].price_per_kwh"),
        (_set("cluster.grid.points[4].price_per_kwh", -math.inf),
         "cluster.grid.points[4].price_per_kwh"),
        (_set("cluster.grid.min_saving", 1.0), "cluster.grid.min_saving"),
        (_set("cluster.grid.min_saving", -0.1), "cluster.grid.min_saving"),
        (_set("cluster.grid.min_saving", math.nan), "cluster.grid.min_saving"),
        (_set("cluster.grid.saving_per_delay", -0.5), "cluster.grid.saving_per_delay"),
        (_set("cluster.grid.saving_per_delay", math.inf), "cluster.grid.saving_per_delay"),
        (_set("cluster.grid.saving_per_delay", 1e3), "cluster.grid.saving_per_delay"),
        (lambda r: r.jobs[0].max_deferral.FromSeconds(-1), "jobs[0].max_deferral"),
        (lambda r: r.jobs[0].max_deferral.FromSeconds(20 * 365 * 24 * H),
         "jobs[0].max_deferral"),
        (_set("jobs[0].max_deferral.nanos", -5), "jobs[0].max_deferral"),
    ],
)  # fmt: skip
def test_each_bad_field_is_named(edit: Edit, field: str) -> None:
    req = carbon_request()
    edit(req)
    violations = validate_request(req, Limits())
    assert field in {v.field for v in violations}, violations
    assert all(v.field.startswith(("cluster.grid", "jobs[0].max_deferral")) for v in violations)


def test_a_forecast_longer_than_a_month_is_refused_as_a_whole() -> None:
    """MAX_GRID_POINTS (744 hours) bounds the request; one more point is one violation naming
    the list, not 745."""
    from solver.wire import MAX_GRID_POINTS

    req = carbon_request()
    del req.cluster.grid.points[:]
    for k in range(MAX_GRID_POINTS + 1):
        req.cluster.grid.points.add(carbon_g_per_kwh=100.0).start.FromSeconds(k * 3600)
    violations = validate_request(req, Limits())
    assert [v.field for v in violations] == ["cluster.grid.points"]
    del req.cluster.grid.points[-1]
    assert validate_request(req, Limits()) == []
