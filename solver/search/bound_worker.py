"""The aggregated MIP in a kept worker process, off the search's GIL.

Beside the search, HiGHS calls Python back hundreds of times a second (its interrupt, each
improving solution, each tighter bound), and each call waits for the search thread to hand over
the GIL: the MIP of hetero-power-32-s2 took 1.07-1.59 s beside the search against 0.35-0.40 s
alone (docs/benchmarks.md, "The exact side's MIP beside the search"). In a worker its callbacks
cost nothing; its improving solutions and bounds come back as messages. A worker is used only
when one is idle and ready; otherwise the MIP runs in process, and from a process's second ask
on one is started in the background for a later call (starting one takes about a second of
imports, which a one-shot solve does not pay).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from solver.domain import Problem
from solver.perfmodel.configs import ConfigSet
from solver.runtime.workerpool import WorkerPool
from solver.runtime.workers import CallContext, CallFailed, WorkerLost, run_call
from solver.search.bound import AggregateOutcome, solve_aggregate
from solver.search.guide import Guide

KILL_GRACE_SECONDS = 0.1
"""A worker still running this long past its end (it stops itself there) is killed."""
STOP_GRACE_SECONDS = 0.05
"""After a stop request, the time the worker has to answer before it is killed."""

_pool = WorkerPool("aggregate", preload=("solver.search.bound",), keep=1)


@dataclass(frozen=True)
class _Task:
    problem: Problem
    configs: ConfigSet
    end: float
    """time.monotonic() instant (one clock for every process of the machine)."""
    integral_racks: bool


_asked = 0
"""Times this process asked for a worker (``ready``)."""


def ready() -> bool:
    """Whether a worker is idle now. If none is and this process has asked before, one is
    started in the background for a later call: a process that solves twice (the service's
    solve workers, the simulator, a batch) will solve again, and a one-shot solve does not pay
    for a worker it would not use."""
    global _asked
    _asked += 1
    if _pool.idle() > 0:
        return True
    if _asked > 1:
        _pool.warm(1)
    return False


def solve_mip_isolated(
    problem: Problem,
    configs: ConfigSet,
    *,
    end: float,
    stop: Callable[[], bool],
    on_choice: Callable[[Guide, float], None],
    on_bound: Callable[[float], None],
    integral_racks: bool = False,
) -> AggregateOutcome:
    """``solve_aggregate(integer=True, fairness=True, integral_racks=...)`` until `end` (a
    time.monotonic() instant) or `stop()`, in a worker: each improving solution and tighter
    bound is told here as it comes. A worker lost or failing gives a STOPPED outcome without a
    bound (what came before it stays told)."""
    start = time.monotonic()

    def told(message: tuple[str, object, float]) -> None:
        kind, guide, value = message
        if kind == "choice":
            assert isinstance(guide, Guide)
            on_choice(guide, value)
        else:
            on_bound(value)

    worker = _pool.take()
    try:
        outcome: AggregateOutcome = run_call(
            worker,
            _solve_task,
            _Task(problem, configs, end, integral_racks),
            kill_at=lambda: end + KILL_GRACE_SECONDS,
            stop=stop,
            stop_grace=STOP_GRACE_SECONDS,
            on_report=told,
        )
    except WorkerLost as e:
        _pool.discard(worker, str(e) if e.crash else "", crash=e.crash)
        return AggregateOutcome(f"STOPPED ({e})", None, {}, time.monotonic() - start)
    except CallFailed as e:
        _pool.give_back(worker)
        first = str(e).splitlines()[0]
        return AggregateOutcome(f"FAILED ({first})", None, {}, time.monotonic() - start)
    _pool.give_back(worker)
    return outcome


def _solve_task(task: _Task, call: CallContext) -> AggregateOutcome:
    """In the worker: the MIP, its solutions and bounds reported as they come."""
    return solve_aggregate(
        task.problem,
        task.configs,
        integer=True,
        time_limit=max(task.end - time.monotonic(), 0.0),
        stop=lambda: call.stop.is_set() or time.monotonic() >= task.end,
        on_choice=lambda guide, value: call.report(("choice", guide, value)),
        on_bound=lambda bound: call.report(("bound", None, bound)),
        fairness=True,
        integral_racks=task.integral_racks,
    )
