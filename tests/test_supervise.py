"""Supervised workers: memory limits, and health that says when the service cannot serve."""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1.scheduler_pb2_grpc import SchedulerServiceStub as Stub
from solver.app.convert import load_request_json
from solver.core import orchestrator
from solver.domain import Backend, Problem, SolveResult
from solver.exact import isolated as process
from solver.exact.backends import ExactOptions, SolverStatus
from solver.perfmodel.configs import build_config_set
from solver.runtime import memory as supervise
from solver.runtime import pools as executor
from solver.runtime.pools import LocalExecutor, WorkerLost
from solver.service.config import ServerConfig, add_server_arguments, config_from_args
from solver.service.server import build_server
from solver.service.servicer import CRASH_LOOP_RESTARTS, SERVICE_NAME
from tests.factories import canned_result, cluster, job, make_request, node, point, problem

WAIT = 30.0
MIB = 2**20
ROOT = Path(__file__).resolve().parents[1]


def hog(megabytes: int) -> int:
    """Runs in a worker: touches `megabytes` of memory and holds it a while."""
    block = bytearray(megabytes * MIB)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(2.0)
    return len(block)


def own_rss(_: int) -> int:
    """Runs in a worker: its resident memory."""
    rss = supervise.resident_bytes(os.getpid())
    assert rss is not None
    return rss


@pytest.fixture
def memory_limit() -> Iterator[None]:
    yield
    supervise.set_worker_memory_limit(None)


def test_a_pool_worker_over_its_memory_limit_is_killed_and_named(memory_limit: None) -> None:
    pool = LocalExecutor(workers=1)
    try:
        baseline = pool.map(own_rss, [0])[0]
        supervise.set_worker_memory_limit(baseline + 100 * MIB)
        assert pool.map(hog, [20]) == [20 * MIB]  # under the limit: untouched
        with pytest.raises(WorkerLost, match=r"over its memory limit of \d+ MiB"):
            pool.map(hog, [400])
        assert pool.map(hog, [1]) == [MIB]  # replaced
    finally:
        pool.close()


def test_without_a_limit_nothing_is_watched() -> None:
    assert supervise.worker_memory_limit() is None
    with supervise.watching(lambda: pytest.fail("measured without a limit")) as killed:
        time.sleep(3 * supervise.WATCH_SECONDS)
    assert killed == []


def test_the_exact_worker_over_its_memory_limit_is_an_error_with_the_reason(
    memory_limit: None,
) -> None:
    p = problem(
        cluster(*(node(f"n{i}") for i in range(2)), power=1e6),
        *(job(f"j{k}", point(2, 100 + k, watts=500)) for k in range(3)),
    )
    supervise.set_worker_memory_limit(16 * MIB)  # below any Python interpreter
    out = process.solve_in_process(
        p,
        build_config_set(p),
        Backend.HIGHS,
        hint=None,
        options=ExactOptions(time_limit=20.0, threads=1),
        deadline=time.monotonic() + 20.0,
    )
    assert out.status is SolverStatus.ERROR
    assert "over its memory limit of 16 MiB" in out.detail


def test_the_memory_limit_setting() -> None:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    args = parser.parse_args(["--worker-memory-mib", "2048"])
    assert config_from_args(args, {}).worker_memory_bytes == 2048 * MIB
    env = {"DSFRO_WORKER_MEMORY_MIB": "512"}
    assert config_from_args(parser.parse_args([]), env).worker_memory_bytes == 512 * MIB
    with pytest.raises(ValueError, match="--worker-memory-mib must be an integer"):
        config_from_args(parser.parse_args(["--worker-memory-mib", "1"]), {})
    with pytest.raises(ValueError, match="must be positive"):
        supervise.set_worker_memory_limit(0)


# ---------------------------------------------------------------- health


def _status(port: int, service: str) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        request = health_pb2.HealthCheckRequest(service=service)
        status: int = health_pb2_grpc.HealthStub(ch).Check(request, timeout=WAIT).status
        return status


def _wait_for(port: int, service: str, status: int) -> None:
    end = time.monotonic() + WAIT
    while _status(port, service) != status:
        assert time.monotonic() < end, f"{service or 'overall'} never became {status}"
        time.sleep(0.1)


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def test_a_stuck_solve_makes_the_service_not_ready_until_it_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()

    def stuck(problem: Problem, **kwargs: Any) -> SolveResult:
        release.wait(WAIT)  # deaf to its deadline and to cancellation
        return canned_result(problem)

    monkeypatch.setattr(orchestrator, "solve", stuck)
    srv = build_server(ServerConfig(host="127.0.0.1", port=0, stuck_after_seconds=0.2))
    srv.start()
    try:
        assert _status(srv.port, SERVICE_NAME) == SERVING
        request = make_request()
        request.options.time_budget.FromMilliseconds(100)
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            call = ch.unary_unary("/dsfro.v1.SchedulerService/Solve").future(
                request.SerializeToString(), timeout=WAIT
            )
            _wait_for(srv.port, SERVICE_NAME, NOT_SERVING)
            assert _status(srv.port, "") == SERVING  # alive: no restart wanted
            release.set()
            call.result(timeout=WAIT)
            _wait_for(srv.port, SERVICE_NAME, SERVING)
    finally:
        release.set()
        srv.stop(None).wait(WAIT)


def test_a_worker_crash_loop_makes_the_service_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor, "_replaced_at", deque(maxlen=64))
    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    try:
        assert srv.servicer.health_problems() == []
        executor._count_pool_replaced()  # one kill is bad luck, and serving goes on
        assert srv.servicer.health_problems() == []
        for _ in range(CRASH_LOOP_RESTARTS - 1):
            executor._count_pool_replaced()
        [problem_] = srv.servicer.health_problems()
        assert f"replaced {CRASH_LOOP_RESTARTS} times" in problem_
        _wait_for(srv.port, SERVICE_NAME, NOT_SERVING)
        monkeypatch.setattr(executor, "_replaced_at", deque(maxlen=64))  # the window passed
        _wait_for(srv.port, SERVICE_NAME, SERVING)
    finally:
        srv.stop(None).wait(WAIT)


@pytest.mark.parametrize(
    ("content", "cpus"),
    [("max 100000", None), ("150000 100000", 1.5), ("50000 100000", 0.5), ("garbage", None)],
)
def test_a_container_cpu_quota_is_read(tmp_path: Path, content: str, cpus: float | None) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(content + "\n")
    assert executor.cgroup_cpu_quota(str(path)) == cpus
    assert executor.cgroup_cpu_quota(str(tmp_path / "none")) is None


def test_available_cores_are_capped_by_the_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cpu.max"
    monkeypatch.setattr(executor, "CGROUP_CPU_MAX", str(path))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(64)))
    path.write_text("250000 100000\n")
    assert executor.available_cores() == 3  # 2.5 CPUs: three threads share them
    path.write_text("20000 100000\n")
    assert executor.available_cores() == 1
    path.write_text("max 100000\n")
    assert executor.available_cores() == 64


# ---------------------------------------------------------------- killed workers, real server


def _pool_workers() -> list[int]:
    """This process's spawned multiprocessing workers: a server's solve worker pool."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = stat.rsplit(")", 1)[1].split()[1]
        if ppid == me and b"spawn_main" in cmdline:  # not the resource tracker
            found.append(int(entry.name))
    return found


def _decomposed_request(budget_seconds: float) -> pb.SolveRequest:
    request = load_request_json(str(ROOT / "instances" / "medium.json"))
    request.options.backend = pb.BACKEND_DECOMPOSED
    request.options.time_budget.FromMilliseconds(int(budget_seconds * 1000))
    return request


def test_a_worker_killed_mid_solve_costs_one_fallback_and_the_next_solve_succeeds() -> None:
    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            stub = Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated
            request = _decomposed_request(8.0)
            older = set(_pool_workers())  # other servers' pools, still closing
            call = stub.Solve.future(request, timeout=WAIT)
            end = time.monotonic() + WAIT
            while not (workers := sorted(set(_pool_workers()) - older)):
                assert time.monotonic() < end and not call.done(), "no pool worker appeared"
                time.sleep(0.05)
            os.kill(workers[0], signal.SIGKILL)
            killed = call.result(timeout=WAIT)
            assert killed.stats.termination == pb.TERMINATION_FALLBACK
            assert "died" in killed.stats.detail
            evaluation = stub.EvaluatePlan(
                pb.EvaluatePlanRequest(request=request, plan=killed.plan), timeout=WAIT
            )
            assert evaluation.valid, evaluation.violations
            after = stub.Solve(_decomposed_request(4.0), timeout=WAIT)
            assert after.stats.termination in (pb.TERMINATION_FEASIBLE, pb.TERMINATION_OPTIMAL)
    finally:
        srv.stop(None).wait(WAIT)


def test_stopping_the_server_mid_decomposed_solve_answers_with_a_plan() -> None:
    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    stopped = False
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            stub = Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated
            older = set(_pool_workers())  # other servers' pools, still closing
            call = stub.Solve.future(_decomposed_request(60.0), timeout=WAIT * 2)
            end = time.monotonic() + WAIT
            while not set(_pool_workers()) - older:
                assert time.monotonic() < end, "no pool worker appeared"
                time.sleep(0.05)
            time.sleep(0.5)
            asked = time.monotonic()
            done = srv.stop(20.0)
            stopped = True
            response = call.result(timeout=WAIT)
            answered = time.monotonic() - asked
            assert len(response.plan.assignments) == len(_decomposed_request(1).jobs)
            assert answered < 15.0, answered  # not the 60 s budget: the parts were dropped
            assert done.wait(WAIT)
    finally:
        if not stopped:
            srv.stop(None).wait(WAIT)
