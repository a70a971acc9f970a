"""validate_request on the request as a whole (solver.app.validation.request): the cluster's GPU
types, nodes and power budgets, the weights and the options (pyomo_solver included), each bad
input reported with its exact path; size limits; every problem collected at once."""

from __future__ import annotations

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.validation import FieldViolation, validate_request
from tests.factories import H100_SXM, make_request
from tests.validation_helpers import BP, INF, NAN, P0, Mutation, N, _set


def _extra_type(name: str, clocks: list[int]) -> Mutation:
    """Adds an unused GPU type (a copy of the H100 with another name and clocks)."""

    def mutate(r: pb.SolveRequest) -> None:
        t = r.cluster.gpu_types.add()
        t.CopyFrom(r.cluster.gpu_types[1])
        t.name = name
        del t.sm_clocks_mhz[:]
        t.sm_clocks_mhz.extend(clocks)

    return mutate


# (mutation, field, substring of the description); each yields exactly that one violation.
CASES = [
    pytest.param(lambda r: r.ClearField("cluster"), "cluster", "is required", id="no-cluster"),
    pytest.param(
        lambda r: r.cluster.ClearField("gpu_types"),
        "cluster.gpu_types",
        "must not be empty",
        id="no-gpu-types",
    ),
    pytest.param(
        lambda r: (r.cluster.ClearField("nodes"), r.cluster.ClearField("rack_power_budgets")),
        N,
        "must not be empty",
        id="no-nodes",
    ),
    pytest.param(
        _extra_type("", [1000]),
        "cluster.gpu_types[2].name",
        "must not be empty",
        id="type-empty-name",
    ),
    pytest.param(
        _extra_type(H100_SXM, [1000]),
        "cluster.gpu_types[2].name",
        'duplicate name "H100-SXM" (also cluster.gpu_types[1].name)',
        id="type-dup",
    ),
    pytest.param(
        _set(f"{P0}.memory_gib", 0.0),
        f"{P0}.memory_gib",
        "must be a positive finite number, got 0",
        id="memory-zero",
    ),
    pytest.param(
        _set(f"{P0}.peak_tflops", NAN), f"{P0}.peak_tflops", "positive finite", id="tflops-nan"
    ),
    pytest.param(
        _set(f"{P0}.memory_bandwidth_gbps", INF),
        f"{P0}.memory_bandwidth_gbps",
        "got inf",
        id="membw-inf",
    ),
    pytest.param(
        _set(f"{P0}.intra_node_bandwidth_gbps", -1.0),
        f"{P0}.intra_node_bandwidth_gbps",
        "got -1",
        id="intra-negative",
    ),
    pytest.param(
        _set(f"{P0}.idle_watts", -1.0),
        f"{P0}.idle_watts",
        "must be >= 0 and < tdp_watts (400)",
        id="idle-negative",
    ),
    pytest.param(
        _set(f"{P0}.idle_watts", 400.0), f"{P0}.idle_watts", "< tdp_watts (400)", id="idle-at-tdp"
    ),
    pytest.param(
        _extra_type("L4", []),
        "cluster.gpu_types[2].sm_clocks_mhz",
        "must not be empty",
        id="clocks-empty",
    ),
    pytest.param(
        lambda r: r.cluster.gpu_types[0].sm_clocks_mhz.append(0),
        f"{P0}.sm_clocks_mhz[4]",
        "must be > 0, got 0",
        id="clock-zero",
    ),
    pytest.param(
        lambda r: r.cluster.gpu_types[0].sm_clocks_mhz.append(1410),
        f"{P0}.sm_clocks_mhz[4]",
        "duplicate clock 1410",
        id="clock-dup",
    ),
    pytest.param(
        _set(f"{N}[2].name", ""), f"{N}[2].name", "must not be empty", id="node-empty-name"
    ),
    pytest.param(
        _set(f"{N}[1].name", "a100-0"),
        f"{N}[1].name",
        'duplicate name "a100-0" (also cluster.nodes[0].name)',
        id="node-dup",
    ),
    pytest.param(
        _set(f"{N}[2].gpu_type", "V100"),
        f"{N}[2].gpu_type",
        'unknown gpu type "V100"',
        id="node-unknown-type",
    ),
    pytest.param(
        _set(f"{N}[2].gpu_type", ""), f"{N}[2].gpu_type", "must not be empty", id="node-no-type"
    ),
    pytest.param(
        _set(f"{N}[2].gpu_count", 0), f"{N}[2].gpu_count", "must be > 0, got 0", id="gpu-count-zero"
    ),
    pytest.param(
        _set(f"{N}[2].gpu_count", 65),
        f"{N}[2].gpu_count",
        "must be <= 64 (max_gpus_per_node), got 65",
        id="gpu-count-over",
    ),
    pytest.param(
        lambda r: r.cluster.nodes[1].unavailable_gpu_indices.append(8),
        f"{N}[1].unavailable_gpu_indices[1]",
        "[0, 8), got 8",
        id="unavail-range",
    ),
    pytest.param(
        lambda r: r.cluster.nodes[1].unavailable_gpu_indices.append(-1),
        f"{N}[1].unavailable_gpu_indices[1]",
        "got -1",
        id="unavail-negative",
    ),
    pytest.param(
        lambda r: r.cluster.nodes[1].unavailable_gpu_indices.append(7),
        f"{N}[1].unavailable_gpu_indices[1]",
        "duplicate index 7",
        id="unavail-dup",
    ),
    pytest.param(_set(f"{N}[2].rack", ""), f"{N}[2].rack", "must not be empty", id="rack-empty"),
    pytest.param(
        _set(f"{N}[0].network_bandwidth_gbps", 0.0),
        f"{N}[0].network_bandwidth_gbps",
        "positive finite",
        id="network-zero",
    ),
    pytest.param(
        _set("cluster.power_budget_watts", 0.0),
        "cluster.power_budget_watts",
        "positive finite",
        id="power-zero",
    ),
    pytest.param(
        _set("cluster.power_budget_watts", NAN),
        "cluster.power_budget_watts",
        "positive finite",
        id="power-nan",
    ),
    pytest.param(
        _set("cluster.rack_power_budgets[0].rack", "r9"),
        "cluster.rack_power_budgets[0].rack",
        'unknown rack "r9"',
        id="rack-unknown",
    ),
    pytest.param(
        _set("cluster.rack_power_budgets[0].rack", ""),
        "cluster.rack_power_budgets[0].rack",
        "must not be empty",
        id="rack-budget-no-rack",
    ),
    pytest.param(
        lambda r: r.cluster.rack_power_budgets.add(rack="r1", watts=5000),
        "cluster.rack_power_budgets[1].rack",
        'duplicate budget for rack "r1"',
        id="rack-dup",
    ),
    pytest.param(
        _set("cluster.rack_power_budgets[0].watts", -5.0),
        "cluster.rack_power_budgets[0].watts",
        "got -5",
        id="rack-watts",
    ),
    # Idle power: 16 A100 x 50 W + 4 H100 x 70 W = 1080 W in all, 800 W in rack r1.
    pytest.param(
        _set("cluster.power_budget_watts", 1000.0),
        "cluster.power_budget_watts",
        "below the idle power of the cluster's GPUs and nodes (1080 W)",
        id="power-below-idle",
    ),
    pytest.param(
        _set("cluster.rack_power_budgets[0].watts", 700.0),
        "cluster.rack_power_budgets[0].watts",
        'below the idle power of rack "r1"\'s GPUs and nodes (800 W)',
        id="rack-below-idle",
    ),
    pytest.param(
        _set("weights.energy", -1.0), "weights.energy", "non-negative finite", id="weight-energy"
    ),
    pytest.param(
        _set("weights.throughput", NAN),
        "weights.throughput",
        "non-negative finite",
        id="weight-throughput-nan",
    ),
    pytest.param(
        _set("options.time_budget.seconds", 0),
        "options.time_budget",
        "must be > 0",
        id="budget-zero",
    ),
    pytest.param(
        _set("options.time_budget.seconds", 301),
        "options.time_budget",
        "must be <= 300s",
        id="budget-over",
    ),
    pytest.param(
        _set("options.relative_gap", 1.0),
        "options.relative_gap",
        "must be in [0, 1), got 1",
        id="gap-one",
    ),
    pytest.param(
        _set("options.relative_gap", -0.1),
        "options.relative_gap",
        "must be in [0, 1)",
        id="gap-negative",
    ),
    pytest.param(
        _set("options.threads", -1), "options.threads", "must be in [0, 256]", id="threads-negative"
    ),
    pytest.param(_set("options.threads", 257), "options.threads", "got 257", id="threads-over"),
    pytest.param(_set("options.seed", -1), "options.seed", "must be >= 0, got -1", id="seed"),
    pytest.param(
        _set("options.backend", 9), "options.backend", "unknown backend 9", id="backend-unknown"
    ),
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


@pytest.mark.parametrize(
    ("limits", "field", "text"),
    [
        (Limits(max_nodes=2), "cluster.nodes", "3 nodes exceed the limit of 2 (max_nodes)"),
        (Limits(max_jobs=2), "jobs", "3 jobs exceed the limit of 2 (max_jobs)"),
        (Limits(max_profile_points_per_job=5), BP, "6 points exceed the limit of 5"),
        (
            Limits(max_profile_points=5),
            "jobs",
            "the jobs' profiles hold 10 points together, above the limit of 5 (max_profile_points",
        ),
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
        "cluster.nodes[2].rack",
        "jobs[0].min_gpus",
        "options.seed",
    ]


def test_an_empty_job_list_is_valid() -> None:
    req = make_request()
    req.ClearField("jobs")
    assert validate_request(req, Limits()) == []


def test_long_names_are_shortened_in_descriptions() -> None:
    req = make_request()
    req.cluster.nodes[2].gpu_type = "X" * 1000
    [v] = validate_request(req, Limits())
    assert v.field == "cluster.nodes[2].gpu_type"
    assert len(v.description) < 100


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
        FieldViolation("options.pyomo_solver", f"is only used with BACKEND_PYOMO, got {shown}")
    ]


def test_an_unavailable_pyomo_solver_lists_the_available_ones() -> None:
    from solver.exact.backends.pyomo_backend import available_solvers

    [v] = _pyomo(pb.BACKEND_PYOMO, "gurobi-9000")
    assert v.field == "options.pyomo_solver"
    assert v.description == (
        'solver "gurobi-9000" is not available here; available: ' + ", ".join(available_solvers())
    )
