"""Supervised workers: memory limits, and health that says when the service cannot serve."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1.scheduler_pb2_grpc import SchedulerServiceStub as Stub
from solver.app.convert import load_request_json
from solver.domain import Backend
from solver.exact import isolated
from solver.exact.backends import ExactOptions, SolverStatus
from solver.perfmodel.configs import build_config_set
from solver.runtime import cores, crashes
from solver.runtime import memory as supervise
from solver.runtime.pools import LocalExecutor, WorkerLost
from solver.service.admission import Admission
from solver.service.config import ServerConfig, add_server_arguments, config_from_args
from solver.service.server import build_server
from solver.service.servicer import CRASH_LOOP_RESTARTS, SERVICE_NAME
from tests.factories import cluster, job, make_request, node, point, problem, running_server
from tests.fakes import Held

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
    out = isolated.solve_isolated(
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


def test_the_memory_room_is_the_smaller_of_the_cgroup_limit_and_the_machine(
    tmp_path: Path,
) -> None:
    machine = supervise.memory_room_bytes(limits=[])
    assert machine is not None and machine > 256 * MIB  # MemTotal
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")
    v1.write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    assert supervise.memory_room_bytes(limits=[str(v2), str(v1)]) == machine
    v2.write_text(f"{512 * MIB}\n")
    assert supervise.memory_room_bytes(limits=[str(v2), str(tmp_path / "none")]) == 512 * MIB


def test_a_process_private_memory_is_part_of_its_resident_memory() -> None:
    own, rss = supervise.private_bytes(os.getpid()), supervise.resident_bytes(os.getpid())
    assert own is not None and rss is not None and 0 < own <= rss
    assert supervise.private_bytes(2**22 + 12345) is None  # no such process


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


def test_a_solve_deaf_to_its_deadline_is_killed_and_answered_with_its_first_plan(
    tmp_path: Path,
) -> None:
    """A solve that ignores its deadline and its stop is killed just past its due instant; the
    call gets the first plan its worker sent ahead, as a FALLBACK, on time."""
    request = make_request()
    request.options.time_budget.FromMilliseconds(800)
    with (
        running_server(Held(tmp_path, seconds=WAIT, deaf=True)) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated
        start = time.monotonic()
        response = stub.Solve(request, timeout=WAIT)
        took = time.monotonic() - start
    assert took < 0.8 + 0.3
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    assert "ran past its limit and was killed" in response.stats.detail
    assert len(response.plan.assignments) == 3


def test_a_solve_past_its_due_time_makes_the_service_not_ready() -> None:
    """Health's view of a solve that outlived its due time (a worker that could not be
    killed): readiness says so until the solve is released."""
    admission = Admission(slots=1, max_queued=0, queue_wait_share=0.0)
    running = admission.admit(1.0, time.monotonic(), time.monotonic() - 40.0)
    assert admission.late(30.0) and 40.0 <= admission.late(30.0)[0] < 45.0
    admission.release(running)
    assert admission.late(30.0) == []


def test_a_worker_crash_loop_makes_the_service_not_ready() -> None:
    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    try:
        assert srv.servicer.health_problems() == []
        crashes.record("solve")  # one kill is bad luck, and serving goes on
        crashes.record("exact", crash=False)  # killed at a deadline on purpose: not a crash
        assert srv.servicer.health_problems() == []
        for _ in range(CRASH_LOOP_RESTARTS - 1):
            crashes.record("pool")
        [problem_] = srv.servicer.health_problems()
        assert f"replaced {CRASH_LOOP_RESTARTS} times" in problem_
        _wait_for(srv.port, SERVICE_NAME, NOT_SERVING)
        crashes.forget_recent()  # the window passed
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
    assert cores.cgroup_cpu_quota(str(path)) == cpus
    assert cores.cgroup_cpu_quota(str(tmp_path / "none")) is None


def test_available_cores_are_capped_by_the_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cpu.max"
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: set(range(64)))
    path.write_text("250000 100000\n")
    assert cores.available_cores(str(path)) == 3  # 2.5 CPUs: three threads share them
    path.write_text("20000 100000\n")
    assert cores.available_cores(str(path)) == 1
    path.write_text("max 100000\n")
    assert cores.available_cores(str(path)) == 64


# ---------------------------------------------------------------- killed workers, real server


def _processes() -> dict[int, tuple[int, bytes]]:
    """Every process: its parent and command line."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        out[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    return out


def _descendants(marker: bytes, unless: tuple[bytes, ...] = ()) -> list[int]:
    """This process's descendants whose command line holds `marker` (and none of `unless`)."""
    procs = _processes()
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return sorted(
        p
        for p in mine
        if p in procs and marker in procs[p][1] and not any(u in procs[p][1] for u in unless)
    )


def _pool_workers() -> list[int]:
    """Pool workers under this process (a decomposed solve's parts): kept workers that
    preload nothing, unlike solve workers and isolated full models."""
    return _descendants(b"solver.runtime.workers", (b"solver.service.worker", b"solver.exact."))


def _solve_workers() -> list[int]:
    """The solve workers of the servers in this process."""
    return _descendants(b"solver.service.worker")


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
            assert "killed by SIGKILL" in killed.stats.detail
            evaluation = stub.EvaluatePlan(
                pb.EvaluatePlanRequest(request=request, plan=killed.plan), timeout=WAIT
            )
            assert evaluation.valid, evaluation.violations
            after = stub.Solve(_decomposed_request(8.0), timeout=WAIT)
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


def test_a_solve_worker_killed_mid_solve_has_its_call_run_again_and_is_replaced() -> None:
    """SIGKILL to the solve worker of a running solve (a real one, AUTO, 6 s), 1 s in: the call
    runs again on another worker (the time left is ample) and is answered as a solve is, not
    with the first plan the worker had sent ahead; the plan is valid, the crash counted, the
    worker replaced and the next solve an ordinary one. (The fakes of test_service_solves.py
    die on every worker: the plan sent ahead answers there.)"""
    request = load_request_json(
        str(ROOT / "instances" / "hetero-power" / "hetero-power-64-s2.json")
    )
    request.options.time_budget.FromSeconds(6)
    with (
        running_server(max_concurrent_solves=1) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated
        idle = set(srv.servicer.pool.idle_pids())
        call = stub.Solve.future(request, timeout=WAIT)
        end = time.monotonic() + WAIT
        while not (busy := idle - set(srv.servicer.pool.idle_pids())):
            assert time.monotonic() < end and not call.done(), "no worker took the solve"
            time.sleep(0.01)
        time.sleep(1.0)  # past its first plan
        os.kill(busy.pop(), signal.SIGKILL)
        killed = call.result(timeout=WAIT)
        assert killed.stats.termination in (pb.TERMINATION_FEASIBLE, pb.TERMINATION_OPTIMAL)
        assert "killed by SIGKILL; the solve ran again on another worker" in killed.stats.detail
        assert len(killed.plan.assignments) == len(request.jobs)
        evaluation = stub.EvaluatePlan(
            pb.EvaluatePlanRequest(request=request, plan=killed.plan), timeout=WAIT
        )
        assert evaluation.valid, evaluation.violations
        request.options.time_budget.FromSeconds(2)
        after = stub.Solve(request, timeout=WAIT)
        assert after.stats.termination in (pb.TERMINATION_FEASIBLE, pb.TERMINATION_OPTIMAL)
        assert crashes.totals()["solve"] >= 1


def test_more_local_workers_than_memory_holds_are_refused_before_any_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--workers 1000 on a 24 GiB machine started the processes and the kernel killed them:
    now the pool is refused before it starts one, saying what would fit."""
    limit = tmp_path / "memory.max"
    limit.write_text(f"{2**30}\n")
    monkeypatch.setattr(supervise, "MEMORY_LIMITS", (str(limit),))
    monkeypatch.setattr("solver.runtime.pools.available_cores", lambda: 2)  # as on CI
    with pytest.raises(supervise.TooManyWorkers, match=r"^64 worker processes would take") as e:
        LocalExecutor(workers=64)
    assert "this machine or container has 1.0 GiB" in str(e.value)
    LocalExecutor(workers=2).close()  # one a core is never refused
