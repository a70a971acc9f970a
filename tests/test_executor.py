"""Executors: the local process pool and Ray run the same decomposition to the same plan."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.runtime.cores import THREAD_VARIABLES
from solver.runtime.executors import make_executor
from solver.runtime.pools import Executor, InlineExecutor, LocalExecutor, WorkerLost, map_or_lost
from solver.runtime.ray import RayExecutor
from solver.search.decompose import solve_decomposed

ROOT = Path(__file__).resolve().parent.parent


def thread_caps(_: int) -> dict[str, str | None]:
    """Runs in a worker: the thread limits it was given."""
    return {var: os.environ.get(var) for var in THREAD_VARIABLES}


def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def local() -> Iterator[LocalExecutor]:
    executor = LocalExecutor(workers=2)
    yield executor
    executor.close()


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[RayExecutor]:
    """A real local Ray, started by the test and stopped after it."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # Ray workers can't import this test module by name: ship its functions by value.
    # Ray vendors cloudpickle without annotations.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    try:
        yield RayExecutor("auto")
    finally:
        ray.shutdown()


def test_local_pool_keeps_order_and_caps_threads(local: LocalExecutor) -> None:
    assert local.map(square, list(range(7))) == [x * x for x in range(7)]
    for caps in local.map(thread_caps, [0, 1]):
        assert all(v == "1" for v in caps.values())


def test_ray_keeps_order_and_caps_threads(ray_executor: RayExecutor) -> None:
    assert ray_executor.workers == 2
    assert ray_executor.map(square, list(range(7))) == [x * x for x in range(7)]
    for caps in ray_executor.map(thread_caps, [0, 1]):
        assert all(v == "1" for v in caps.values())


def _decompose(executor: Executor) -> dict[str, tuple[str, int, dict[str, int]]]:
    p = problem_from_proto(load_request_json(ROOT / "instances" / "small.json"), Limits())
    d = solve_decomposed(p, executor, end=time.monotonic() + 0.4, part_gpus=2048, parts=2)
    return {j: (c.gpu_type, c.sm_clock_mhz, dict(n)) for j, (c, n) in d.first.items()}


def test_every_executor_gives_the_same_first_plan(
    local: LocalExecutor, ray_executor: RayExecutor
) -> None:
    inline = _decompose(InlineExecutor())
    assert inline
    assert _decompose(local) == inline
    assert _decompose(ray_executor) == inline


def test_make_executor_reads_the_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DSFRO_RAY_ADDRESS", raising=False)
    executor = make_executor(workers=3)
    assert isinstance(executor, LocalExecutor) and executor.workers == 3


def test_a_decomposed_solve_through_the_service_runs_on_ray(ray_executor: RayExecutor) -> None:
    """The server, given a Ray address, sends a DECOMPOSED solve's parts to Ray."""
    import grpc

    from solver._proto.dsfro.v1 import scheduler_pb2 as pb
    from solver._proto.dsfro.v1 import scheduler_pb2_grpc
    from solver.service.config import ServerConfig
    from solver.service.server import build_server

    server = build_server(ServerConfig(port=0, ray_address="auto"))
    server.start()
    try:
        request = load_request_json(ROOT / "instances" / "small.json")
        request.options.backend = pb.BACKEND_DECOMPOSED
        request.options.time_budget.FromSeconds(5)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
            response = stub.Solve(request, timeout=30)
            evaluation = stub.EvaluatePlan(
                pb.EvaluatePlanRequest(request=request, plan=response.plan), timeout=30
            )
        assert response.stats.backend_used == pb.BACKEND_DECOMPOSED
        assert "on ray" in response.stats.detail
        assert response.stats.HasField("best_bound")
        assert evaluation.valid, evaluation.violations
        assert evaluation.objective.total == pytest.approx(response.plan.objective.total)
    finally:
        server.stop(grace=1.0)


def _die_on_two(x: int) -> int:
    """A task whose worker process dies on input 2 (as under SIGKILL or the OOM killer)."""
    if x == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def test_a_dead_worker_is_reported_and_the_pool_replaced() -> None:
    executor = LocalExecutor(2)
    try:
        with pytest.raises(WorkerLost, match=r"killed by SIGKILL|died"):
            executor.map(_die_on_two, [1, 2, 3])
        assert executor.map(_die_on_two, [3, 4]) == [9, 16]  # a new pool
    finally:
        executor.close()


def test_a_worker_killed_while_idle_does_not_fail_the_next_map() -> None:
    executor = LocalExecutor(2)
    try:
        assert executor.map(_square_pid, [1]) != []
        pids = {pid for _, pid in executor.map(_square_pid, [1, 2, 3, 4])}
        killed = pids.pop()
        os.kill(killed, signal.SIGKILL)
        time.sleep(0.2)  # dead before the next map takes it
        results = executor.map(_square_pid, [5, 6])
        assert [x for x, _ in results] == [25, 36]
        assert killed not in {pid for _, pid in results}
    finally:
        executor.close()


def _die_once(task: tuple[int, str]) -> int:
    """Dies the first time it runs for x (a marker file says it ran), then answers."""
    x, marks = task
    mark = Path(marks) / str(x)
    if x == 2 and not mark.exists():
        mark.touch()
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


def test_a_task_whose_worker_died_runs_again_when_retries_allow(tmp_path: Path) -> None:
    executor = LocalExecutor(2)
    try:
        tasks = [(x, str(tmp_path)) for x in (1, 2, 3, 4)]
        assert executor.map(_die_once, tasks, retries=1) == [1, 4, 9, 16]
        assert (tmp_path / "2").exists()  # it did die once
    finally:
        executor.close()


def test_a_task_that_kills_every_worker_is_named_once_its_retries_are_spent() -> None:
    executor = LocalExecutor(2)
    try:
        with pytest.raises(WorkerLost, match=r"task 2 of 3 lost its worker 2 times") as lost:
            executor.map(_die_on_two, [1, 2, 3], retries=1)
        assert lost.value.task == 1
        assert executor.map(_die_on_two, [3]) == [9]
    finally:
        executor.close()


def test_map_or_lost_puts_a_stand_in_for_a_task_lost_for_good_and_runs_the_rest() -> None:
    executor = LocalExecutor(2)
    try:
        stand_ins: list[str] = []

        def lost(x: int, e: WorkerLost) -> int:
            stand_ins.append(str(e))
            return -x

        assert map_or_lost(executor, _die_on_two, [1, 2, 3, 4], lost, retries=1) == [1, -2, 9, 16]
        assert len(stand_ins) == 1 and "task 2 of 4 lost its worker 2 times" in stand_ins[0]
    finally:
        executor.close()


def test_ray_reruns_a_task_whose_worker_died_and_names_one_lost_for_good(
    ray_executor: RayExecutor, tmp_path: Path
) -> None:
    tasks = [(x, str(tmp_path)) for x in (1, 2, 3)]
    assert ray_executor.map(_die_once, tasks, retries=1) == [1, 4, 9]
    assert (tmp_path / "2").exists()  # it did die once
    with pytest.raises(WorkerLost, match=r"task 2 of 3 lost its Ray worker") as lost:
        ray_executor.map(_die_on_two, [1, 2, 3])
    assert lost.value.task == 1


def _square_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()
