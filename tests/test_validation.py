"""validate_request / validate_plan: one case per kind of bad input, with its exact path."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.validation import FieldViolation, validate_plan, validate_request
from tests.factories import A100_80GB, H100_SXM, make_request

Mutation = Callable[[pb.SolveRequest], object]
NAN = math.nan
INF = math.inf


def _extra_type(name: str, clocks: list[int]) -> Mutation:
    """Adds an unused GPU type (a copy of the H100 with another name and clocks)."""
    def mutate(r: pb.SolveRequest) -> None:
        t = r.cluster.gpu_types.add()
        t.CopyFrom(r.cluster.gpu_types[1])
        t.name = name
        del t.sm_clocks_mhz[:]
        t.sm_clocks_mhz.extend(clocks)
    return mutate


def _alloc(r: pb.SolveRequest) -> pb.Allocation:
    return r.jobs[2].current_allocation


def _place(r: pb.SolveRequest, *slices: tuple[str, list[int]]) -> None:
    a = _alloc(r)
    del a.placement[:]
    for node, idx in slices:
        a.placement.add(node=node, gpu_indices=idx)


def _llm_holds_gpu3(r: pb.SolveRequest) -> None:
    r.jobs[0].current_allocation.CopyFrom(pb.Allocation(
        gpu_type=A100_80GB, data_parallel=1, tensor_parallel=1, pipeline_parallel=1,
        sm_clock_mhz=1410, placement=[pb.GpuSlice(node="a100-0", gpu_indices=[3])]))


def _contradicting_point(r: pb.SolveRequest) -> None:
    p = r.jobs[1].profile.points.add()
    p.CopyFrom(r.jobs[1].profile.points[0])
    p.samples_per_second += 1


def _empty_profile(r: pb.SolveRequest) -> None:
    r.jobs[1].ClearField("profile")
    r.jobs[1].profile.SetInParent()


def _set(path: str, value: object) -> Callable[[Any], None]:
    """Sets a field given by its path, e.g. ``jobs[1].profile.points[0].watts``."""
    def mutate(msg: Any) -> None:
        obj = msg
        parts = path.replace("[", ".").replace("]", "").split(".")
        for part in parts[:-1]:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        last = parts[-1]
        if last.isdigit():
            obj[int(last)] = value
        else:
            setattr(obj, last, value)
    return mutate


P0 = "cluster.gpu_types[0]"
N = "cluster.nodes"
CA = "jobs[2].current_allocation"
BP = "jobs[1].profile.points"

# (mutation, field, substring of the description); each yields exactly that one violation.
def _kept_in_unprofiled_shape(r: pb.SolveRequest) -> None:
    """resnet runs 4 GPUs as 2 x tp 2, which its profile never measured, and may not move."""
    r.jobs[2].preemptible = False
    r.jobs[2].current_allocation.data_parallel = 2
    r.jobs[2].current_allocation.tensor_parallel = 2


CASES = [
    pytest.param(lambda r: r.ClearField("cluster"), "cluster", "is required", id="no-cluster"),
    pytest.param(lambda r: r.cluster.ClearField("gpu_types"), "cluster.gpu_types",
                 "must not be empty", id="no-gpu-types"),
    pytest.param(lambda r: (r.cluster.ClearField("nodes"),
                            r.cluster.ClearField("rack_power_budgets")),
                 N, "must not be empty", id="no-nodes"),
    pytest.param(_extra_type("", [1000]), "cluster.gpu_types[2].name", "must not be empty",
                 id="type-empty-name"),
    pytest.param(_extra_type(H100_SXM, [1000]), "cluster.gpu_types[2].name",
                 'duplicate name "H100-SXM" (also cluster.gpu_types[1].name)', id="type-dup"),
    pytest.param(_set(f"{P0}.memory_gib", 0.0), f"{P0}.memory_gib",
                 "must be a positive finite number, got 0", id="memory-zero"),
    pytest.param(_set(f"{P0}.peak_tflops", NAN), f"{P0}.peak_tflops", "positive finite",
                 id="tflops-nan"),
    pytest.param(_set(f"{P0}.memory_bandwidth_gbps", INF), f"{P0}.memory_bandwidth_gbps",
                 "got inf", id="membw-inf"),
    pytest.param(_set(f"{P0}.intra_node_bandwidth_gbps", -1.0),
                 f"{P0}.intra_node_bandwidth_gbps", "got -1", id="intra-negative"),
    pytest.param(_set(f"{P0}.idle_watts", -1.0), f"{P0}.idle_watts",
                 "must be >= 0 and < tdp_watts (400)", id="idle-negative"),
    pytest.param(_set(f"{P0}.idle_watts", 400.0), f"{P0}.idle_watts", "< tdp_watts (400)",
                 id="idle-at-tdp"),
    pytest.param(_extra_type("L4", []), "cluster.gpu_types[2].sm_clocks_mhz",
                 "must not be empty", id="clocks-empty"),
    pytest.param(lambda r: r.cluster.gpu_types[0].sm_clocks_mhz.append(0),
                 f"{P0}.sm_clocks_mhz[4]", "must be > 0, got 0", id="clock-zero"),
    pytest.param(lambda r: r.cluster.gpu_types[0].sm_clocks_mhz.append(1410),
                 f"{P0}.sm_clocks_mhz[4]", "duplicate clock 1410", id="clock-dup"),
    pytest.param(_set(f"{N}[2].name", ""), f"{N}[2].name", "must not be empty",
                 id="node-empty-name"),
    pytest.param(_set(f"{N}[1].name", "a100-0"), f"{N}[1].name",
                 'duplicate name "a100-0" (also cluster.nodes[0].name)', id="node-dup"),
    pytest.param(_set(f"{N}[2].gpu_type", "V100"), f"{N}[2].gpu_type",
                 'unknown gpu type "V100"', id="node-unknown-type"),
    pytest.param(_set(f"{N}[2].gpu_type", ""), f"{N}[2].gpu_type", "must not be empty",
                 id="node-no-type"),
    pytest.param(_set(f"{N}[2].gpu_count", 0), f"{N}[2].gpu_count", "must be > 0, got 0",
                 id="gpu-count-zero"),
    pytest.param(_set(f"{N}[2].gpu_count", 65), f"{N}[2].gpu_count",
                 "must be <= 64 (max_gpus_per_node), got 65", id="gpu-count-over"),
    pytest.param(lambda r: r.cluster.nodes[1].unavailable_gpu_indices.append(8),
                 f"{N}[1].unavailable_gpu_indices[1]", "[0, 8), got 8", id="unavail-range"),
    pytest.param(lambda r: r.cluster.nodes[1].unavailable_gpu_indices.append(-1),
                 f"{N}[1].unavailable_gpu_indices[1]", "got -1", id="unavail-negative"),
    pytest.param(lambda r: r.cluster.nodes[1].unavailable_gpu_indices.append(7),
                 f"{N}[1].unavailable_gpu_indices[1]", "duplicate index 7", id="unavail-dup"),
    pytest.param(_set(f"{N}[2].rack", ""), f"{N}[2].rack", "must not be empty",
                 id="rack-empty"),
    pytest.param(_set(f"{N}[0].network_bandwidth_gbps", 0.0), f"{N}[0].network_bandwidth_gbps",
                 "positive finite", id="network-zero"),
    pytest.param(_set("cluster.power_budget_watts", 0.0), "cluster.power_budget_watts",
                 "positive finite", id="power-zero"),
    pytest.param(_set("cluster.power_budget_watts", NAN), "cluster.power_budget_watts",
                 "positive finite", id="power-nan"),
    pytest.param(_set("cluster.rack_power_budgets[0].rack", "r9"),
                 "cluster.rack_power_budgets[0].rack", 'unknown rack "r9"', id="rack-unknown"),
    pytest.param(_set("cluster.rack_power_budgets[0].rack", ""),
                 "cluster.rack_power_budgets[0].rack", "must not be empty",
                 id="rack-budget-no-rack"),
    pytest.param(lambda r: r.cluster.rack_power_budgets.add(rack="r1", watts=5000),
                 "cluster.rack_power_budgets[1].rack", 'duplicate budget for rack "r1"',
                 id="rack-dup"),
    pytest.param(_set("cluster.rack_power_budgets[0].watts", -5.0),
                 "cluster.rack_power_budgets[0].watts", "got -5", id="rack-watts"),
    # Idle power: 16 A100 x 50 W + 4 H100 x 70 W = 1080 W in all, 800 W in rack r1.
    pytest.param(_set("cluster.power_budget_watts", 1000.0), "cluster.power_budget_watts",
                 "below the idle power of the cluster's GPUs (1080 W)", id="power-below-idle"),
    pytest.param(_set("cluster.rack_power_budgets[0].watts", 700.0),
                 "cluster.rack_power_budgets[0].watts",
                 'below the idle power of rack "r1"\'s GPUs (800 W)', id="rack-below-idle"),
    pytest.param(_kept_in_unprofiled_shape, "jobs[2].current_allocation",
                 "its profile has no point for A100-80GB with 4 GPUs (tp 2, pp 1)",
                 id="kept-not-profiled"),
    pytest.param(_set("jobs[0].name", ""), "jobs[0].name", "must not be empty",
                 id="job-empty-name"),
    pytest.param(_set("jobs[1].name", "llm"), "jobs[1].name",
                 'duplicate name "llm" (also jobs[0].name)', id="job-dup"),
    pytest.param(_set("jobs[1].weight", 0.0), "jobs[1].weight", "must be > 0 and finite",
                 id="weight-zero"),
    pytest.param(_set("jobs[1].weight", INF), "jobs[1].weight", "must be > 0 and finite",
                 id="weight-inf"),
    pytest.param(lambda r: r.jobs[0].ClearField("model"), "jobs[0].workload",
                 "one of model or profile is required", id="no-workload"),
    pytest.param(_set("jobs[0].model.parameters", 0.0), "jobs[0].model.parameters",
                 "positive finite", id="model-params"),
    pytest.param(_set("jobs[0].model.layers", 0), "jobs[0].model.layers", "must be >= 1",
                 id="model-layers"),
    pytest.param(_set("jobs[0].model.hidden_size", -1), "jobs[0].model.hidden_size",
                 "must be >= 1, got -1", id="model-hidden"),
    pytest.param(_set("jobs[0].model.attention_heads", 0), "jobs[0].model.attention_heads",
                 "must be >= 1", id="model-heads"),
    pytest.param(_set("jobs[0].model.sequence_length", 0), "jobs[0].model.sequence_length",
                 "must be >= 1", id="model-seq"),
    pytest.param(_set("jobs[0].model.global_batch_size", 0),
                 "jobs[0].model.global_batch_size", "must be >= 1", id="model-batch"),
    pytest.param(_set("jobs[0].model.hidden_size", 2050), "jobs[0].model.hidden_size",
                 "must be divisible by attention_heads (16)", id="model-divisible"),
    pytest.param(_empty_profile, BP, "must not be empty", id="profile-empty"),
    pytest.param(_set(f"{BP}[0].gpu_type", "V100"), f"{BP}[0].gpu_type",
                 'unknown gpu type "V100"', id="point-type"),
    pytest.param(_set(f"{BP}[0].num_gpus", 0), f"{BP}[0].num_gpus", "must be >= 1",
                 id="point-gpus"),
    pytest.param(_set(f"{BP}[0].tensor_parallel", 0), f"{BP}[0].tensor_parallel",
                 "must be >= 1", id="point-tp"),
    pytest.param(_set(f"{BP}[0].pipeline_parallel", 0), f"{BP}[0].pipeline_parallel",
                 "must be >= 1", id="point-pp"),
    pytest.param(_set(f"{BP}[4].tensor_parallel", 3), f"{BP}[4].num_gpus",
                 "must be divisible by tensor_parallel*pipeline_parallel (3), got 4",
                 id="point-divisible"),
    pytest.param(_set(f"{BP}[0].sm_clock_mhz", 1400), f"{BP}[0].sm_clock_mhz",
                 '1400 is not a supported clock of "A100-80GB" (1410, 1275, 1110, 960)',
                 id="point-clock"),
    pytest.param(_set(f"{BP}[0].samples_per_second", 0.0), f"{BP}[0].samples_per_second",
                 "positive finite", id="point-sps"),
    pytest.param(_set(f"{BP}[0].watts", NAN), f"{BP}[0].watts", "positive finite",
                 id="point-watts"),
    pytest.param(_set(f"{BP}[0].memory_per_gpu_gib", -1.0), f"{BP}[0].memory_per_gpu_gib",
                 "positive finite", id="point-memory"),
    pytest.param(_contradicting_point, f"{BP}[6]", "contradicts points[0]",
                 id="point-contradiction"),
    pytest.param(_set("jobs[0].min_gpus", 0), "jobs[0].min_gpus", "must be >= 1, got 0",
                 id="min-gpus"),
    pytest.param(_set("jobs[2].max_gpus", 1), "jobs[2].max_gpus",
                 "must be >= min_gpus (2), got 1", id="max-below-min"),
    pytest.param(lambda r: r.jobs[1].allowed_gpu_types.append("V100"),
                 "jobs[1].allowed_gpu_types[1]", 'unknown gpu type "V100"', id="allowed-unknown"),
    pytest.param(_set("jobs[0].remaining_samples", -1.0), "jobs[0].remaining_samples",
                 "non-negative finite", id="remaining-negative"),
    pytest.param(_set("jobs[0].remaining_samples", NAN), "jobs[0].remaining_samples",
                 "non-negative finite", id="remaining-nan"),
    pytest.param(_set("jobs[2].time_to_deadline.seconds", 0), "jobs[2].time_to_deadline",
                 "must be > 0", id="deadline-zero"),
    pytest.param(_set("jobs[2].time_to_deadline.seconds", -5), "jobs[2].time_to_deadline",
                 "must be > 0, got -5s", id="deadline-negative"),
    pytest.param(_set("jobs[2].remaining_samples", 0.0), "jobs[2].remaining_samples",
                 "must be > 0 when time_to_deadline is set", id="deadline-no-remaining"),
    pytest.param(_set(f"{CA}.gpu_type", "V100"), f"{CA}.gpu_type", 'unknown gpu type "V100"',
                 id="alloc-type-unknown"),
    pytest.param(lambda r: r.jobs[2].allowed_gpu_types.append(H100_SXM), f"{CA}.gpu_type",
                 'gpu type "A100-80GB" is not in allowed_gpu_types', id="alloc-type-not-allowed"),
    pytest.param(_set(f"{CA}.data_parallel", 0), f"{CA}.data_parallel", "must be >= 1",
                 id="alloc-dp"),
    pytest.param(_set(f"{CA}.tensor_parallel", 0), f"{CA}.tensor_parallel", "must be >= 1",
                 id="alloc-tp"),
    pytest.param(_set(f"{CA}.pipeline_parallel", -2), f"{CA}.pipeline_parallel",
                 "must be >= 1, got -2", id="alloc-pp"),
    pytest.param(_set(f"{CA}.sm_clock_mhz", 1980), f"{CA}.sm_clock_mhz",
                 "1980 is not a supported clock", id="alloc-clock"),
    pytest.param(_set(f"{CA}.placement[0].node", "nope"), f"{CA}.placement[0].node",
                 'unknown node "nope"', id="alloc-node-unknown"),
    pytest.param(_set(f"{CA}.placement[0].node", "h100-0"), f"{CA}.placement[0].node",
                 'node "h100-0" has gpu type "H100-SXM", not "A100-80GB"', id="alloc-node-type"),
    pytest.param(_set(f"{CA}.placement[0].gpu_indices[3]", 8),
                 f"{CA}.placement[0].gpu_indices[3]", 'must be in [0, 8) for node "a100-0"',
                 id="alloc-index-range"),
    pytest.param(lambda r: _place(r, ("a100-1", [4, 5, 6, 7])),
                 f"{CA}.placement[0].gpu_indices[3]", 'GPU 7 of node "a100-1" is unavailable',
                 id="alloc-unavailable"),
    pytest.param(lambda r: _place(r, ("a100-0", [0, 1, 2]), ("a100-0", [2])),
                 f"{CA}.placement[1].gpu_indices[0]", "appears twice in this allocation",
                 id="alloc-index-dup"),
    pytest.param(_llm_holds_gpu3, f"{CA}.placement[0].gpu_indices[3]",
                 'GPU 3 of node "a100-0" is also in the current allocation of job "llm" '
                 "(jobs[0])", id="alloc-other-job"),
    pytest.param(_set(f"{CA}.data_parallel", 2), f"{CA}.placement",
                 "holds 4 GPUs, but data_parallel*tensor_parallel*pipeline_parallel = 2",
                 id="alloc-total"),
    pytest.param(lambda r: _place(r, ("a100-0", [0, 1, 2, 3]), ("a100-1", [])),
                 f"{CA}.placement[1].gpu_indices", "must not be empty", id="alloc-slice-empty"),
    pytest.param(_set("weights.energy", -1.0), "weights.energy", "non-negative finite",
                 id="weight-energy"),
    pytest.param(_set("weights.throughput", NAN), "weights.throughput", "non-negative finite",
                 id="weight-throughput-nan"),
    pytest.param(_set("options.time_budget.seconds", 0), "options.time_budget",
                 "must be > 0", id="budget-zero"),
    pytest.param(_set("options.time_budget.seconds", 301), "options.time_budget",
                 "must be <= 300s", id="budget-over"),
    pytest.param(_set("options.relative_gap", 1.0), "options.relative_gap",
                 "must be in [0, 1), got 1", id="gap-one"),
    pytest.param(_set("options.relative_gap", -0.1), "options.relative_gap",
                 "must be in [0, 1)", id="gap-negative"),
    pytest.param(_set("options.threads", -1), "options.threads", "must be in [0, 256]",
                 id="threads-negative"),
    pytest.param(_set("options.threads", 257), "options.threads", "got 257", id="threads-over"),
    pytest.param(_set("options.seed", -1), "options.seed", "must be >= 0, got -1", id="seed"),
    pytest.param(_set("options.backend", 9), "options.backend", "unknown backend 9",
                 id="backend-unknown"),
]


def test_the_fixture_request_is_valid() -> None:
    assert validate_request(make_request(), Limits()) == []


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
        FieldViolation(f"{CA}.placement[0].gpu_indices", '3 GPUs on node "a100-0" is not a '
                       "multiple of tensor_parallel (2): tensor groups must stay inside a node"),
        FieldViolation(f"{CA}.placement[1].gpu_indices", '1 GPUs on node "a100-1" is not a '
                       "multiple of tensor_parallel (2): tensor groups must stay inside a node"),
    ]


def test_max_gpus_message_has_the_documented_form() -> None:
    req = make_request()
    req.jobs[2].min_gpus = 4
    req.jobs[2].max_gpus = 3
    assert validate_request(req, Limits()) == [
        FieldViolation("jobs[2].max_gpus", "must be >= min_gpus (4), got 3")
    ]


@pytest.mark.parametrize(
    ("limits", "field", "text"),
    [
        (Limits(max_nodes=2), "cluster.nodes", "3 nodes exceed the limit of 2 (max_nodes)"),
        (Limits(max_jobs=2), "jobs", "3 jobs exceed the limit of 2 (max_jobs)"),
        (Limits(max_profile_points_per_job=5), BP, "6 points exceed the limit of 5"),
        (Limits(max_time_budget_seconds=9.5), "options.time_budget", "must be <= 9.5s"),
    ],
)
def test_size_limits(limits: Limits, field: str, text: str) -> None:
    violations = validate_request(make_request(), limits)
    assert [v.field for v in violations] == [field]
    assert text in violations[0].description


def test_all_problems_are_collected() -> None:
    req = make_request()
    req.jobs[0].min_gpus = 0
    req.cluster.nodes[2].rack = ""
    req.options.seed = -3
    assert [v.field for v in validate_request(req, Limits())] == [
        "cluster.nodes[2].rack", "jobs[0].min_gpus", "options.seed",
    ]


def test_an_empty_job_list_is_valid() -> None:
    req = make_request()
    req.ClearField("jobs")
    assert validate_request(req, Limits()) == []


def test_identical_duplicate_profile_points_are_not_contradictory() -> None:
    req = make_request()
    req.jobs[1].profile.points.add().CopyFrom(req.jobs[1].profile.points[0])
    assert validate_request(req, Limits()) == []


def test_long_names_are_shortened_in_descriptions() -> None:
    req = make_request()
    req.cluster.nodes[2].gpu_type = "X" * 1000
    [v] = validate_request(req, Limits())
    assert v.field == "cluster.nodes[2].gpu_type"
    assert len(v.description) < 100


# ---------------------------------------------------------------- plans


def make_plan() -> pb.Plan:
    """A well-formed plan for make_request(): llm on a100-1, bert queued, resnet stays."""
    return pb.Plan(assignments=[
        pb.JobAssignment(job="llm", state=pb.JOB_STATE_RUNNING, gpu_type=A100_80GB, num_gpus=2,
                         data_parallel=2, tensor_parallel=1, pipeline_parallel=1,
                         sm_clock_mhz=1410, placement=[pb.GpuSlice(node="a100-1",
                                                                   gpu_indices=[0, 1])]),
        pb.JobAssignment(job="bert", state=pb.JOB_STATE_QUEUED,
                         queue_reason=pb.QUEUE_REASON_INSUFFICIENT_RESOURCES),
        pb.JobAssignment(job="resnet", state=pb.JOB_STATE_RUNNING, gpu_type=A100_80GB,
                         data_parallel=4, tensor_parallel=1, pipeline_parallel=1, sm_clock_mhz=1410,
                         placement=[pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3])]),
    ])


PA = "plan.assignments"

PLAN_CASES = [
    pytest.param(lambda p: p.assignments.add().CopyFrom(p.assignments[1]), f"{PA}[3].job",
                 'duplicate assignment for job "bert" (also plan.assignments[1])', id="dup"),
    pytest.param(lambda p: p.assignments.add(job="ghost", state=pb.JOB_STATE_QUEUED),
                 f"{PA}[3].job", 'unknown job "ghost"', id="unknown-job"),
    pytest.param(lambda p: p.assignments.add(state=pb.JOB_STATE_QUEUED), f"{PA}[3].job",
                 "must not be empty", id="no-job"),
    pytest.param(lambda p: p.assignments.pop(1), PA, 'no assignment for job "bert"',
                 id="missing-job"),
    pytest.param(_set("assignments[0].placement[0].node", "nope"), f"{PA}[0].placement[0].node",
                 'unknown node "nope"', id="unknown-node"),
    pytest.param(_set("assignments[2].placement[0].gpu_indices[0]", 8),
                 f"{PA}[2].placement[0].gpu_indices[0]", "must be in [0, 8)", id="index"),
    pytest.param(_set("assignments[0].gpu_type", "V100"), f"{PA}[0].gpu_type",
                 'unknown gpu type "V100"', id="unknown-type"),
    pytest.param(_set("assignments[0].data_parallel", 0), f"{PA}[0].data_parallel", "must be >= 1",
                 id="no-shape"),
    pytest.param(_set("assignments[0].sm_clock_mhz", 0), f"{PA}[0].sm_clock_mhz",
                 "0 is not a supported clock", id="no-clock"),
    pytest.param(_set("assignments[0].num_gpus", 3), f"{PA}[0].num_gpus", "(2) when set, got 3",
                 id="num-gpus"),
    pytest.param(lambda p: p.assignments[0].ClearField("placement"), f"{PA}[0].placement",
                 "must not be empty for a JOB_STATE_RUNNING assignment", id="no-placement"),
    pytest.param(lambda p: p.assignments[1].placement.add(node="a100-1", gpu_indices=[0]),
                 f"{PA}[1].placement", "must be empty for a JOB_STATE_QUEUED assignment",
                 id="queued-with-gpus"),
    pytest.param(_set("assignments[1].state", pb.JOB_STATE_UNSPECIFIED), f"{PA}[1].state",
                 "must be JOB_STATE_RUNNING or JOB_STATE_QUEUED", id="no-state"),
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
        f"{PA}[0].gpu_type", f"{PA}[0].data_parallel", f"{PA}[0].tensor_parallel",
        f"{PA}[0].pipeline_parallel", f"{PA}[0].placement",
    ]


# ---------------------------------------------------------------- pyomo_solver


def _pyomo(backend: pb.Backend, solver: str) -> list[FieldViolation]:
    req = make_request()
    req.options.backend = backend
    req.options.pyomo_solver = solver
    return validate_request(req, Limits())


def test_pyomo_solver_is_valid_with_backend_pyomo() -> None:
    assert _pyomo(pb.BACKEND_PYOMO, "appsi_highs") == []
    assert _pyomo(pb.BACKEND_PYOMO, "") == []


@pytest.mark.parametrize(
    ("backend", "shown"),
    [
        (pb.BACKEND_CPSAT, "BACKEND_CPSAT"),
        (pb.BACKEND_HIGHS, "BACKEND_HIGHS"),
        (pb.BACKEND_UNSPECIFIED, "BACKEND_UNSPECIFIED"),
    ],
)
def test_pyomo_solver_with_another_backend_is_an_error(backend: pb.Backend, shown: str) -> None:
    assert _pyomo(backend, "appsi_highs") == [
        FieldViolation(
            "options.pyomo_solver", f"is only used with BACKEND_PYOMO, got {shown}"
        )
    ]


def test_an_unavailable_pyomo_solver_lists_the_available_ones() -> None:
    from solver.exact.backends.pyomo_backend import available_solvers

    [v] = _pyomo(pb.BACKEND_PYOMO, "gurobi-9000")
    assert v.field == "options.pyomo_solver"
    assert v.description == (
        'solver "gurobi-9000" is not available here; available: ' + ", ".join(available_solvers())
    )
