"""Protobuf <-> domain conversion: exact values, defaults, round trips, JSON files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import (
    RequestFileError,
    allocations_from_proto,
    backend_from_proto,
    backend_to_proto,
    enum_label,
    load_request_json,
    message_to_json,
    plan_to_proto,
    problem_from_proto,
    result_to_proto,
    wire_name,
)
from solver.app.limits import Limits
from solver.domain import (
    Allocation,
    Backend,
    Config,
    GpuSlice,
    JobAssignment,
    JobState,
    ModelSpec,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    ProfilePoint,
    QueueReason,
    Shape,
    SolveResult,
    SolveStats,
    Termination,
    ThroughputProfile,
)
from tests.factories import A100_80GB, H100_SXM, make_request


def test_problem_from_proto_copies_every_field() -> None:
    p = problem_from_proto(make_request(), Limits())
    c = p.cluster
    assert list(c.gpu_types) == [A100_80GB, H100_SXM]
    a100 = c.gpu_types[A100_80GB]
    assert (a100.memory_gib, a100.peak_tflops, a100.memory_bandwidth_gbps) == (80, 312, 2039)
    assert (a100.intra_node_bandwidth_gbps, a100.tdp_watts, a100.idle_watts) == (600, 400, 50)
    assert a100.sm_clocks_mhz == (960, 1110, 1275, 1410)
    assert [n.name for n in c.nodes] == ["a100-0", "a100-1", "h100-0"]
    n1 = c.nodes[1]
    assert (n1.gpu_type, n1.gpu_count, n1.rack, n1.network_bandwidth_gbps) == (
        A100_80GB,
        8,
        "r1",
        200,
    )
    assert n1.unavailable_gpu_indices == frozenset({7})
    assert c.power_budget_watts == 12000
    assert dict(c.rack_power_budgets_watts) == {"r1": 8000}

    llm, bert, resnet = p.jobs
    assert llm.weight == 1.0 and llm.tenant == "research"
    assert llm.workload == ModelSpec(1.3e9, 24, 2048, 16, 2048, 64)
    assert (llm.min_gpus, llm.max_gpus, llm.allowed_gpu_types) == (1, 8, frozenset())
    assert llm.deadline_seconds is None and llm.current is None and llm.preemptible is True

    assert bert.weight == 2.0 and bert.allowed_gpu_types == frozenset({A100_80GB})
    assert isinstance(bert.workload, ThroughputProfile)
    assert len(bert.workload.points) == 6
    assert bert.workload.points[1] == ProfilePoint(A100_80GB, 1, 1, 1, 1110, 85.0, 255.0, 30.0)

    assert (resnet.remaining_samples, resnet.deadline_seconds) == (1e6, 3600.0)
    assert resnet.current == Allocation(
        Shape(A100_80GB, 4, 1, 1), 1410, (GpuSlice("a100-0", (0, 1, 2, 3)),)
    )
    assert p.weights == ObjectiveWeights()
    o = p.options
    assert (o.time_budget_seconds, o.backend, o.seed, o.threads, o.relative_gap) == (
        10.0,
        Backend.AUTO,
        7,
        1,
        0.0,
    )


def test_unset_fields_take_their_defaults_and_set_zeros_are_kept() -> None:
    req = make_request()
    req.ClearField("options")
    req.cluster.ClearField("power_budget_watts")
    req.weights.energy = 0.0
    req.weights.deadline = 2.0
    req.jobs[2].preemptible = False
    req.jobs[2].ClearField("time_to_deadline")
    p = problem_from_proto(req, Limits(default_time_budget_seconds=2.5))
    assert p.options.time_budget_seconds == 2.5
    assert p.options.backend is Backend.AUTO
    assert p.cluster.power_budget_watts is None
    assert p.weights == ObjectiveWeights(
        throughput=1.0, energy=0.0, migration=0.05, locality=0.01, deadline=2.0
    )
    assert p.jobs[2].preemptible is False
    assert p.jobs[2].deadline_seconds is None


def test_sub_second_durations_convert_exactly() -> None:
    req = make_request()
    req.options.time_budget.FromMilliseconds(1500)
    req.jobs[2].time_to_deadline.FromNanoseconds(250_000_000)
    p = problem_from_proto(req, Limits())
    assert p.options.time_budget_seconds == 1.5
    assert p.jobs[2].deadline_seconds == 0.25


@pytest.mark.parametrize(
    ("wire", "domain"),
    [
        (pb.BACKEND_UNSPECIFIED, Backend.AUTO),
        (pb.BACKEND_AUTO, Backend.AUTO),
        (pb.BACKEND_CPSAT, Backend.CPSAT),
        (pb.BACKEND_HEURISTIC, Backend.HEURISTIC),
    ],
)
def test_backends_map_by_name(wire: int, domain: Backend) -> None:
    assert backend_from_proto(wire) is domain


@pytest.mark.parametrize(
    ("domain", "wire"),
    [
        (Backend, pb.Backend),
        (JobState, pb.JobState),
        (QueueReason, pb.QueueReason),
        (Termination, pb.Termination),
    ],
)
def test_every_domain_enum_member_has_its_prefixed_wire_value(domain: Any, wire: Any) -> None:
    prefix = wire.Name(0).removesuffix("UNSPECIFIED")
    assert [wire.Name(v) for v in wire.values() if v] == [prefix + m.name for m in domain]
    for member in domain:
        assert wire_name(member) == prefix + member.name
        assert enum_label(wire, wire.Value(wire_name(member))) == member.name


def test_backends_round_trip_through_the_wire() -> None:
    for backend in Backend:
        assert backend_from_proto(backend_to_proto(backend)) is backend


def _config(job: str, dp: int, tp: int) -> Config:
    return Config(
        job=job,
        shape=Shape(A100_80GB, dp, tp, 1),
        sm_clock_mhz=1275,
        samples_per_second=123.5,
        watts=1400.0,
        memory_per_gpu_gib=31.5,
        min_nodes=1,
        min_racks=1,
    )


def _plan() -> Plan:
    return Plan(
        assignments=(
            JobAssignment(
                "a",
                JobState.RUNNING,
                _config("a", 2, 2),
                (GpuSlice("a100-0", (4, 5)), GpuSlice("a100-1", (0, 1))),
                migrated=True,
            ),
            JobAssignment(
                "b",
                JobState.QUEUED,
                migrated=False,
                queue_reason=QueueReason.NOT_WORTH_RUNNING,
                queue_detail="too hot",
            ),
        ),
        objective=ObjectiveBreakdown(
            total=0.75, throughput=1.0, energy=0.2, migration=1.0, locality=1.0, deadline=0.0
        ),
    )


def test_plan_to_proto() -> None:
    out = plan_to_proto(_plan())
    a, b = out.assignments
    assert (a.job, a.state, a.gpu_type, a.num_gpus) == ("a", pb.JOB_STATE_RUNNING, A100_80GB, 4)
    assert (a.data_parallel, a.tensor_parallel, a.pipeline_parallel) == (2, 2, 1)
    assert (a.sm_clock_mhz, a.samples_per_second, a.watts) == (1275, 123.5, 1400.0)
    assert (a.memory_per_gpu_gib, a.migrated, a.queue_reason) == (31.5, True, 0)
    assert [(s.node, list(s.gpu_indices)) for s in a.placement] == [
        ("a100-0", [4, 5]),
        ("a100-1", [0, 1]),
    ]
    assert (b.job, b.state, b.queue_reason, b.queue_detail) == (
        "b",
        pb.JOB_STATE_QUEUED,
        pb.QUEUE_REASON_NOT_WORTH_RUNNING,
        "too hot",
    )
    assert (b.num_gpus, len(b.placement)) == (0, 0)
    assert out.objective == pb.ObjectiveBreakdown(
        total=0.75, throughput=1.0, energy=0.2, migration=1.0, locality=1.0, deadline=0.0
    )


def test_allocations_round_trip_through_the_wire_plan() -> None:
    wire = pb.Plan.FromString(plan_to_proto(_plan()).SerializeToString())
    assert allocations_from_proto(wire) == {
        "a": Allocation(
            Shape(A100_80GB, 2, 2, 1),
            1275,
            (GpuSlice("a100-0", (4, 5)), GpuSlice("a100-1", (0, 1))),
        ),
        "b": None,
    }


def _stats(bound: float | None, gap: float | None) -> SolveStats:
    return SolveStats(
        termination=Termination.FALLBACK,
        backend_used=Backend.CPSAT,
        objective=0.75,
        best_bound=bound,
        relative_gap=gap,
        wall_seconds=1.5,
        first_plan_seconds=0.002,
        num_configurations=12,
        num_configurations_enumerated=40,
        detail="cp-sat timed out",
    )


def test_result_to_proto_with_a_bound() -> None:
    resp = result_to_proto(SolveResult(_plan(), _stats(0.8, 0.0625)))
    s = resp.stats
    assert (s.termination, s.backend_used, s.objective) == (
        pb.TERMINATION_FALLBACK,
        pb.BACKEND_CPSAT,
        0.75,
    )
    assert (s.best_bound, s.relative_gap) == (0.8, 0.0625)
    assert (s.wall_time.seconds, s.wall_time.nanos) == (1, 500_000_000)
    assert (s.time_to_first_plan.seconds, s.time_to_first_plan.nanos) == (0, 2_000_000)
    assert (s.num_configurations, s.num_configurations_enumerated) == (12, 40)
    assert s.detail == "cp-sat timed out"
    assert resp.plan == plan_to_proto(_plan())


def test_result_to_proto_leaves_a_missing_bound_unset() -> None:
    s = result_to_proto(SolveResult(_plan(), _stats(None, None))).stats
    assert not s.HasField("best_bound")
    assert not s.HasField("relative_gap")


# ---------------------------------------------------------------- JSON files


def test_load_request_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json_format.MessageToJson(make_request()))
    assert load_request_json(path) == make_request()


def test_load_request_json_accepts_proto_field_names(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text(json_format.MessageToJson(make_request(), preserving_proto_field_name=True))
    assert load_request_json(str(path)) == make_request()


def test_malformed_json_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "jobs": [\n    {"name": "a",,}\n  ]\n}\n')
    with pytest.raises(RequestFileError, match=r"bad\.json:3:18: malformed JSON"):
        load_request_json(path)


def test_unknown_fields_are_rejected_with_their_name(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    data = json.loads(json_format.MessageToJson(make_request()))
    data["cluster"]["nodes"][1]["colour"] = "red"
    path.write_text(json.dumps(data))
    with pytest.raises(RequestFileError, match=r'no field named "colour".*nodes\[1\]'):
        load_request_json(path)


def test_duplicate_keys_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text('{"jobs": [], "jobs": []}')
    with pytest.raises(RequestFileError, match='duplicate key "jobs"'):
        load_request_json(path)


def test_a_json_array_is_not_a_request(tmp_path: Path) -> None:
    path = tmp_path / "req.json"
    path.write_text("[]")
    with pytest.raises(RequestFileError, match="expected a JSON object"):
        load_request_json(path)


def test_a_missing_file_is_a_request_file_error(tmp_path: Path) -> None:
    with pytest.raises(RequestFileError, match="cannot read"):
        load_request_json(tmp_path / "nope.json")


def test_message_to_json_shows_default_values() -> None:
    data = json.loads(message_to_json(plan_to_proto(_plan())))
    assert data["assignments"][1]["migrated"] is False
    assert data["assignments"][1]["numGpus"] == 0
    assert data["objective"]["deadline"] == 0.0


def test_a_profile_point_is_read_field_by_field() -> None:
    """Points are read by position for speed: each position is the field of that name."""
    from solver.app.convert import _same_fields
    from solver.app.convert_workload import profile_point_from_proto
    from solver.domain import ProfilePoint

    point = pb.ProfilePoint(
        gpu_type="H100-80GB",
        num_gpus=8,
        tensor_parallel=4,
        pipeline_parallel=2,
        sm_clock_mhz=1755,
        samples_per_second=123.5,
        watts=4321.0,
        memory_per_gpu_gib=61.25,
        mig_profile="3g.40gb",
    )
    assert profile_point_from_proto(point) == _same_fields(ProfilePoint, point)
