"""Edge values of scripts/fuzz: each finding is reported at its field by validate_request and is
INVALID_ARGUMENT on every RPC, and values at the limits of solver.app.limits (one sample
before a deadline, the model size maxima, one parameter, the slowest GPUs) solve to valid
plans with finite objectives."""

from __future__ import annotations

import math
import time

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import (
    MAX_BATCH_TOKENS,
    MAX_HIDDEN_SIZE,
    MAX_SEQUENCE_LENGTH,
    MIN_BANDWIDTH_GBPS,
    MIN_DEADLINE_SAMPLES,
    MIN_MODEL_PARAMETERS,
    MIN_TFLOPS,
    Limits,
)
from solver.app.validation import validate_request
from tests.factories import make_request
from tests.service_helpers import WAIT, Stub
from tests.service_helpers import bad_request as _bad_request
from tests.validation_helpers import P0, Mutation, N, _set, make_plan


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
