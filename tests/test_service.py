"""The gRPC service on a real loopback server: plans, rich errors, limits, health, shutdown."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from grpc_status import rpc_status

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver._proto.grpc.reflection.v1 import reflection_pb2 as reflection_v1
from solver._proto.grpc.reflection.v1 import reflection_pb2_grpc as reflection_v1_grpc
from solver.app.limits import Limits
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.offline.generate import generate, spec_from_args
from solver.service.config import (
    ConfigError,
    ServerConfig,
    add_server_arguments,
    config_from_args,
)
from solver.service.server import SchedulerServer, build_server
from solver.service.servicer import SERVICE_NAME, check_slots
from tests.factories import make_request, running_server
from tests.fakes import (
    Broken,
    Dying,
    Held,
    Recording,
    UntilDeadline,
    records,
    release,
    wait_entered,
)

ROOT = Path(__file__).resolve().parent.parent
WAIT = 30.0
"""Upper bound of every wait in these tests; none is expected to come close."""

Stub = scheduler_pb2_grpc.SchedulerServiceStub


@contextmanager
def serving(
    solver: Solver | None = None, **overrides: Any
) -> Iterator[tuple[SchedulerServer, Stub]]:
    """A started loopback server with `solver` and non-default settings, and a stub for it."""
    with (
        running_server(solver, **overrides) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        yield srv, Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated


def retry_delay(err: grpc.RpcError) -> float:
    """The google.rpc.RetryInfo delay of a refused call, in seconds."""
    status = rpc_status.from_call(err)
    assert status is not None
    [detail] = status.details
    retry = error_details_pb2.RetryInfo()
    assert detail.Unpack(retry)
    return float(retry.retry_delay.ToMilliseconds()) / 1000


def bad_request(err: grpc.RpcError) -> list[tuple[str, str]]:
    """The google.rpc.BadRequest field violations of a failed call."""
    status = rpc_status.from_call(err)
    assert status is not None
    [detail] = status.details
    bad = error_details_pb2.BadRequest()
    assert detail.Unpack(bad)
    return [(v.field, v.description) for v in bad.field_violations]


# ---------------------------------------------------------------- Solve


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


def test_over_max_concurrent_solves_and_queue_a_call_is_refused_with_a_hint(
    tmp_path: Path,
) -> None:
    """Two slots and no queue: the third call is refused at once, told to come back about when
    the earliest running solve is due (a 2 s budget: within it)."""
    request = make_request()
    request.options.time_budget.FromSeconds(2)
    try:
        with serving(Held(tmp_path), max_concurrent_solves=2, max_queued_solves=0) as (_, stub):
            finished: queue.Queue[Any] = queue.Queue()
            calls = [stub.Solve.future(request, timeout=WAIT) for _ in range(2)]
            assert wait_entered(tmp_path, 2)
            third = stub.Solve.future(request, timeout=WAIT)
            third.add_done_callback(finished.put)
            refused = finished.get(timeout=WAIT)
            assert _code(refused) == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_concurrent_solves=2" in refused.exception().details()
            assert 0.05 <= retry_delay(refused.exception()) <= 2.0
            release(tmp_path)
            assert [_code(c) for c in calls].count(grpc.StatusCode.OK) == 2
            # The slots are free again once the held solves returned.
            assert len(stub.Solve(make_request(), timeout=WAIT).plan.assignments) == 3
    finally:
        release(tmp_path)


def test_a_call_waits_for_a_slot_within_its_share_of_the_budget(tmp_path: Path) -> None:
    """One slot, one place in the queue: a call that finds the slot taken waits, and is
    solved once the slot frees up within a quarter of its budget."""
    request = make_request()
    request.options.time_budget.FromSeconds(8)
    try:
        with serving(Held(tmp_path), max_concurrent_solves=1, max_queued_solves=1) as (_, stub):
            first = stub.Solve.future(request, timeout=WAIT)
            assert wait_entered(tmp_path, 1)
            waiting = stub.Solve.future(request, timeout=WAIT)
            time.sleep(0.5)
            assert not waiting.done()  # queued, not refused
            release(tmp_path)
            assert first.result(timeout=WAIT).plan.assignments
            assert waiting.result(timeout=WAIT).plan.assignments
    finally:
        release(tmp_path)


def test_admission_comes_before_decoding(tmp_path: Path) -> None:
    """With every slot taken, bytes that are no request are refused for the slot: they were
    never parsed. Once a slot is free, the same bytes are INVALID_ARGUMENT."""
    garbage = b"\x0a\xff\xff\xff\xff\x0f"
    try:
        with serving(Held(tmp_path), max_concurrent_solves=1, max_queued_solves=0) as (srv, stub):
            call = stub.Solve.future(make_request(), timeout=WAIT)
            assert wait_entered(tmp_path)
            with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
                raw = ch.unary_unary("/dsfro.v1.SchedulerService/Solve")
                with pytest.raises(grpc.RpcError) as info:
                    raw(garbage, timeout=WAIT)
                assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                release(tmp_path)
                assert call.result(timeout=WAIT).plan.assignments
                with pytest.raises(grpc.RpcError) as info:
                    raw(garbage, timeout=WAIT)
                assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    finally:
        release(tmp_path)


def _code(call: Any) -> grpc.StatusCode:
    exc = call.exception(timeout=WAIT)
    return grpc.StatusCode.OK if exc is None else exc.code()


def test_the_rpc_deadline_bounds_the_solve(tmp_path: Path) -> None:
    """A 60 s budget under a 3 s RPC deadline: the solver is told to stop before the deadline."""
    req = make_request()
    req.options.time_budget.FromSeconds(60)
    path = tmp_path / "seen.jsonl"
    settings = SolverSettings(rpc_deadline_margin_seconds=0.5)
    with serving(UntilDeadline(path, settings)) as (_, stub):
        start = time.monotonic()
        resp = stub.Solve(req, timeout=3.0)
    assert len(resp.plan.assignments) == 3  # an answer, not DEADLINE_EXCEEDED
    [seen] = records(path)
    # Before the RPC deadline (start + 3 s) by the margin, cut to a tenth of the time left
    # (0.3 s): the solver keeps most of the time.
    assert start + 2.6 < seen["end"] <= start + 3.0 - 0.25


def test_the_budget_counts_from_the_calls_arrival(tmp_path: Path) -> None:
    """Without an RPC deadline, the solver stops at the budget counted from the call's arrival
    (decoding and conversion spend it too), less the time to send the answer."""
    path = tmp_path / "seen.jsonl"
    request = make_request()
    request.options.time_budget.FromSeconds(20)
    with serving(Recording(path)) as (_, stub):
        sent = time.monotonic()
        stub.Solve(request)
    [seen] = records(path)
    assert sent <= seen["start"] < seen["end"] < sent + 20.0
    assert seen["pid"] != os.getpid()  # solved in a worker process


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
    assert info.max_message_bytes == 256 * 1024 * 1024
    assert dict(info.solver_versions) == {
        "ortools": metadata.version("ortools"),
        "protobuf": metadata.version("protobuf"),
        "grpcio": metadata.version("grpcio"),
        "highspy": metadata.version("highspy"),
        "pyomo": metadata.version("pyomo"),
        "ray": metadata.version("ray"),
    }


# ---------------------------------------------------------------- health, reflection, shutdown


def test_health_is_serving(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for name in ("", SERVICE_NAME):
        resp = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=WAIT)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_v1alpha_lists_and_describes_the_service(channel: grpc.Channel) -> None:
    db = ProtoReflectionDescriptorDatabase(channel)
    assert {
        "dsfro.v1.SchedulerService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= set(db.get_services())
    file = db.FindFileContainingSymbol("dsfro.v1.SchedulerService")
    assert (file.name, file.package) == ("dsfro/v1/scheduler.proto", "dsfro.v1")


def _reflect_v1(
    channel: grpc.Channel, *requests: reflection_v1.ServerReflectionRequest
) -> list[reflection_v1.ServerReflectionResponse]:
    # Generated gRPC code is unannotated.
    stub = reflection_v1_grpc.ServerReflectionStub(channel)  # type: ignore[no-untyped-call]
    return list(stub.ServerReflectionInfo(iter(requests), timeout=WAIT))


def _files(response: reflection_v1.ServerReflectionResponse) -> dict[str, Any]:
    assert response.WhichOneof("message_response") == "file_descriptor_response", response
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(b)
        for b in response.file_descriptor_response.file_descriptor_proto
    ]
    return {f.name: f for f in files}


def test_reflection_v1_lists_and_describes_the_service(channel: grpc.Channel) -> None:
    listed, scheduler, itself = _reflect_v1(
        channel,
        reflection_v1.ServerReflectionRequest(list_services=""),
        reflection_v1.ServerReflectionRequest(file_containing_symbol="dsfro.v1.SchedulerService"),
        reflection_v1.ServerReflectionRequest(
            file_containing_symbol="grpc.reflection.v1.ServerReflection"
        ),
    )
    assert {
        "dsfro.v1.SchedulerService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= {s.name for s in listed.list_services_response.service}
    files = _files(scheduler)
    proto = files["dsfro/v1/scheduler.proto"]
    assert proto.package == "dsfro.v1"
    [service] = proto.service
    assert service.name == "SchedulerService"
    assert "GetServerInfo" in {m.name for m in service.method}
    assert "google/protobuf/duration.proto" in files  # dependencies come along
    assert _files(itself)["grpc/reflection/v1/reflection.proto"].package == "grpc.reflection.v1"


def test_reflection_v1_reports_an_unknown_symbol(channel: grpc.Channel) -> None:
    [response] = _reflect_v1(
        channel, reflection_v1.ServerReflectionRequest(file_containing_symbol="no.such.Service")
    )
    assert response.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert response.original_request.file_containing_symbol == "no.such.Service"


def test_shutdown_answers_a_running_solve_with_what_it_has(tmp_path: Path) -> None:
    """SIGTERM (stop): the running solve is told to stop and its answer reaches its caller;
    health says NOT_SERVING meanwhile."""
    try:
        with serving(Held(tmp_path)) as (srv, stub):
            call = stub.Solve.future(make_request(), timeout=WAIT)
            assert wait_entered(tmp_path)
            stopped = srv.stop(WAIT)
            check = srv.health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), None)
            assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
            assert len(call.result(timeout=WAIT).plan.assignments) == 3
            assert stopped.wait(WAIT)
    finally:
        release(tmp_path)


def test_server_py_serves_until_sigterm_then_exits_0() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSFRO_")}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "server.py"), "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = _wait_for_port(proc)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            resp = health_pb2_grpc.HealthStub(ch).Check(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=WAIT
            )
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _wait_for_port(proc: subprocess.Popen[str]) -> int:
    assert proc.stderr is not None
    found: list[int] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                found.append(int(m.group(1)))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(WAIT)
    assert found, "server.py did not report its port"
    return found[0]


# ---------------------------------------------------------------- configuration


def _args(*argv: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(list(argv))


def test_config_defaults() -> None:
    assert config_from_args(_args(), {}) == ServerConfig()


def test_config_from_environment_and_flags() -> None:
    env = {
        "DSFRO_HOST": "0.0.0.0",
        "DSFRO_PORT": "6000",
        "DSFRO_MAX_CONCURRENT_SOLVES": "4",
        "DSFRO_MAX_MESSAGE_BYTES": str(64 * 1024 * 1024),
        "DSFRO_MAX_TIME_BUDGET_SECONDS": "2",
    }
    c = config_from_args(_args("--port", "7000"), env)
    assert (c.host, c.port, c.max_concurrent_solves) == ("0.0.0.0", 7000, 4)
    assert c.max_message_bytes == 64 * 1024 * 1024
    assert c.limits == replace(
        Limits(), max_time_budget_seconds=2.0, default_time_budget_seconds=2.0
    )


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ((), {"DSFRO_PORT": "http"}, "DSFRO_PORT must be an integer in [0, 65535], got 'http'"),
        (("--port", "70000"), {}, "--port must be an integer in [0, 65535]"),
        ((), {"DSFRO_MAX_CONCURRENT_SOLVES": "0"}, "DSFRO_MAX_CONCURRENT_SOLVES must be"),
        ((), {"DSFRO_MAX_MESSAGE_BYTES": "1k"}, "DSFRO_MAX_MESSAGE_BYTES must be an integer"),
        (
            (),
            {"DSFRO_MAX_TIME_BUDGET_SECONDS": "-1"},
            "DSFRO_MAX_TIME_BUDGET_SECONDS must be a positive number of seconds, got '-1'",
        ),
        ((), {"DSFRO_HOST": ""}, "DSFRO_HOST must not be empty"),
        (("--max-concurrent-solves", "8", "--workers", "4"), {}, "--workers must be"),
    ],
)
def test_bad_settings_name_their_source(
    argv: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_args(_args(*argv), env)
    assert message in str(info.value)


def test_a_server_profile_fills_what_requests_leave_unset(tmp_path: Path) -> None:
    profile = tmp_path / "prod.toml"
    profile.write_text('[weights]\nenergy = 7.5\n[solver]\nbackend = "heuristic"\n')
    config = config_from_args(_args("--profile", str(profile)), {})
    server = build_server(replace(config, port=0))
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
            request = make_request()
            request.ClearField("weights")
            response = stub.Solve(request, timeout=WAIT)
            # From the profile: the heuristic backend, which runs no exact solver.
            assert response.stats.backend_used == pb.BACKEND_HEURISTIC
            assert "heuristic only" in response.stats.detail
            o = response.plan.objective
            assert o.energy > 0
            # energy weight 7.5 from the profile; the other weights at their defaults
            assert o.total == pytest.approx(
                o.throughput
                - 7.5 * o.energy
                - 0.05 * o.migration
                - 0.01 * o.locality
                - 0.5 * o.deadline
            )
            request.options.backend = pb.BACKEND_AGGREGATE  # the request's own field wins
            response = stub.Solve(request, timeout=WAIT)
            assert response.stats.HasField("best_bound")
    finally:
        server.stop(grace=1.0)


def test_a_bad_server_profile_names_the_file_and_key(tmp_path: Path) -> None:
    profile = tmp_path / "bad.toml"
    profile.write_text("[weights]\nenergy = -1\n")
    with pytest.raises(ConfigError) as info:
        config_from_args(_args(), {"DSFRO_PROFILE": str(profile)})
    assert "DSFRO_PROFILE" in str(info.value) and "energy" in str(info.value)


def test_enough_rpc_threads_for_many_solves() -> None:
    c = config_from_args(_args("--max-concurrent-solves", "30"), {})
    assert c.grpc_workers > c.max_concurrent_solves


def _unproven_in_seconds() -> pb.SolveRequest:
    """A power-capped 256-node snapshot at a 60 s budget: no solver proves it within seconds,
    so the solve is still searching when the test acts."""
    request = generate(spec_from_args(["--family", "hetero-power-256", "--jobs", "400"]))
    request.options.time_budget.FromSeconds(60)
    return request


def test_a_cancelled_solve_frees_its_slot_long_before_its_budget() -> None:
    """One slot; a 60 s solve of a power-bound snapshot is cancelled: the slot is free again
    within seconds (the search, the solvers and the worker stop), not after the budget."""
    request = _unproven_in_seconds()
    with serving(max_concurrent_solves=1) as (_, stub):
        call = stub.Solve.future(request)
        time.sleep(1.0)  # the solve is under way (the heuristic's first plan takes 0.1 s)
        call.cancel()
        cancelled = time.monotonic()
        quick = pb.SolveRequest()
        quick.CopyFrom(request)
        quick.options.time_budget.FromMilliseconds(200)
        while True:
            try:
                stub.Solve(quick, timeout=WAIT)
                break
            except grpc.RpcError as e:
                assert e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert time.monotonic() - cancelled < 20, "the cancelled solve kept its slot"
                time.sleep(0.05)


def test_on_shutdown_a_running_solve_answers_with_its_best_plan_at_once() -> None:
    """A 60 s solve in flight when the server stops (as on SIGTERM) is answered with the best
    checked plan it has, well within the grace period, not cut off."""
    request = _unproven_in_seconds()
    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        stub = Stub(ch)  # type: ignore[no-untyped-call]
        call = stub.Solve.future(request, timeout=WAIT)
        time.sleep(3.0)  # past the first plan (about 0.3 s here), before any proof
        stopped = time.monotonic()
        done = srv.stop(20.0)
        response = call.result(timeout=WAIT)
        answered = time.monotonic() - stopped
        assert done.wait(WAIT)
    assert answered < 10, "the solve ran on instead of answering at shutdown"
    assert response.stats.termination in (pb.TERMINATION_FEASIBLE, pb.TERMINATION_FALLBACK)
    assert len(response.plan.assignments) == len(request.jobs)


def test_checks_over_their_limit_are_refused_with_a_retry_hint() -> None:
    """ValidateSnapshot calls beyond the check slots get RESOURCE_EXHAUSTED with RetryInfo, so
    that they cannot hold every worker thread; health still answers meanwhile."""
    config = ServerConfig(
        host="127.0.0.1", port=0, max_concurrent_solves=1, max_queued_solves=1, grpc_workers=6
    )
    slots = check_slots(config)
    assert slots == 2
    with serving(max_concurrent_solves=1, max_queued_solves=1, grpc_workers=6) as (srv, stub):
        taken = [srv.servicer._checks.take() for _ in range(slots)]  # as if running
        assert all(taken)
        try:
            request = pb.ValidateSnapshotRequest(request=make_request())
            with pytest.raises(grpc.RpcError) as refused:
                stub.ValidateSnapshot(request, timeout=WAIT)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert retry_delay(refused.value) == pytest.approx(1.0)
            with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
                health = health_pb2_grpc.HealthStub(ch)
                answer = health.Check(health_pb2.HealthCheckRequest(), timeout=WAIT)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            for _ in range(slots):
                srv.servicer._checks.give()
        assert stub.ValidateSnapshot(request, timeout=WAIT).valid


def test_a_worker_that_dies_before_any_plan_answers_with_the_quick_plan() -> None:
    """The worker dies before it offered a plan: the server answers with the quick plan it
    makes itself, a FALLBACK that says why, and counts the crash."""
    with serving(Dying(first=False)) as (_, stub):
        response = stub.Solve(make_request(), timeout=WAIT)
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    assert "killed by SIGKILL" in response.stats.detail
    assert "before any plan" in response.stats.detail
    assert len(response.plan.assignments) == 3


def test_a_worker_that_dies_after_its_first_plan_answers_with_it() -> None:
    with serving(Dying(first=True)) as (_, stub):
        response = stub.Solve(make_request(), timeout=WAIT)
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    assert "the first plan, sent ahead by the worker" in response.stats.detail
    assert len(response.plan.assignments) == 3


def test_reflection_can_be_switched_off() -> None:
    assert config_from_args(_args("--reflection", "off"), {}).reflection is False
    assert config_from_args(_args(), {"DSFRO_REFLECTION": "off"}).reflection is False
    assert config_from_args(_args(), {}).reflection is True
    with pytest.raises(ConfigError, match="--reflection must be on or off"):
        config_from_args(_args("--reflection", "maybe"), {})
    with (
        serving(reflection=False) as (srv, _),
        grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
        pytest.raises(grpc.RpcError) as info,
    ):
        _reflect_v1(ch, reflection_v1.ServerReflectionRequest(list_services=""))
    assert info.value.code() is grpc.StatusCode.UNIMPLEMENTED


def test_binding_beyond_loopback_in_plaintext_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="solver.service.server"), serving():
        pass
    assert not [r for r in caplog.records if "beyond loopback" in r.getMessage()]
    with caplog.at_level("WARNING", logger="solver.service.server"), serving(host="0.0.0.0"):
        pass
    [warning] = [r for r in caplog.records if "beyond loopback" in r.getMessage()]
    assert warning.levelname == "WARNING" and "in plaintext" in warning.getMessage()
    assert "anyone who can reach it" in warning.getMessage()


def test_the_metrics_endpoint_exposes_the_named_series() -> None:
    with serving(metrics_port=0, max_concurrent_solves=1) as (srv, stub):
        assert srv.metrics_port is not None
        stub.Solve(make_request(), timeout=WAIT)
        bad = make_request()
        bad.jobs[0].weight = float("nan")
        with pytest.raises(grpc.RpcError):
            stub.Solve(bad, timeout=WAIT)
        url = f"http://127.0.0.1:{srv.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=WAIT) as page:
            text = page.read().decode()
    solved = re.search(r'^dsfro_solves_total\{backend="\w+",termination="\w+"\} (\S+)$', text, re.M)
    assert solved is not None and float(solved.group(1)) == 1.0
    assert re.search(r"^dsfro_solve_seconds_count 1\.0$", text, re.M)
    assert re.search(r'^dsfro_rejections_total\{reason="invalid_argument"\} 1\.0$', text, re.M)
    assert re.search(r"^dsfro_solves_in_flight 0\.0$", text, re.M)
    assert re.search(r"^dsfro_checks_in_flight 0\.0$", text, re.M)
    assert re.search(r'^dsfro_worker_restarts_total\{kind="exact"\} \d', text, re.M)
    assert "dsfro_solve_relative_gap_bucket" in text


def test_the_solve_workers_are_started_before_the_server_serves() -> None:
    """A worker's imports cost about a second: paid at start, not in a caller's budget."""
    code = (
        "from solver.service.server import build_server\n"
        "from solver.service.config import ServerConfig\n"
        "srv = build_server(ServerConfig(port=0))\n"
        "before = srv.servicer.pool.idle()\n"
        "srv.start()\n"
        "print(before, srv.servicer.pool.idle())\n"
        "srv.stop(None).wait(10)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=WAIT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "3"]  # a worker per slot (2) and a spare
