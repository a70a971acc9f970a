"""The full model solved in a worker process that is killed at the deadline.

A solver's presolve can run far past its time limit and cannot be interrupted from Python
(HiGHS presolves a 60,000-column model for 15 s whatever its limit). In a process of its own it
is killed at the deadline instead, and the answer stays on time. Workers are fresh interpreters
(``python -m solver.exact.isolated``) kept between solves: forking the caller (a server with
gRPC and solver thread pools) would be unsafe, and multiprocessing's spawn and forkserver
re-run the caller's main module. A worker that is killed or dies is replaced on next use.
Tasks and outcomes go as length-prefixed pickles over two pipes of their own (the solvers
print on standard output).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from solver.domain import Backend, Problem
from solver.exact.backends import ExactOptions, ExactOutcome, SolverStatus, outcome
from solver.exact.index import Values
from solver.perfmodel.configs import ConfigSet
from solver.runtime import memory as supervise

CHILD_SHARE = 0.85
"""The worker's own time limit, as a share of the time to the deadline: it stops by itself
and sends its solution back before it would be killed (HiGHS overruns its limit by a few per
cent in presolve and at the root)."""
MAX_IDLE_WORKERS = 4
"""Workers kept between solves (one per concurrent full-model solve is enough)."""
_HEADER = struct.Struct(">Q")


@dataclass(frozen=True)
class _Task:
    problem: Problem
    configs: ConfigSet
    backend: Backend
    hint: npt.NDArray[np.float64] | None
    options: ExactOptions
    deadline: float
    """time.monotonic() instant (one clock for every process of the machine)."""


def _write(fd: int, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("worker pipe closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read(fd: int) -> Any:
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return pickle.loads(_read_exactly(fd, size))


class _Worker:
    """One worker process and the parent's ends of its two pipes."""

    def __init__(self) -> None:
        task_r, self.task_w = os.pipe()
        self.result_r, result_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "solver.exact.isolated", str(task_r), str(result_w)],
            pass_fds=(task_r, result_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        os.close(task_r)
        os.close(result_w)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        for fd in (self.task_w, self.result_r):
            with contextlib.suppress(OSError):
                os.close(fd)


_idle: list[_Worker] = []
_lock = threading.Lock()
_replaced = 0
"""Workers killed at a deadline or found dead: each is replaced on next use."""


def restarts() -> int:
    """Workers replaced so far in this process (the service's metrics)."""
    return _replaced


def _count_replaced() -> None:
    global _replaced
    with _lock:
        _replaced += 1


def _take() -> _Worker:
    with _lock:
        while _idle:
            worker = _idle.pop()
            if worker.alive():
                return worker
            worker.close()
    return _Worker()


def _give_back(worker: _Worker) -> None:
    with _lock:
        if len(_idle) < MAX_IDLE_WORKERS and worker.alive():
            _idle.append(worker)
            return
    worker.close()


def warm_up() -> None:
    """Start a worker ahead of the first solve (its imports take about a second)."""
    with _lock:
        if _idle:
            return
    _give_back(_Worker())


def solve_in_process(
    problem: Problem,
    configs: ConfigSet,
    backend: Backend,
    *,
    hint: Values | None,
    options: ExactOptions,
    deadline: float,
) -> ExactOutcome:
    """The backend's outcome on the full model of `problem`, solved in a worker process; a
    worker still running at `deadline` (time.monotonic()) is killed: NO_SOLUTION."""
    start = time.monotonic()
    worker = _take()
    task = _Task(
        problem,
        configs,
        backend,
        None if hint is None else np.asarray(hint.array),
        replace(options, stop=None),  # a callable does not cross processes: polled here
        deadline,
    )
    killed: list[str] = []

    def stop() -> bool:
        reason = supervise.kill_if_over_limit(worker.proc.pid)
        if reason is not None:
            killed.append(reason)
            return True
        return options.stop is not None and options.stop()

    try:
        _write(worker.task_w, task)
        ready = _wait(worker.result_r, deadline, stop)
        if not ready:
            worker.close()
            _count_replaced()
            threading.Thread(target=warm_up, name="dsfro-exact-respawn", daemon=True).start()
            if killed:
                return outcome(SolverStatus.ERROR, None, None, time.monotonic() - start, killed[0])
            return outcome(
                SolverStatus.NO_SOLUTION,
                None,
                None,
                time.monotonic() - start,
                "stopped at the deadline or on cancel (worker process killed)",
            )
        result: ExactOutcome = _read(worker.result_r)
    except (EOFError, OSError) as e:
        worker.close()
        _count_replaced()
        return outcome(
            SolverStatus.ERROR,
            None,
            None,
            time.monotonic() - start,
            f"the solver process died (exit code {worker.proc.returncode}): {e}",
        )
    _give_back(worker)
    return result


POLL_SECONDS = 0.05
"""How often a waiting caller checks its stop request: a cancelled solve's worker is killed
within this."""


def _wait(fd: int, deadline: float, stop: Callable[[], bool] | None) -> bool:
    """Whether `fd` has data before `deadline`, giving up early once `stop()` is true."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop()):
            return False
        ready, _, _ = select.select([fd], [], [], min(left, POLL_SECONDS))
        if ready:
            return True


def _serve(task_fd: int, result_fd: int) -> None:
    """The worker's loop: build and solve each task's model, send its outcome back."""
    from solver.exact import formulation
    from solver.exact.backends import get_backend

    while True:
        try:
            task: _Task = _read(task_fd)
        except EOFError:
            return
        try:
            model = formulation.build(task.problem, task.configs)
            hint = Values(task.hint) if task.hint is not None else None
            limit = max(CHILD_SHARE * (task.deadline - time.monotonic()), 0.01)
            options = replace(task.options, time_limit=limit)
            result = get_backend(task.backend).solve(model, hint=hint, options=options)
        except Exception as e:  # reported to the parent as an ERROR outcome
            result = outcome(SolverStatus.ERROR, None, None, 0.0, f"{type(e).__name__}: {e}")
        try:
            _write(result_fd, result)
        except BrokenPipeError:  # the parent is gone
            return


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
