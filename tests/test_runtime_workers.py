"""Kept worker processes (solver.runtime.workers): calls, reports, stop relayed, killed past a
limit or over memory, a dead worker replaced, and a worker that outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from solver.runtime import crashes, memory
from solver.runtime.workerpool import WorkerPool
from solver.runtime.workers import (
    CallContext,
    CallFailed,
    Worker,
    WorkerLost,
    run_call,
    stopped,
)
from tests.process_helpers import gone_within

ROOT = Path(__file__).resolve().parent.parent
FAR = 60.0


def double(x: int, call: CallContext) -> int:
    return 2 * x


def chatty(x: int, call: CallContext) -> str:
    for i in range(x):
        call.report(i)
    return "done"


def reports_late(x: int, call: CallContext) -> str:
    """Returns at once; a thread of its own reports `x` a moment later, after the result."""

    def late() -> None:
        time.sleep(0.2)
        call.report(x)

    threading.Thread(target=late, daemon=True).start()
    return "early"


def until_stopped(seconds: float, call: CallContext) -> float:
    """Works until asked to stop (or `seconds`): how long it worked."""
    start = time.monotonic()
    call.stop.wait(seconds)
    return time.monotonic() - start


def deaf(seconds: float, call: CallContext) -> None:
    time.sleep(seconds)


def fails(_: object, call: CallContext) -> None:
    raise ValueError("no such thing")


def hog(megabytes: int, call: CallContext) -> int:
    block = bytearray(megabytes * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(5.0)
    return len(block)


def own_pid(_: object, call: CallContext) -> int:
    return os.getpid()


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker()
    assert w.wait_ready(FAR)
    yield w
    w.kill()


def _call(w: Worker, fn: Any, arg: Any, **kwargs: Any) -> Any:
    return run_call(
        w, fn, arg, kill_at=kwargs.pop("kill_at", lambda: time.monotonic() + FAR), **kwargs
    )


def test_a_call_answers_and_the_worker_takes_the_next(worker: Worker) -> None:
    assert _call(worker, double, 21) == 42
    assert _call(worker, double, 5) == 10
    reports: list[int] = []
    assert _call(worker, chatty, 3, on_report=reports.append) == "done"
    assert reports == [0, 1, 2]


def test_a_report_sent_after_its_call_never_reaches_the_next_call(worker: Worker) -> None:
    # The late report arrives while the next call runs: it belongs to the call before.
    seen: list[Any] = []
    assert _call(worker, reports_late, 7, on_report=seen.append) == "early"
    assert _call(worker, until_stopped, 0.6, on_report=seen.append) >= 0.5
    assert seen == []
    assert _call(worker, chatty, 2, on_report=seen.append) == "done"
    assert seen == [0, 1]


def test_a_call_that_raises_leaves_the_worker_usable(worker: Worker) -> None:
    with pytest.raises(CallFailed, match="ValueError: no such thing"):
        _call(worker, fails, None)
    assert _call(worker, double, 1) == 2


def test_a_stop_reaches_the_running_call(worker: Worker) -> None:
    asked = time.monotonic() + 0.3
    worked = _call(worker, until_stopped, FAR, stop=lambda: time.monotonic() >= asked)
    assert worked < FAR / 2  # it stopped when asked, not at its own end
    assert time.monotonic() - asked < 0.5
    assert _call(worker, double, 2) == 4  # a stop is for its own call only


def test_a_call_deaf_to_its_stop_is_killed_after_the_grace(worker: Worker) -> None:
    start = time.monotonic()
    with pytest.raises(WorkerLost) as info:
        _call(worker, deaf, FAR, stop=lambda: True, stop_grace=0.3)
    assert time.monotonic() - start < 0.3 + 1.0
    assert "did not stop when asked" in str(info.value) and not info.value.crash
    assert not worker.alive()


def test_a_call_past_its_limit_is_killed_on_time(worker: Worker) -> None:
    limit = time.monotonic() + 0.4
    with pytest.raises(WorkerLost) as info:
        _call(worker, deaf, FAR, kill_at=lambda: limit)
    assert time.monotonic() - limit < 0.3
    assert "ran past its limit" in str(info.value) and not info.value.crash


def test_a_call_its_worker_cannot_take_is_lost_at_its_limit(worker: Worker) -> None:
    """A task larger than the pipe's buffer waited, past the call's limit, for a worker that
    did not read it (stopped here; still importing its preload in a one-off solve, where a
    0.3 s call answered after 0.45 s); a wedged worker held its call forever."""
    os.kill(worker.pid, signal.SIGSTOP)
    limit = time.monotonic() + 0.4
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            _call(worker, double, b"x" * 4_000_000, kill_at=lambda: limit)
        except BaseException as e:
            outcome.append(e)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(10.0)
    assert not caller.is_alive(), "the call still waits for its worker to read its task"
    assert time.monotonic() - limit < 0.3
    [lost] = outcome
    assert isinstance(lost, WorkerLost) and not lost.crash and not lost.retry
    assert "did not take its call within its limit" in str(lost)
    assert not worker.alive()


def test_a_worker_killed_mid_call_is_lost_with_the_signal(worker: Worker) -> None:
    pid = _call(worker, own_pid, None)
    assert pid == worker.pid != os.getpid()
    start = time.monotonic()

    def kill_soon() -> bool:
        if time.monotonic() - start > 0.2 and worker.alive():
            os.kill(worker.pid, signal.SIGKILL)
        return False

    with pytest.raises(WorkerLost) as info:
        _call(worker, deaf, FAR, stop=kill_soon)
    assert "killed by SIGKILL" in str(info.value) and info.value.crash


def test_a_worker_stopped_mid_call_is_lost_at_once_and_may_run_again(worker: Worker) -> None:
    # SIGSTOPped from outside: before, the call waited for its limit (a 2 s call's fallback at
    # 2.07 s); now it is lost within a poll or two, as a worker killed from outside is.
    start = time.monotonic()

    def stop_soon() -> bool:
        if time.monotonic() - start > 0.2 and worker.alive() and not stopped(worker.pid):
            os.kill(worker.pid, signal.SIGSTOP)
        return False

    with pytest.raises(WorkerLost) as info:
        _call(worker, deaf, FAR, stop=stop_soon)
    assert time.monotonic() - start < FAR / 2
    assert "was stopped and was killed" in str(info.value)
    assert info.value.retry  # lost from outside: the call may run again
    assert not worker.alive()


def test_a_worker_over_its_memory_limit_is_killed_and_named() -> None:
    w = Worker()
    try:
        assert w.wait_ready(FAR)
        rss = memory.resident_bytes(w.pid)
        assert rss is not None
        memory.set_worker_memory_limit(rss + 100 * 2**20)
        with pytest.raises(WorkerLost, match=r"over its memory limit of \d+ MiB") as info:
            _call(w, hog, 400)
        assert info.value.crash and not info.value.retry  # run again, it would do the same
    finally:
        memory.set_worker_memory_limit(None)
        w.kill()


def test_a_pool_replaces_a_lost_worker_and_counts_it() -> None:
    pool = WorkerPool("test", keep=2)
    try:
        pool.warm_now(2)
        assert pool.idle() == 2
        w = pool.take()
        assert pool.idle() == 1  # busy: not replaced
        before = crashes.totals().get("test", 0)
        pool.discard(w, "killed for the test")
        assert crashes.totals()["test"] == before + 1
        end = time.monotonic() + FAR
        while pool.idle() < 2:
            assert time.monotonic() < end, "the lost worker was not replaced"
            time.sleep(0.05)
        w = pool.take()
        pool.give_back(w)
        assert pool.idle() == 2
    finally:
        pool.close()


def test_an_idle_worker_killed_from_outside_is_not_counted_idle() -> None:
    """Killed while idle (a tester killing every worker): not counted, so a call that lost
    its own worker at the same moment does not wait for a cold one it counted on as warm."""
    pool = WorkerPool("test", keep=2)
    try:
        pool.warm_now(2)
        [pid, *_] = pool.idle_pids()
        os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + FAR
        while pool.idle() != 1:
            assert time.monotonic() < end, "a worker killed while idle still counts as idle"
            time.sleep(0.01)
    finally:
        pool.close()


def test_a_worker_whose_parent_dies_exits() -> None:
    """A parent (a server) killed with SIGKILL leaves no worker behind."""
    code = (
        "import sys, time\n"
        "from solver.runtime.workers import Worker\n"
        "w = Worker(); w.wait_ready(60)\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        assert gone_within(child, 10), "the worker outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_closing_a_worker_twice_leaves_other_descriptors_alone() -> None:
    """kill() closes the pipes and a later close() (the pool's, in the background) must not
    close them again: by then their numbers belong to someone else (a new worker's pipe, whose
    process then read EBADF under load)."""
    w = Worker()
    w.kill()
    r, wfd = os.pipe()  # the lowest free numbers: those kill() just released
    try:
        w.close()
        os.write(wfd, b"x")
        assert os.read(r, 1) == b"x"
    finally:
        os.close(r)
        os.close(wfd)


def test_a_stopped_idle_worker_is_killed_and_never_handed_out() -> None:
    """SIGSTOPped while idle (a tester, an operator): alive, but it would never take its call,
    which then waited its whole budget; not counted idle, killed when met, replaced."""
    pool = WorkerPool("test", keep=2)
    try:
        pool.warm_now(2)
        pids = pool.idle_pids()
        os.kill(pids[-1], signal.SIGSTOP)  # the one take() would hand out first
        end = time.monotonic() + FAR
        while not stopped(pids[-1]):  # the signal is delivered in its own time
            assert time.monotonic() < end, "SIGSTOP did not stop the worker"
            time.sleep(0.01)
        assert not stopped(pids[0])
        assert pool.idle() == 1
        w = pool.take()
        assert w.pid == pids[0]
        assert gone_within(pids[-1], FAR), "the stopped worker was not killed"
        while pool.idle() < 1:  # replaced in the background
            assert time.monotonic() < end + FAR, "the stopped worker was not replaced"
            time.sleep(0.05)
        pool.give_back(w)
    finally:
        pool.close()
