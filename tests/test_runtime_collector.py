"""The garbage collector held off while solves run (solver.runtime.collector): off inside every
block and solve, on again after the last, left off where the process had turned it off, on in
a child forked mid-solve; a worker process's calls run with it off and its imports frozen."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator

import pytest

from solver.core.solver import Solver
from solver.domain import Backend, Plan
from solver.runtime import collector
from solver.runtime.collector import collector_paused, paused_collection
from solver.runtime.workers import CallContext, Worker, run_call
from tests.factories import cluster, job, node, point, problem

FAR = 60.0


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    """The collector on and no solve of an earlier test still holding it off."""
    settle = time.monotonic() + 5.0
    while collector._holders and time.monotonic() < settle:
        time.sleep(0.01)
    assert collector._holders == 0, "a solve of an earlier test still runs in this process"
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_block_runs_with_the_collector_off_and_turns_it_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer block still runs
    assert gc.isenabled()


def test_a_block_that_raises_turns_the_collector_on_again() -> None:
    with pytest.raises(ValueError), collector_paused():
        raise ValueError("a solve that failed")
    assert gc.isenabled()


def test_the_collector_stays_off_until_the_last_of_concurrent_blocks_ends() -> None:
    inside, release = threading.Event(), threading.Event()

    def other_solve() -> None:
        with collector_paused():
            inside.set()
            release.wait(FAR)

    thread = threading.Thread(target=other_solve)
    thread.start()
    assert inside.wait(FAR)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread's block runs on
    release.set()
    thread.join(FAR)
    assert gc.isenabled()


def test_a_collector_the_process_turned_off_stays_off() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_decorated_function_runs_with_the_collector_off() -> None:
    @paused_collection
    def seen() -> bool:
        return gc.isenabled()

    assert seen() is False
    assert gc.isenabled()


def test_a_child_forked_mid_block_has_the_collector_on() -> None:
    read, write = os.pipe()
    with collector_paused():
        pid = os.fork()
        if pid == 0:  # the child: it runs no solve of its parent's
            os.write(write, b"1" if gc.isenabled() else b"0")
            with collector_paused():
                pass
            os.write(write, b"1" if gc.isenabled() else b"0")
            os._exit(0)
        os.close(write)
        _, status = os.waitpid(pid, 0)
    seen = os.read(read, 2)
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0
    assert seen == b"11"


def test_a_solve_runs_with_the_collector_off_and_leaves_it_on() -> None:
    p = problem(
        cluster(node("n0", count=4)),
        job("a", point(1, 100.0)),
        job("b", point(2, 150.0)),
        backend=Backend.HEURISTIC,
    )
    during: list[bool] = []

    def first(_: Plan) -> None:
        during.append(gc.isenabled())

    solver = Solver()
    try:
        result = solver.solve(p, on_first_plan=first)
    finally:
        solver.close()
    assert {a.job for a in result.plan.assignments if a.config is not None} == {"a", "b"}
    assert during == [False]
    assert gc.isenabled()


def collector_state(_: object, call: CallContext) -> tuple[bool, int]:
    return gc.isenabled(), gc.get_freeze_count()


def test_a_worker_runs_its_calls_with_the_collector_off_and_its_imports_frozen() -> None:
    w = Worker()
    try:
        assert w.wait_ready(FAR)
        for _ in range(2):  # the second call too: the collector is off again
            enabled, frozen = run_call(
                w, collector_state, None, kill_at=lambda: time.monotonic() + FAR
            )
            assert enabled is False
            assert frozen > 1000  # the worker's modules and functions
    finally:
        w.kill()
