"""The full model in an isolated worker process (solver.exact.isolated): the same answer as
in-process, killed at the deadline, replaced after it dies."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time

import pytest

from solver.domain import Backend
from solver.exact import formulation, isolated
from solver.exact.backends import ExactOptions, SolverStatus
from solver.exact.solve import plan_of, solve_full
from solver.perfmodel.configs import build_config_set
from solver.runtime.workers import Worker
from solver.scoring.checker import check_plan
from tests.factories import cluster, job, node, point, problem


def _problem(jobs: int = 3, nodes: int = 2):  # type: ignore[no-untyped-def]
    return problem(
        cluster(
            *(node(f"n{i}", rack=f"r{i % 2}") for i in range(nodes)),
            power=nodes * 8 * 50.0 + 1000.0 * jobs,  # idle, and about half the jobs' draw
        ),
        *(
            job(f"j{k}", point(2, 100 + k, watts=500), point(4, 180 + k, watts=1100))
            for k in range(jobs)
        ),
    )


def test_worker_gives_the_in_process_answer() -> None:
    p = _problem()
    configs = build_config_set(p)
    model = formulation.build(p, configs)
    options = ExactOptions(time_limit=20.0, threads=1)
    here = solve_full(model, Backend.HIGHS, options=options)
    there = isolated.solve_isolated(
        p, configs, Backend.HIGHS, hint=None, options=options, deadline=time.monotonic() + 20.0
    )
    assert there.status is SolverStatus.OPTIMAL
    result = plan_of(model, there, "HiGHS")
    assert result.plan is not None and here.plan is not None
    assert result.plan.objective.total == here.plan.objective.total
    assert check_plan(p, result.plan.assignments) == []


def test_a_worker_past_the_deadline_is_killed_on_time() -> None:
    isolated.warm_up()
    p = _problem(jobs=400, nodes=200)  # HiGHS's presolve alone takes seconds
    configs = build_config_set(p)
    start = time.monotonic()
    out = isolated.solve_isolated(
        p,
        configs,
        Backend.HIGHS,
        hint=None,
        options=ExactOptions(time_limit=100.0, threads=1),
        deadline=start + 0.3,
    )
    assert time.monotonic() - start < 0.3 + 0.5
    assert out.status is SolverStatus.NO_SOLUTION and "killed" in out.detail


def test_a_dead_worker_is_no_solution_and_the_next_solve_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    p = _problem(jobs=60, nodes=24)
    configs = build_config_set(p)
    isolated.warm_up(wait=True)
    # The worker the solve takes, told by the pool itself: watching the idle list raced with
    # background top-ups (a worker started and taken between two looks was never seen).
    taken: queue.Queue[int] = queue.Queue()
    take = isolated._pool.take

    def take_and_tell() -> Worker:
        worker = take()
        taken.put(worker.pid)
        return worker

    monkeypatch.setattr(isolated._pool, "take", take_and_tell)

    def kill_soon() -> None:
        pid = taken.get(timeout=20.0)
        time.sleep(0.5)  # into the solve, not before the task is sent
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill_soon).start()
    out = isolated.solve_isolated(
        p,
        configs,
        Backend.CPSAT,
        hint=None,
        options=ExactOptions(time_limit=30.0, threads=1),
        deadline=time.monotonic() + 30.0,
    )
    assert out.status is SolverStatus.NO_SOLUTION and "SIGKILL" in out.detail
    small = _problem()
    again = isolated.solve_isolated(
        small,
        build_config_set(small),
        Backend.HIGHS,
        hint=None,
        options=ExactOptions(time_limit=20.0, threads=1),
        deadline=time.monotonic() + 20.0,
    )
    assert again.status is SolverStatus.OPTIMAL
