"""Limits of every input field, checked by validate_request and validate_plan
(solver.app.limits): numeric ranges that keep the models finite, sizes of repeated fields,
names' length and characters, each reported at its field (issue 10, point 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import (
    MAX_DEADLINE_SECONDS,
    MAX_JOB_WEIGHT,
    MAX_OBJECTIVE_WEIGHT,
    MAX_POWER_WATTS,
    MAX_SAMPLES,
    MAX_SAMPLES_PER_SECOND,
    Limits,
)
from solver.app.validation import validate_plan, validate_request
from tests.factories import make_request
from tests.validation_helpers import BP, CA, INF, NAN, P0, Mutation, N, _extend, _set, make_plan

ROOT = Path(__file__).resolve().parent.parent


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
    # Numbers: the holes first.
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
        _set("jobs[1].weight", 1e308), "jobs[1].weight", "from 0.001 to 1000", id="job-weight-over"
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


def test_entries_over_a_count_limit_are_not_checked_one_by_one() -> None:
    req = make_request()
    for i in range(3):
        req.jobs.add(name=f"broken-{i}\x00")
    req.cluster.nodes.add(name="n\x00")
    assert [v.field for v in validate_request(req, Limits(max_jobs=5, max_nodes=3))] == [
        "cluster.nodes",
        "jobs",
    ]
