"""Limits of every input: numeric ranges that keep the models finite, sizes of repeated fields,
names' length and characters, and request bytes that don't decode (issue 10, point 3)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app.limits import (
    MAX_BATCH_TOKENS,
    MAX_DEADLINE_SECONDS,
    MAX_HIDDEN_SIZE,
    MAX_JOB_WEIGHT,
    MAX_OBJECTIVE_WEIGHT,
    MAX_POWER_WATTS,
    MAX_SAMPLES,
    MAX_SAMPLES_PER_SECOND,
    MAX_SEQUENCE_LENGTH,
    MIN_BANDWIDTH_GBPS,
    MIN_DEADLINE_SAMPLES,
    MIN_MODEL_PARAMETERS,
    MIN_TFLOPS,
    Limits,
)
from solver.app.validation import validate_plan, validate_request
from tests.factories import make_request
from tests.test_validation import make_plan

ROOT = Path(__file__).resolve().parent.parent
WAIT = 30.0
NAN = math.nan
INF = math.inf
P0 = "cluster.gpu_types[0]"
N = "cluster.nodes"
BP = "jobs[1].profile.points"
CA = "jobs[2].current_allocation"
Mutation = Callable[[pb.SolveRequest], object]


def _set(path: str, value: object) -> Callable[[Any], None]:
    """Sets a field given by its path, e.g. ``jobs[1].profile.points[0].watts``."""

    def mutate(msg: Any) -> None:
        obj = msg
        parts = path.replace("[", ".").replace("]", "").split(".")
        for part in parts[:-1]:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        setattr(obj, parts[-1], value)

    return mutate


def _extend(path: str, values: list[Any]) -> Callable[[Any], None]:
    """Appends values to a repeated field given by its path."""

    def mutate(msg: Any) -> None:
        obj = msg
        for part in path.replace("[", ".").replace("]", "").split("."):
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        obj.extend(values)

    return mutate


def _extra_type(name: str) -> Mutation:
    """Adds an unused GPU type (a copy of the H100 with another name)."""

    def mutate(r: pb.SolveRequest) -> None:
        r.cluster.gpu_types.add().CopyFrom(r.cluster.gpu_types[1])
        r.cluster.gpu_types[2].name = name

    return mutate


def _slice_of(n: int) -> Mutation:
    def mutate(r: pb.SolveRequest) -> None:
        r.jobs[2].current_allocation.placement[0].gpu_indices.extend(range(4, n))

    return mutate


# (mutation, field, substring of the description); each yields exactly that one violation.
CASES = [
    # Numbers: the issue's holes first.
    pytest.param(
        _set("cluster.power_budget_watts", 1e306),
        "cluster.power_budget_watts",
        "must be <= 1e+10, got 1e+306",
        id="power-1e306",
    ),
    pytest.param(
        _set("cluster.power_budget_watts", 1e308),
        "cluster.power_budget_watts",
        "must be <= 1e+10",
        id="power-1e308",
    ),
    pytest.param(
        _set("cluster.power_budget_watts", INF),
        "cluster.power_budget_watts",
        "positive finite",
        id="power-inf",
    ),
    pytest.param(
        _set("cluster.rack_power_budgets[0].watts", 1e307),
        "cluster.rack_power_budgets[0].watts",
        "must be <= 1e+10",
        id="rack-1e307",
    ),
    pytest.param(
        _set("cluster.rack_power_budgets[0].watts", NAN),
        "cluster.rack_power_budgets[0].watts",
        "positive finite",
        id="rack-nan",
    ),
    pytest.param(
        _set("weights.throughput", 1e308),
        "weights.throughput",
        "must be <= 1000, got 1e+308",
        id="throughput-1e308",
    ),
    pytest.param(
        _set("weights.energy", INF), "weights.energy", "non-negative finite", id="energy-inf"
    ),
    pytest.param(
        _set("weights.migration", 1001.0),
        "weights.migration",
        "must be <= 1000",
        id="migration-over",
    ),
    pytest.param(
        _set("weights.locality", 1e9), "weights.locality", "must be <= 1000", id="locality-over"
    ),
    pytest.param(
        _set("weights.deadline", 1e9),
        "weights.deadline",
        "must be <= 1000",
        id="deadline-weight-over",
    ),
    pytest.param(
        _set("jobs[1].weight", 1e308), "jobs[1].weight", "must be <= 1000", id="job-weight-over"
    ),
    pytest.param(
        _set(f"{P0}.tdp_watts", 1e6), f"{P0}.tdp_watts", "must be <= 100000", id="tdp-over"
    ),
    pytest.param(_set(f"{P0}.idle_watts", NAN), f"{P0}.idle_watts", "must be >= 0", id="idle-nan"),
    pytest.param(
        _set(f"{P0}.memory_gib", 1e300), f"{P0}.memory_gib", "must be <= 1e+06", id="memory-over"
    ),
    pytest.param(
        _set(f"{P0}.peak_tflops", 1e300), f"{P0}.peak_tflops", "must be <= 1e+07", id="tflops-over"
    ),
    pytest.param(
        _set(f"{P0}.memory_bandwidth_gbps", 1e300),
        f"{P0}.memory_bandwidth_gbps",
        "must be <= 1e+08",
        id="membw-over",
    ),
    pytest.param(
        _set(f"{P0}.intra_node_bandwidth_gbps", 1e300),
        f"{P0}.intra_node_bandwidth_gbps",
        "must be <= 1e+08",
        id="intra-over",
    ),
    pytest.param(
        _set(f"{N}[0].network_bandwidth_gbps", 1e300),
        f"{N}[0].network_bandwidth_gbps",
        "must be <= 1e+08",
        id="network-over",
    ),
    pytest.param(
        _extend(f"{P0}.sm_clocks_mhz", [200_000]),
        f"{P0}.sm_clocks_mhz[4]",
        "must be <= 100000, got 200000",
        id="clock-over",
    ),
    pytest.param(
        _set("jobs[0].model.parameters", 1e300),
        "jobs[0].model.parameters",
        "must be <= 1e+15",
        id="parameters-over",
    ),
    pytest.param(
        _set("jobs[0].remaining_samples", 1e300),
        "jobs[0].remaining_samples",
        "must be <= 1e+18",
        id="remaining-over",
    ),
    pytest.param(
        _set("jobs[0].remaining_samples", INF),
        "jobs[0].remaining_samples",
        "non-negative finite",
        id="remaining-inf",
    ),
    pytest.param(
        _set(f"{BP}[0].samples_per_second", 1e300),
        f"{BP}[0].samples_per_second",
        "must be <= 1e+12",
        id="point-sps-over",
    ),
    pytest.param(
        _set(f"{BP}[0].samples_per_second", INF),
        f"{BP}[0].samples_per_second",
        "positive finite",
        id="point-sps-inf",
    ),
    pytest.param(
        _set(f"{BP}[0].watts", 1e300), f"{BP}[0].watts", "must be <= 1e+10", id="point-watts-over"
    ),
    pytest.param(
        _set(f"{BP}[0].memory_per_gpu_gib", 1e300),
        f"{BP}[0].memory_per_gpu_gib",
        "must be <= 1e+06",
        id="point-memory-over",
    ),
    pytest.param(
        _set("jobs[2].time_to_deadline.seconds", 10**10),
        "jobs[2].time_to_deadline",
        "must be <= 3.1536e+08s, got 1e+10s",
        id="deadline-over",
    ),
    # Sizes of repeated fields (default limits).
    pytest.param(
        _extend(f"{P0}.sm_clocks_mhz", list(range(2000, 6093))),
        f"{P0}.sm_clocks_mhz",
        "4097 entries exceed the limit of 4096 (max_sm_clocks_per_gpu_type)",
        id="clocks-over",
    ),
    pytest.param(
        _extend(f"{N}[2].unavailable_gpu_indices", list(range(65))),
        f"{N}[2].unavailable_gpu_indices",
        "65 entries exceed the limit of 64 (max_gpus_per_node)",
        id="unavailable-over",
    ),
    pytest.param(
        _extend("jobs[1].allowed_gpu_types", ["A100-80GB"] * 256),
        "jobs[1].allowed_gpu_types",
        "257 entries exceed the limit of 256 (max_gpu_types)",
        id="allowed-over",
    ),
    pytest.param(
        _slice_of(65),
        f"{CA}.placement[0].gpu_indices",
        "65 entries exceed the limit of 64 (max_gpus_per_node)",
        id="slice-over",
    ),
    # Names: length and characters.
    pytest.param(
        _set("jobs[0].name", "j" * 254),
        "jobs[0].name",
        "must be at most 253 characters (max_name_length), got 254",
        id="job-long",
    ),
    pytest.param(
        _set("jobs[0].name", "x" * 1_000_000), "jobs[0].name", "got 1000000", id="job-1mb"
    ),
    pytest.param(
        _set("jobs[0].name", "llm\x00"),
        "jobs[0].name",
        "must contain printable characters only, got U+0000 at position 3",
        id="job-nul",
    ),
    pytest.param(
        _set("jobs[0].tenant", "re\nsearch"),
        "jobs[0].tenant",
        "U+000A at position 2",
        id="tenant-newline",
    ),
    pytest.param(
        _set("jobs[0].tenant", "t" * 254), "jobs[0].tenant", "at most 253", id="tenant-long"
    ),
    pytest.param(_set(f"{N}[2].name", "h100\x1b[0m"), f"{N}[2].name", "U+001B", id="node-escape"),
    pytest.param(_set(f"{N}[2].name", "n" * 254), f"{N}[2].name", "at most 253", id="node-long"),
    pytest.param(_set(f"{N}[2].rack", "r\x7f"), f"{N}[2].rack", "U+007F", id="rack-del"),
    pytest.param(_set(f"{N}[2].rack", "r" * 254), f"{N}[2].rack", "at most 253", id="rack-long"),
    pytest.param(_extra_type("H100\tSXM"), "cluster.gpu_types[2].name", "U+0009", id="type-tab"),
    pytest.param(
        _extra_type("H" * 254), "cluster.gpu_types[2].name", "at most 253", id="type-long"
    ),
]


@pytest.mark.parametrize(("mutate", "field", "text"), CASES)
def test_out_of_range_input_is_reported_at_its_field(
    mutate: Mutation, field: str, text: str
) -> None:
    req = make_request()
    mutate(req)
    violations = validate_request(req, Limits())
    assert [v.field for v in violations] == [field], violations
    assert text in violations[0].description


@pytest.mark.parametrize(
    ("limits", "field", "text"),
    [
        (
            Limits(max_gpu_types=1),
            "cluster.gpu_types",
            "2 entries exceed the limit of 1 (max_gpu_types)",
        ),
        (
            Limits(max_rack_power_budgets=0),
            "cluster.rack_power_budgets",
            "1 entries exceed the limit of 0 (max_rack_power_budgets)",
        ),
        (
            Limits(max_placement_slices=0),
            f"{CA}.placement",
            "1 entries exceed the limit of 0 (max_placement_slices)",
        ),
        (
            Limits(max_name_length=4),
            "cluster.gpu_types[0].name",
            "must be at most 4 characters (max_name_length), got 9",
        ),
    ],
)
def test_size_limits_of_repeated_fields_and_names(limits: Limits, field: str, text: str) -> None:
    violations = validate_request(make_request(), limits)
    assert violations[0].field == field, violations
    assert text in violations[0].description


def test_values_at_the_maxima_are_valid() -> None:
    req = make_request()
    req.cluster.power_budget_watts = MAX_POWER_WATTS
    req.cluster.rack_power_budgets[0].watts = MAX_POWER_WATTS
    req.weights.throughput = MAX_OBJECTIVE_WEIGHT
    req.jobs[1].weight = MAX_JOB_WEIGHT
    req.jobs[2].remaining_samples = MAX_SAMPLES
    req.jobs[2].time_to_deadline.seconds = int(MAX_DEADLINE_SECONDS)
    req.jobs[1].profile.points[0].samples_per_second = MAX_SAMPLES_PER_SECOND
    req.jobs[0].name = "j" * 253
    req.jobs[0].tenant = "équipe de recherche 1"  # spaces and non-ASCII letters are printable
    assert validate_request(req, Limits()) == []


def test_a_long_clock_list_is_cut_in_descriptions() -> None:
    req = make_request()
    req.cluster.gpu_types[0].sm_clocks_mhz.extend(range(2000, 2100))
    req.jobs[1].profile.points[0].sm_clock_mhz = 1400
    [v] = validate_request(req, Limits())
    assert v.field == f"{BP}[0].sm_clock_mhz"
    assert v.description.endswith(", ... 88 more)")
    assert len(v.description) < 200


def test_every_bundled_instance_is_within_the_limits() -> None:
    files = sorted(ROOT.glob("instances/*.json")) + sorted(
        ROOT.glob("instances/hetero-power/hetero-power-*.json")
    )
    assert len(files) > 5
    for path in files:
        req = json_format.Parse(path.read_text(), pb.SolveRequest())
        assert validate_request(req, Limits()) == [], path.name


def test_plan_sizes_are_limited() -> None:
    [v] = validate_plan(make_request(), make_plan(), Limits(max_jobs=2))
    assert (v.field, v.description) == (
        "plan.assignments",
        "3 entries exceed the limit of 2 (max_jobs)",
    )
    violations = validate_plan(make_request(), make_plan(), Limits(max_placement_slices=0))
    assert [v.field for v in violations] == [
        "plan.assignments[0].placement",
        "plan.assignments[2].placement",
    ]
    plan = make_plan()
    plan.assignments[0].placement[0].gpu_indices.extend(range(2, 70))
    [v] = validate_plan(make_request(), plan)
    assert (v.field, v.description) == (
        "plan.assignments[0].placement[0].gpu_indices",
        "70 entries exceed the limit of 64 (max_gpus_per_node)",
    )


# ---------------------------------------------------------------- on a real server


def _bad_request(err: grpc.RpcError) -> list[tuple[str, str]]:
    status = rpc_status.from_call(err)
    assert status is not None
    [detail] = status.details
    bad = error_details_pb2.BadRequest()
    assert detail.Unpack(bad)
    return [(v.field, v.description) for v in bad.field_violations]


Stub = scheduler_pb2_grpc.SchedulerServiceStub


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(
            _set("cluster.power_budget_watts", 1e306),
            "cluster.power_budget_watts",
            id="power-1e306",
        ),
        pytest.param(
            _set("cluster.power_budget_watts", 1e308),
            "cluster.power_budget_watts",
            id="power-1e308",
        ),
        pytest.param(
            _set("cluster.rack_power_budgets[0].watts", 1e306),
            "cluster.rack_power_budgets[0].watts",
            id="rack-1e306",
        ),
        pytest.param(
            _set("cluster.rack_power_budgets[0].watts", 1e308),
            "cluster.rack_power_budgets[0].watts",
            id="rack-1e308",
        ),
        pytest.param(_set("weights.throughput", 1e308), "weights.throughput", id="weight-1e308"),
        pytest.param(
            _extend(f"{P0}.sm_clocks_mhz", list(range(2000, 1_002_000))),
            f"{P0}.sm_clocks_mhz",
            id="million-clocks",
        ),
        pytest.param(_set("jobs[0].name", "llm\x00"), "jobs[0].name", id="nul-name"),
        pytest.param(_set("jobs[0].name", "x" * 1_000_000), "jobs[0].name", id="1mb-name"),
    ],
)
def test_the_issues_input_holes_are_invalid_argument(
    stub: Stub, mutate: Mutation, field: str
) -> None:
    req = make_request()
    mutate(req)
    check = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=req), timeout=WAIT)
    assert not check.valid
    assert [v.field for v in check.violations] == [field]
    with pytest.raises(grpc.RpcError) as info:
        stub.Solve(req, timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in _bad_request(info.value)] == [field]
    assert field in info.value.details()


def test_a_solve_at_the_maxima_has_a_finite_objective(stub: Stub) -> None:
    req = make_request()
    req.cluster.power_budget_watts = MAX_POWER_WATTS
    req.cluster.rack_power_budgets[0].watts = MAX_POWER_WATTS
    for name in ("throughput", "energy", "migration", "locality", "deadline"):
        setattr(req.weights, name, MAX_OBJECTIVE_WEIGHT)
    for job in req.jobs:
        job.weight = MAX_JOB_WEIGHT
    for point in req.jobs[1].profile.points:
        point.samples_per_second = MAX_SAMPLES_PER_SECOND
        point.watts = MAX_POWER_WATTS
    req.options.backend = pb.BACKEND_CPSAT
    req.options.time_budget.seconds = 2
    resp = stub.Solve(req, timeout=WAIT)
    assert math.isfinite(resp.stats.objective)
    assert resp.stats.termination in (pb.TERMINATION_OPTIMAL, pb.TERMINATION_FEASIBLE)


@pytest.fixture
def raw(channel: grpc.Channel) -> Iterator[Callable[[str, bytes], bytes]]:
    """Calls a method of the service with request bytes as they are."""

    def call(method: str, data: bytes) -> bytes:
        rpc = channel.unary_unary(f"/dsfro.v1.SchedulerService/{method}")
        out: bytes = rpc(data, timeout=WAIT)
        return out

    yield call


GARBAGE = b"\xff\xff\xff\xff\xff"
TRUNCATED = b"\x0a\x10\x0a"
"""Field 1 (the request or cluster) says 16 bytes follow; one does."""
BAD_UTF8 = b"\x12\x04\x0a\x02\xff\xfe"
"""A SolveRequest whose job's name is not UTF-8 (with ``ab`` in its place, it decodes)."""


@pytest.mark.parametrize(
    ("method", "message", "data"),
    [
        ("Solve", "dsfro.v1.SolveRequest", GARBAGE),
        ("Solve", "dsfro.v1.SolveRequest", TRUNCATED),
        ("ValidateSnapshot", "dsfro.v1.ValidateSnapshotRequest", GARBAGE),
        ("ValidateSnapshot", "dsfro.v1.ValidateSnapshotRequest", TRUNCATED),
        ("Solve", "dsfro.v1.SolveRequest", BAD_UTF8),
        ("ValidateSnapshot", "dsfro.v1.ValidateSnapshotRequest", b"\x0a\x06" + BAD_UTF8),
        ("EvaluatePlan", "dsfro.v1.EvaluatePlanRequest", GARBAGE),
        ("GetServerInfo", "dsfro.v1.GetServerInfoRequest", GARBAGE),
    ],
)
def test_undecodable_bytes_are_invalid_argument(
    raw: Callable[[str, bytes], bytes], method: str, message: str, data: bytes
) -> None:
    with pytest.raises(grpc.RpcError) as info:
        raw(method, data)
    err = info.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    [(field, description)] = _bad_request(err)
    assert field == "request"
    assert description.startswith(f"not a valid {message} (")
    assert err.details().startswith("invalid request (1 problems): request: not a valid")


def test_well_formed_bytes_still_reach_the_service(raw: Callable[[str, bytes], bytes]) -> None:
    info = pb.GetServerInfoResponse.FromString(raw("GetServerInfo", b""))
    assert info.version
    data = pb.ValidateSnapshotRequest(request=make_request()).SerializeToString()
    resp = pb.ValidateSnapshotResponse.FromString(raw("ValidateSnapshot", data))
    assert resp.valid


def test_entries_over_a_count_limit_are_not_checked_one_by_one() -> None:
    req = make_request()
    for i in range(3):
        req.jobs.add(name=f"broken-{i}\x00")
    req.cluster.nodes.add(name="n\x00")
    assert [v.field for v in validate_request(req, Limits(max_jobs=5, max_nodes=3))] == [
        "cluster.nodes",
        "jobs",
    ]


# ------------------------------------------------ edge values of scripts/fuzz


def _model(**sizes: int) -> Mutation:
    def mutate(r: pb.SolveRequest) -> None:
        for name, value in sizes.items():
            setattr(r.jobs[0].model, name, value)

    return mutate


INT32_TOP = 2**31 - 1
FUZZ_CASES = [
    # A subnormal remaining_samples (> 0, so it passed) with a deadline: the rate the deadline
    # asks for, samples / seconds, underflowed to 0 and the deadline term divided by zero:
    # INTERNAL from Solve and EvaluatePlan.
    pytest.param(
        _set("jobs[2].remaining_samples", 5e-324),
        "jobs[2].remaining_samples",
        "must be >= 1 when time_to_deadline is set, got 4.94066e-324",
        id="deadline-subnormal-samples",
    ),
    pytest.param(
        _set("jobs[2].remaining_samples", 0.5),
        "jobs[2].remaining_samples",
        "must be >= 1 when time_to_deadline is set, got 0.5",
        id="deadline-half-sample",
    ),
    # int32 maxima of a ModelSpec: the analytic model's message size (2 bytes x sequence x
    # micro-batch x hidden) left int64 (OverflowError: INTERNAL), and smaller excesses wrapped
    # its int64 arithmetic around silently (a 1,000x wrong throughput).
    pytest.param(
        _model(hidden_size=INT32_TOP, attention_heads=INT32_TOP),
        "jobs[0].model.hidden_size",
        "must be <= 1048576, got 2147483647",
        id="hidden-int32-max",
    ),
    pytest.param(
        _model(sequence_length=INT32_TOP),
        "jobs[0].model.sequence_length",
        "must be <= 16777216, got 2147483647",
        id="sequence-int32-max",
    ),
    pytest.param(
        _model(sequence_length=2**20, global_batch_size=2**30),
        "jobs[0].model.global_batch_size",
        "1073741824 samples of 1048576 tokens are 1125899906842624 tokens per step, "
        "above the limit of 17179869184",
        id="batch-tokens-over",
    ),
    # A subnormal parameter count made a one-GPU step take no time: infinite throughput, NaN
    # objective coefficients, and a CP-SAT/HiGHS solve that hung in the bound LP past its
    # budget (ValidateSnapshot reported best_samples_per_second inf).
    pytest.param(
        _set("jobs[0].model.parameters", 5e-324),
        "jobs[0].model.parameters",
        "must be >= 1, got 4.94066e-324",
        id="parameters-subnormal",
    ),
    pytest.param(
        _set("jobs[0].model.parameters", 0.5),
        "jobs[0].model.parameters",
        "must be >= 1, got 0.5",
        id="parameters-below-one",
    ),
    # Subnormal GPU figures: an infinite compute time gave NaN GPU activity ("activity must
    # be in [0, 1], got nan"), a halved bandwidth of 0 a ZeroDivisionError: EvaluatePlan
    # answered INTERNAL for the plans of such a type.
    pytest.param(
        _set(f"{P0}.peak_tflops", 5e-324),
        f"{P0}.peak_tflops",
        "must be >= 0.001, got 4.94066e-324",
        id="tflops-subnormal",
    ),
    pytest.param(
        _set(f"{P0}.peak_tflops", 2.2250738585072014e-308),
        f"{P0}.peak_tflops",
        "must be >= 0.001",
        id="tflops-tiny",
    ),
    pytest.param(
        _set(f"{P0}.intra_node_bandwidth_gbps", 5e-324),
        f"{P0}.intra_node_bandwidth_gbps",
        "must be >= 0.001, got 4.94066e-324",
        id="intra-subnormal",
    ),
    pytest.param(
        _set(f"{P0}.memory_bandwidth_gbps", 1e-320),
        f"{P0}.memory_bandwidth_gbps",
        "must be >= 0.001",
        id="membw-subnormal",
    ),
    pytest.param(
        _set(f"{N}[0].network_bandwidth_gbps", 1e-320),
        f"{N}[0].network_bandwidth_gbps",
        "must be >= 0.001",
        id="network-subnormal",
    ),
]


@pytest.mark.parametrize(("mutate", "field", "text"), FUZZ_CASES)
def test_fuzz_findings_are_reported_at_their_field(mutate: Mutation, field: str, text: str) -> None:
    req = make_request()
    mutate(req)
    violations = validate_request(req, Limits())
    assert [v.field for v in violations] == [field], violations
    assert text in violations[0].description


@pytest.mark.parametrize(("mutate", "field", "text"), FUZZ_CASES)
def test_fuzz_findings_are_invalid_argument_on_every_rpc(
    stub: Stub, mutate: Mutation, field: str, text: str
) -> None:
    req = make_request()
    req.options.time_budget.FromMilliseconds(200)
    req.options.backend = pb.BACKEND_HEURISTIC
    mutate(req)
    check = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=req), timeout=WAIT)
    assert [(v.field, text in v.description) for v in check.violations] == [(field, True)]
    for call, message in (
        (stub.Solve, req),
        (stub.EvaluatePlan, pb.EvaluatePlanRequest(request=req, plan=make_plan())),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call(message, timeout=WAIT)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in _bad_request(info.value)] == [field]


def _solve_and_check(stub: Stub, req: pb.SolveRequest) -> pb.SolveResponse:
    """Solve, then check the plan with EvaluatePlan: valid, and the same finite objective."""
    resp: pb.SolveResponse = stub.Solve(req, timeout=WAIT)
    assert resp.stats.termination != pb.TERMINATION_INFEASIBLE
    assert math.isfinite(resp.stats.objective)
    ev = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=resp.plan), timeout=WAIT)
    assert ev.valid, ev.violations
    assert ev.objective.total == pytest.approx(resp.plan.objective.total)
    return resp


@pytest.mark.parametrize("backend", [pb.BACKEND_HEURISTIC, pb.BACKEND_CPSAT])
def test_a_deadline_with_one_sample_left_solves_to_a_valid_plan(stub: Stub, backend: int) -> None:
    req = make_request()
    req.jobs[2].remaining_samples = MIN_DEADLINE_SAMPLES
    req.options.backend = backend  # type: ignore[assignment]
    req.options.time_budget.FromMilliseconds(500)
    resp = _solve_and_check(stub, req)
    [resnet] = [a for a in resp.plan.assignments if a.job == "resnet"]
    assert resnet.state == pb.JOB_STATE_RUNNING  # one sample in an hour: any shape meets it


def test_a_model_at_the_size_maxima_has_an_exact_estimate(stub: Stub) -> None:
    """At MAX_HIDDEN_SIZE, MAX_SEQUENCE_LENGTH and MAX_BATCH_TOKENS, the vectorised analytic
    model agrees with the scalar reference (no int64 wraparound), and solves are valid."""
    import numpy as np

    from solver.app.convert import problem_from_proto
    from solver.domain import ModelSpec, Shape
    from solver.perfmodel import throughput
    from solver.perfmodel.grid import estimate_grid

    req = make_request()
    _model(
        hidden_size=MAX_HIDDEN_SIZE,
        attention_heads=16,
        sequence_length=MAX_SEQUENCE_LENGTH,
        global_batch_size=MAX_BATCH_TOKENS // MAX_SEQUENCE_LENGTH,
    )(req)
    assert validate_request(req, Limits()) == []
    problem = problem_from_proto(req, Limits())
    spec = problem.jobs[0].workload
    assert isinstance(spec, ModelSpec)
    gpu = problem.cluster.gpu_types["A100-80GB"]
    for pp in (1, 2, 4, 8):
        ref = throughput.estimate(
            spec,
            gpu,
            Shape(gpu.name, 1, 1, pp),
            1410,
            gpus_per_node=8,
            network_bandwidth_gbps=200.0,
            check_memory=False,
        )
        one = np.array([1], dtype=np.int64)
        grid = estimate_grid(
            spec,
            gpu,
            one,
            one,
            one * pp,
            one * 1410,
            np.array([False]),
            gpus_per_node=8,
            network_bandwidth_gbps=200.0,
        )
        assert ref is not None
        assert grid.samples_per_second[0] == pytest.approx(ref.samples_per_second, rel=1e-9)
    req.options.backend = pb.BACKEND_HEURISTIC
    req.options.time_budget.FromMilliseconds(500)
    _solve_and_check(stub, req)


@pytest.mark.parametrize("backend", [pb.BACKEND_CPSAT, pb.BACKEND_HIGHS, pb.BACKEND_AGGREGATE])
def test_a_model_with_one_parameter_solves_within_its_budget(stub: Stub, backend: int) -> None:
    req = make_request()
    req.jobs[0].model.parameters = MIN_MODEL_PARAMETERS
    req.options.backend = backend  # type: ignore[assignment]
    req.options.time_budget.FromMilliseconds(500)
    check = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=req), timeout=WAIT)
    assert check.valid
    assert all(math.isfinite(j.best_samples_per_second) for j in check.jobs)
    start = time.monotonic()
    _solve_and_check(stub, req)
    assert time.monotonic() - start < 10


def test_a_plan_on_gpus_at_the_minima_is_evaluated_and_valid(stub: Stub) -> None:
    """GPU types at MIN_TFLOPS and MIN_BANDWIDTH_GBPS: slow, but every estimate is finite, so
    Solve and EvaluatePlan answer with a valid plan, also for a caller's multi-GPU plan."""
    req = make_request()
    for t in req.cluster.gpu_types:
        t.peak_tflops = MIN_TFLOPS
        t.memory_bandwidth_gbps = MIN_BANDWIDTH_GBPS
        t.intra_node_bandwidth_gbps = MIN_BANDWIDTH_GBPS
    for n in req.cluster.nodes:
        n.network_bandwidth_gbps = MIN_BANDWIDTH_GBPS
    req.options.backend = pb.BACKEND_HEURISTIC
    req.options.time_budget.FromMilliseconds(500)
    assert validate_request(req, Limits()) == []
    _solve_and_check(stub, req)
    plan = make_plan()  # llm data-parallel on 2 GPUs of a node: all-reduce over intra-node links
    ev = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=plan), timeout=WAIT)
    assert ev.valid, ev.violations
    assert math.isfinite(ev.objective.total)
