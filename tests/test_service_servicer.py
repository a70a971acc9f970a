"""The service's RPCs on a real loopback server (solver.service.servicer): Solve's plans,
invalid requests as INVALID_ARGUMENT with field violations, internal errors that do not leak,
EvaluatePlan, ValidateSnapshot, messages over 4 MiB and GetServerInfo."""

from __future__ import annotations

import re
from importlib import metadata

import grpc
import pytest

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.service.config import ServerConfig
from solver.service.servicer import SchedulerServicer
from solver.service.solves import shared_pool
from tests.factories import make_request
from tests.fakes import Broken
from tests.process_helpers import gone_within
from tests.service_helpers import WAIT, Stub, bad_request, serving


def test_solve_returns_a_complete_plan(stub: Stub) -> None:
    resp = stub.Solve(make_request(), timeout=WAIT)
    assert sorted(a.job for a in resp.plan.assignments) == ["bert", "llm", "resnet"]
    assert resp.stats.termination in (
        pb.TERMINATION_OPTIMAL,
        pb.TERMINATION_FEASIBLE,
        pb.TERMINATION_FALLBACK,
    )
    assert resp.stats.objective == pytest.approx(resp.plan.objective.total)
    for a in resp.plan.assignments:
        if a.state == pb.JOB_STATE_RUNNING:
            assert a.num_gpus == a.data_parallel * a.tensor_parallel * a.pipeline_parallel
            assert sum(len(s.gpu_indices) for s in a.placement) == a.num_gpus
        else:
            assert a.state == pb.JOB_STATE_QUEUED and not a.placement


def test_invalid_request_is_invalid_argument_with_field_violations(stub: Stub) -> None:
    req = make_request()
    req.jobs[2].max_gpus = 1
    req.options.seed = -1
    with pytest.raises(grpc.RpcError) as info:
        stub.Solve(req, timeout=WAIT)
    err = info.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(err) == [
        ("jobs[2].max_gpus", "must be >= min_gpus (2), got 1"),
        ("options.seed", "must be >= 0, got -1"),
    ]
    assert err.details().startswith("invalid request (2 problems): jobs[2].max_gpus: must be")


def test_many_violations_are_cut_to_fit_in_trailing_metadata(stub: Stub) -> None:
    req = make_request()
    for i in range(3000):
        req.jobs.add(name=f"broken-{i}")
    with pytest.raises(grpc.RpcError) as info:
        stub.Solve(req, timeout=WAIT)
    err = info.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    shown = bad_request(err)
    assert 10 < len(shown) < 3 * 3000
    assert shown[0] == ("jobs[3].workload", "one of model or profile is required")
    assert f"(details list the first {len(shown)})" in err.details()


def test_internal_errors_do_not_leak_to_the_client() -> None:
    with serving(solver=Broken()) as (_, stub), pytest.raises(grpc.RpcError) as info:
        stub.Solve(make_request(), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.INTERNAL
    details = info.value.details()
    assert re.fullmatch(
        r"internal error while solving \(server log reference [0-9a-f]{12}\)", details
    )
    assert "secret" not in details


def test_evaluate_plan_of_a_solved_plan_is_valid_with_the_same_objective(stub: Stub) -> None:
    req = make_request()
    resp = stub.Solve(req, timeout=WAIT)
    ev = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=resp.plan), timeout=WAIT)
    assert ev.valid, ev.violations
    assert list(ev.violations) == []
    assert ev.objective.total == pytest.approx(resp.plan.objective.total, rel=1e-9, abs=1e-12)
    assert ev.objective.throughput == pytest.approx(resp.plan.objective.throughput, rel=1e-9)


def test_evaluate_plan_reports_broken_constraints(stub: Stub) -> None:
    req = make_request()
    plan = pb.Plan(
        assignments=[
            pb.JobAssignment(job="llm", state=pb.JOB_STATE_QUEUED),
            pb.JobAssignment(
                job="bert",
                state=pb.JOB_STATE_RUNNING,
                gpu_type="A100-80GB",
                data_parallel=4,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=1410,
                placement=[pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3])],
            ),
            pb.JobAssignment(
                job="resnet",
                state=pb.JOB_STATE_RUNNING,
                gpu_type="A100-80GB",
                data_parallel=4,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=1410,
                placement=[pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3])],
            ),
        ]
    )
    ev = stub.EvaluatePlan(pb.EvaluatePlanRequest(request=req, plan=plan), timeout=WAIT)
    assert not ev.valid
    assert ev.violations
    assert not ev.HasField("objective")


def test_evaluate_plan_rejects_a_malformed_plan(stub: Stub) -> None:
    plan = pb.Plan(
        assignments=[pb.JobAssignment(job=j, state=pb.JOB_STATE_QUEUED) for j in ("llm", "bert")]
        + [
            pb.JobAssignment(
                job="resnet",
                state=pb.JOB_STATE_RUNNING,
                gpu_type="A100-80GB",
                data_parallel=1,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=1410,
                placement=[pb.GpuSlice(node="nope", gpu_indices=[0])],
            )
        ]
    )
    with pytest.raises(grpc.RpcError) as info:
        stub.EvaluatePlan(pb.EvaluatePlanRequest(request=make_request(), plan=plan), timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(info.value) == [
        ("plan.assignments[2].placement[0].node", 'unknown node "nope"')
    ]


def test_validate_snapshot_summarises_valid_jobs(stub: Stub) -> None:
    resp = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=make_request()), timeout=WAIT)
    assert resp.valid and list(resp.violations) == []
    assert [j.job for j in resp.jobs] == ["llm", "bert", "resnet"]
    assert all(j.num_configurations > 0 for j in resp.jobs)
    best = {j.job: j.best_samples_per_second for j in resp.jobs}
    assert best["bert"] == pytest.approx(360.0)
    assert best["resnet"] == pytest.approx(4000.0)


def test_validate_snapshot_returns_violations_instead_of_failing(stub: Stub) -> None:
    req = make_request()
    req.cluster.nodes[0].gpu_count = 0
    resp = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=req), timeout=WAIT)
    assert not resp.valid
    first = resp.violations[0]
    assert (first.field, first.description) == ("cluster.nodes[0].gpu_count", "must be > 0, got 0")
    assert list(resp.jobs) == []


def test_messages_over_4_mib_are_accepted(stub: Stub) -> None:
    req = make_request()
    req.cluster.ClearField("power_budget_watts")  # 20,000 more nodes idle far above them
    req.cluster.ClearField("rack_power_budgets")
    template = req.cluster.nodes[0]
    for i in range(20001):
        n = req.cluster.nodes.add()
        n.CopyFrom(template)
        n.name = f"{i:06d}-" + "x" * 250
    assert req.ByteSize() > 4 * 1024 * 1024
    resp = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=req), timeout=WAIT)
    assert [v.field for v in resp.violations] == ["cluster.nodes"]
    assert "20004 nodes exceed the limit of 20000" in resp.violations[0].description


def test_get_server_info(stub: Stub) -> None:
    info = stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=WAIT)
    assert info.version == solver.__version__
    assert list(info.backends) == [
        pb.BACKEND_AUTO,
        pb.BACKEND_CPSAT,
        pb.BACKEND_HIGHS,
        pb.BACKEND_PYOMO,
        pb.BACKEND_AGGREGATE,
        pb.BACKEND_DECOMPOSED,
        pb.BACKEND_HEURISTIC,
    ]
    assert (info.max_time_budget.seconds, info.max_time_budget.nanos) == (300, 0)
    assert (info.max_nodes, info.max_jobs, info.max_concurrent_solves) == (20000, 20000, 2)
    assert info.max_profile_points == 500_000
    assert info.max_rule_node_pairs == 4_000_000
    assert info.max_message_bytes == 256 * 1024 * 1024
    assert dict(info.solver_versions) == {
        "ortools": metadata.version("ortools"),
        "protobuf": metadata.version("protobuf"),
        "grpcio": metadata.version("grpcio"),
        "highspy": metadata.version("highspy"),
        "pyomo": metadata.version("pyomo"),
        "ray": metadata.version("ray"),
    }


def test_a_servicer_whose_solves_join_a_ray_cluster_keeps_its_workers_to_itself() -> None:
    # Its workers keep their connection to the cluster, and Ray ends them 60 s after the
    # cluster stops: in the shared pool one died under another server's call (found as a
    # flaky test). Its own pool is closed with it; the shared one stays for the process.
    joined = SchedulerServicer(ServerConfig(port=0, ray_address="127.0.0.1:1"))
    plain = SchedulerServicer(ServerConfig(port=0))
    try:
        assert plain.pool is shared_pool()
        assert joined.pool is not shared_pool()
        joined.pool.warm_now(1)
        [pid] = joined.pool.idle_pids()
    finally:
        joined.close()
        plain.close()
    assert gone_within(pid, 10), "its own pool's worker outlived it"
    shared_pool().warm_now(1)  # still open: a closed pool closes what comes back to it
    assert shared_pool().idle() >= 1
