"""The full model solved in a kept worker process, killed at the deadline.

A solver's presolve can run far past its time limit and cannot be interrupted from Python
(HiGHS presolves a 60,000-column model for 15 s whatever its limit). In a worker process of its
own (``solver.runtime.workers``) it is asked to stop on cancel and killed at the deadline
instead, and the answer stays on time. Workers are kept between solves and replaced when one is
killed or dies.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from solver.domain import Backend, Problem
from solver.exact.backends import ExactOptions, ExactOutcome, SolverStatus, get_backend, outcome
from solver.exact.index import Values
from solver.perfmodel.configs import ConfigSet
from solver.runtime.workerpool import WorkerPool
from solver.runtime.workers import CallContext, CallFailed, WorkerLost, run_call

TIME_SHARE = 0.85
"""The worker's own time limit, as a share of the time to the deadline: it stops by itself
and sends its solution back before it would be killed (HiGHS overruns its limit by a few per
cent in presolve and at the root)."""
STOP_GRACE_SECONDS = 0.05
"""After a stop request (a cancelled call), the time the worker has to answer before it is
killed: HiGHS stops at its next interrupt check, but not inside presolve."""
PRELOAD = ("solver.exact.formulation", "solver.exact.backends.highs", "solver.exact.backends.cpsat")

_pool = WorkerPool("exact", preload=PRELOAD, keep=4)


@dataclass(frozen=True)
class _Task:
    problem: Problem
    configs: ConfigSet
    backend: Backend
    hint: npt.NDArray[np.float64] | None
    options: ExactOptions
    deadline: float
    """time.monotonic() instant (one clock for every process of the machine)."""
    time_share: float


def keep_workers(count: int) -> None:
    """Workers kept idle between solves (one per concurrent full-model solve is enough)."""
    _pool.keep = count


def warm_up(*, wait: bool = False) -> None:
    """Start a worker ahead of the first solve (its imports take about a second); with
    `wait`, return once it is ready."""
    if wait:
        _pool.warm_now(1)
    else:
        _pool.warm(1)


def idle_workers() -> list[int]:
    """The process ids of the workers waiting for a solve."""
    return _pool.idle_pids()


def solve_isolated(
    problem: Problem,
    configs: ConfigSet,
    backend: Backend,
    *,
    hint: Values | None,
    options: ExactOptions,
    deadline: float,
    time_share: float = TIME_SHARE,
) -> ExactOutcome:
    """The backend's outcome on the full model of `problem`, solved in a worker process that
    stops by itself at `time_share` of the time to `deadline` (time.monotonic()); a worker
    still running at `deadline`, or over its memory limit, is killed: NO_SOLUTION (ERROR with
    the reason for memory)."""
    start = time.monotonic()
    task = _Task(
        problem,
        configs,
        backend,
        None if hint is None else np.asarray(hint.array),
        replace(options, stop=None),  # a callable does not cross processes: relayed instead
        deadline,
        time_share,
    )
    worker = _pool.take()
    try:
        result: ExactOutcome = run_call(
            worker,
            _solve_task,
            task,
            kill_at=lambda: deadline,
            stop=options.stop,
            stop_grace=STOP_GRACE_SECONDS,
        )
    except WorkerLost as e:
        _pool.discard(worker, str(e) if e.crash else "", crash=e.crash)
        status = SolverStatus.ERROR if "memory" in str(e) else SolverStatus.NO_SOLUTION
        return outcome(status, None, None, time.monotonic() - start, f"{e}")
    except CallFailed as e:
        _pool.give_back(worker)
        first = str(e).splitlines()[0]
        return outcome(SolverStatus.ERROR, None, None, time.monotonic() - start, first)
    _pool.give_back(worker)
    return result


def _solve_task(task: _Task, call: CallContext) -> ExactOutcome:
    """In the worker: build and solve the task's model."""
    from solver.exact import formulation

    model = formulation.build(task.problem, task.configs)
    hint = Values(task.hint) if task.hint is not None else None
    limit = max(task.time_share * (task.deadline - time.monotonic()), 0.01)
    options = replace(task.options, time_limit=limit, stop=call.stop.is_set)
    return get_backend(task.backend).solve(model, hint=hint, options=options)
