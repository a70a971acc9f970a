"""validate_request on each job (solver.app.validation.jobs): names and weights, model or
profile, GPU counts, deadlines, and the allocation a job runs in now (GPU type, shape,
placement, GPUs held twice), each bad input reported with its exact path."""

from __future__ import annotations

from typing import Any

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.validation import FieldViolation, validate_request
from tests.factories import A100_80GB, H100_SXM, make_request
from tests.validation_helpers import BP, CA, INF, NAN, Mutation, _set

WEIGHT = "must be a number from 0.001 to 1000"


def _alloc(r: pb.SolveRequest) -> pb.Allocation:
    return r.jobs[2].current_allocation


def _place(r: pb.SolveRequest, *slices: tuple[str, list[int]]) -> None:
    a = _alloc(r)
    del a.placement[:]
    for node, idx in slices:
        a.placement.add(node=node, gpu_indices=idx)


def _llm_holds_gpu3(r: pb.SolveRequest) -> None:
    r.jobs[0].current_allocation.CopyFrom(
        pb.Allocation(
            gpu_type=A100_80GB,
            data_parallel=1,
            tensor_parallel=1,
            pipeline_parallel=1,
            sm_clock_mhz=1410,
            placement=[pb.GpuSlice(node="a100-0", gpu_indices=[3])],
        )
    )


def _contradicting_point(r: pb.SolveRequest) -> None:
    p = r.jobs[1].profile.points.add()
    p.CopyFrom(r.jobs[1].profile.points[0])
    p.samples_per_second += 1


def _empty_profile(r: pb.SolveRequest) -> None:
    r.jobs[1].ClearField("profile")
    r.jobs[1].profile.SetInParent()


def _kept_in_unprofiled_shape(r: pb.SolveRequest) -> None:
    """resnet runs 4 GPUs as 2 x tp 2, which its profile never measured, and may not move."""
    r.jobs[2].preemptible = False
    r.jobs[2].current_allocation.data_parallel = 2
    r.jobs[2].current_allocation.tensor_parallel = 2


# (mutation, field, substring of the description); each yields exactly that one violation.
CASES = [
    pytest.param(
        _kept_in_unprofiled_shape,
        "jobs[2].current_allocation",
        "its profile has no point for A100-80GB with 4 GPUs (tp 2, pp 1)",
        id="kept-not-profiled",
    ),
    pytest.param(
        _set("jobs[0].name", ""), "jobs[0].name", "must not be empty", id="job-empty-name"
    ),
    pytest.param(
        _set("jobs[1].name", "llm"),
        "jobs[1].name",
        'duplicate name "llm" (also jobs[0].name)',
        id="job-dup",
    ),
    pytest.param(
        _set("jobs[1].weight", 0.0), "jobs[1].weight", f"{WEIGHT}, got 0", id="weight-zero"
    ),
    pytest.param(
        _set("jobs[1].weight", INF), "jobs[1].weight", f"{WEIGHT}, got inf", id="weight-inf"
    ),
    pytest.param(  # a denormal weight was accepted: max-min fairness divided by it
        _set("jobs[1].weight", 1e-320), "jobs[1].weight", WEIGHT, id="weight-denormal"
    ),
    pytest.param(
        lambda r: r.jobs[0].ClearField("model"),
        "jobs[0].workload",
        "one of model or profile is required",
        id="no-workload",
    ),
    pytest.param(
        _set("jobs[0].model.parameters", 0.0),
        "jobs[0].model.parameters",
        "positive finite",
        id="model-params",
    ),
    pytest.param(
        _set("jobs[0].model.layers", 0), "jobs[0].model.layers", "must be >= 1", id="model-layers"
    ),
    pytest.param(
        _set("jobs[0].model.hidden_size", -1),
        "jobs[0].model.hidden_size",
        "must be >= 1, got -1",
        id="model-hidden",
    ),
    pytest.param(
        _set("jobs[0].model.attention_heads", 0),
        "jobs[0].model.attention_heads",
        "must be >= 1",
        id="model-heads",
    ),
    pytest.param(
        _set("jobs[0].model.sequence_length", 0),
        "jobs[0].model.sequence_length",
        "must be >= 1",
        id="model-seq",
    ),
    pytest.param(
        _set("jobs[0].model.global_batch_size", 0),
        "jobs[0].model.global_batch_size",
        "must be >= 1",
        id="model-batch",
    ),
    pytest.param(
        _set("jobs[0].model.hidden_size", 2050),
        "jobs[0].model.hidden_size",
        "must be divisible by attention_heads (16)",
        id="model-divisible",
    ),
    pytest.param(_empty_profile, BP, "must not be empty", id="profile-empty"),
    pytest.param(
        _set(f"{BP}[0].gpu_type", "V100"),
        f"{BP}[0].gpu_type",
        'unknown gpu type "V100"',
        id="point-type",
    ),
    pytest.param(
        _set(f"{BP}[0].num_gpus", 0), f"{BP}[0].num_gpus", "must be >= 1", id="point-gpus"
    ),
    pytest.param(
        _set(f"{BP}[0].tensor_parallel", 0),
        f"{BP}[0].tensor_parallel",
        "must be >= 1",
        id="point-tp",
    ),
    pytest.param(
        _set(f"{BP}[0].pipeline_parallel", 0),
        f"{BP}[0].pipeline_parallel",
        "must be >= 1",
        id="point-pp",
    ),
    pytest.param(
        _set(f"{BP}[4].tensor_parallel", 3),
        f"{BP}[4].num_gpus",
        "must be divisible by tensor_parallel*pipeline_parallel (3), got 4",
        id="point-divisible",
    ),
    pytest.param(
        _set(f"{BP}[0].sm_clock_mhz", 1400),
        f"{BP}[0].sm_clock_mhz",
        '1400 is not a supported clock of "A100-80GB" (1410, 1275, 1110, 960)',
        id="point-clock",
    ),
    pytest.param(
        _set(f"{BP}[0].samples_per_second", 0.0),
        f"{BP}[0].samples_per_second",
        "positive finite",
        id="point-sps",
    ),
    pytest.param(
        _set(f"{BP}[0].watts", NAN), f"{BP}[0].watts", "positive finite", id="point-watts"
    ),
    pytest.param(
        _set(f"{BP}[0].memory_per_gpu_gib", -1.0),
        f"{BP}[0].memory_per_gpu_gib",
        "positive finite",
        id="point-memory",
    ),
    pytest.param(
        _contradicting_point, f"{BP}[6]", "contradicts points[0]", id="point-contradiction"
    ),
    pytest.param(
        _set("jobs[0].min_gpus", 0), "jobs[0].min_gpus", "must be >= 1, got 0", id="min-gpus"
    ),
    pytest.param(
        _set("jobs[2].max_gpus", 1),
        "jobs[2].max_gpus",
        "must be >= min_gpus (2), got 1",
        id="max-below-min",
    ),
    pytest.param(
        lambda r: r.jobs[1].allowed_gpu_types.append("V100"),
        "jobs[1].allowed_gpu_types[1]",
        'unknown gpu type "V100"',
        id="allowed-unknown",
    ),
    pytest.param(
        _set("jobs[0].remaining_samples", -1.0),
        "jobs[0].remaining_samples",
        "non-negative finite",
        id="remaining-negative",
    ),
    pytest.param(
        _set("jobs[0].remaining_samples", NAN),
        "jobs[0].remaining_samples",
        "non-negative finite",
        id="remaining-nan",
    ),
    pytest.param(
        _set("jobs[2].time_to_deadline.seconds", 0),
        "jobs[2].time_to_deadline",
        "must be > 0",
        id="deadline-zero",
    ),
    pytest.param(
        _set("jobs[2].time_to_deadline.seconds", -5),
        "jobs[2].time_to_deadline",
        "must be > 0, got -5s",
        id="deadline-negative",
    ),
    pytest.param(
        _set("jobs[2].remaining_samples", 0.0),
        "jobs[2].remaining_samples",
        "must be > 0 when time_to_deadline is set",
        id="deadline-no-remaining",
    ),
    pytest.param(
        _set(f"{CA}.gpu_type", "V100"),
        f"{CA}.gpu_type",
        'unknown gpu type "V100"',
        id="alloc-type-unknown",
    ),
    pytest.param(
        lambda r: r.jobs[2].allowed_gpu_types.append(H100_SXM),
        f"{CA}.gpu_type",
        'gpu type "A100-80GB" is not in allowed_gpu_types',
        id="alloc-type-not-allowed",
    ),
    pytest.param(
        _set(f"{CA}.data_parallel", 0), f"{CA}.data_parallel", "must be >= 1", id="alloc-dp"
    ),
    pytest.param(
        _set(f"{CA}.tensor_parallel", 0), f"{CA}.tensor_parallel", "must be >= 1", id="alloc-tp"
    ),
    pytest.param(
        _set(f"{CA}.pipeline_parallel", -2),
        f"{CA}.pipeline_parallel",
        "must be >= 1, got -2",
        id="alloc-pp",
    ),
    pytest.param(
        _set(f"{CA}.sm_clock_mhz", 1980),
        f"{CA}.sm_clock_mhz",
        "1980 is not a supported clock",
        id="alloc-clock",
    ),
    pytest.param(
        _set(f"{CA}.placement[0].node", "nope"),
        f"{CA}.placement[0].node",
        'unknown node "nope"',
        id="alloc-node-unknown",
    ),
    pytest.param(
        _set(f"{CA}.placement[0].node", "h100-0"),
        f"{CA}.placement[0].node",
        'node "h100-0" has gpu type "H100-SXM", not "A100-80GB"',
        id="alloc-node-type",
    ),
    pytest.param(
        _set(f"{CA}.placement[0].gpu_indices[3]", 8),
        f"{CA}.placement[0].gpu_indices[3]",
        'must be in [0, 8) for node "a100-0"',
        id="alloc-index-range",
    ),
    pytest.param(
        lambda r: _place(r, ("a100-1", [4, 5, 6, 7])),
        f"{CA}.placement[0].gpu_indices[3]",
        'GPU 7 of node "a100-1" is unavailable',
        id="alloc-unavailable",
    ),
    pytest.param(
        lambda r: _place(r, ("a100-0", [0, 1, 2]), ("a100-0", [2])),
        f"{CA}.placement[1].gpu_indices[0]",
        "appears twice in this allocation",
        id="alloc-index-dup",
    ),
    pytest.param(
        _llm_holds_gpu3,
        f"{CA}.placement[0].gpu_indices[3]",
        'GPU 3 of node "a100-0" is also in the current allocation of job "llm" (jobs[0])',
        id="alloc-other-job",
    ),
    pytest.param(
        _set(f"{CA}.data_parallel", 2),
        f"{CA}.placement",
        "holds 4 GPUs, but data_parallel*tensor_parallel*pipeline_parallel = 2",
        id="alloc-total",
    ),
    pytest.param(
        lambda r: _place(r, ("a100-0", [0, 1, 2, 3]), ("a100-1", [])),
        f"{CA}.placement[1].gpu_indices",
        "must not be empty",
        id="alloc-slice-empty",
    ),
]


@pytest.mark.parametrize(("mutate", "field", "text"), CASES)
def test_bad_input_is_reported_at_its_field(mutate: Mutation, field: str, text: str) -> None:
    req = make_request()
    mutate(req)
    violations = validate_request(req, Limits())
    assert [v.field for v in violations] == [field], violations
    assert text in violations[0].description


def test_the_split_tensor_group_reports_every_node() -> None:
    req = make_request()
    _place(req, ("a100-0", [0, 1, 2]), ("a100-1", [0]))
    _set(f"{CA}.data_parallel", 2)(req)
    _set(f"{CA}.tensor_parallel", 2)(req)
    assert validate_request(req, Limits()) == [
        FieldViolation(
            f"{CA}.placement[0].gpu_indices",
            '3 GPUs on node "a100-0" is not a '
            "multiple of tensor_parallel (2): tensor groups must stay inside a node",
        ),
        FieldViolation(
            f"{CA}.placement[1].gpu_indices",
            '1 GPUs on node "a100-1" is not a '
            "multiple of tensor_parallel (2): tensor groups must stay inside a node",
        ),
    ]


def test_max_gpus_message_has_the_documented_form() -> None:
    req = make_request()
    req.jobs[2].min_gpus = 4
    req.jobs[2].max_gpus = 3
    assert validate_request(req, Limits()) == [
        FieldViolation("jobs[2].max_gpus", "must be >= min_gpus (4), got 3")
    ]


def test_identical_duplicate_profile_points_are_not_contradictory() -> None:
    req = make_request()
    req.jobs[1].profile.points.add().CopyFrom(req.jobs[1].profile.points[0])
    assert validate_request(req, Limits()) == []


def test_the_fast_check_of_a_profile_point_agrees_with_its_full_check() -> None:
    """500,000 points are checked without building a path per point; a point the fast check
    doubts gets the full check, so the two must agree on every kind of point."""
    from solver.app.validation.common import Collector
    from solver.app.validation.jobs import _check_point, _point_ok

    gpu = pb.GpuType(name="A100-80GB", sm_clocks_mhz=[1410, 1200])
    types = {"A100-80GB": gpu}
    good = pb.ProfilePoint(
        gpu_type="A100-80GB",
        num_gpus=4,
        tensor_parallel=2,
        pipeline_parallel=2,
        sm_clock_mhz=1410,
        samples_per_second=10.0,
        watts=300.0,
        memory_per_gpu_gib=20.0,
    )
    changes: list[dict[str, Any]] = [
        {},
        {"gpu_type": "B200"},
        {"num_gpus": 0},
        {"num_gpus": 6},
        {"tensor_parallel": 0},
        {"pipeline_parallel": -1},
        {"sm_clock_mhz": 1300},
        {"samples_per_second": 0.0},
        {"samples_per_second": float("nan")},
        {"watts": float("inf")},
        {"watts": 1e12},
        {"memory_per_gpu_gib": -1.0},
        {"memory_per_gpu_gib": 1e9},
    ]
    for change in changes:
        point = pb.ProfilePoint()
        point.CopyFrom(good)
        for name, value in change.items():
            setattr(point, name, value)
        clocks = {name: frozenset(t.sm_clocks_mhz) for name, t in types.items()}
        c = Collector()
        _check_point(c, "p", point, types)
        assert _point_ok(point, clocks, True) == (not c.out), change
