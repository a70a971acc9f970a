"""The aggregated MIP in a kept worker (solver.search.bound_worker), and the exact side that
sends it there (solver.core.steps.bound.run_mip)."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

from solver.core.settings import SolverSettings
from solver.domain import Backend, Problem
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.runtime.workerpool import WorkerPool
from solver.search import bound_worker
from solver.search.bound import AggregateOutcome, solve_aggregate
from solver.search.guide import Guide
from tests.backend_helpers import _instance
from tests.factories import solve
from tests.test_core_bound import tight_racks

HARD = "hetero-power/hetero-power-64-s2"
"""Its MIP takes about 0.7 s alone: long enough to kill its worker on the way."""


@pytest.fixture(scope="module", autouse=True)
def _worker() -> None:
    bound_worker._pool.warm_now(1)


def test_the_worker_proves_what_the_mip_in_process_proves() -> None:
    p, configs = _instance("hetero-power/hetero-power-32-s1")
    here = solve_aggregate(p, configs, integer=True, time_limit=20.0, fairness=True)
    choices: list[tuple[Guide, float]] = []
    bounds: list[float] = []
    there = bound_worker.solve_mip_isolated(
        p,
        configs,
        end=time.monotonic() + 20.0,
        stop=lambda: False,
        on_choice=lambda guide, value: choices.append((guide, value)),
        on_bound=bounds.append,
    )
    assert here.status == there.status == "OPTIMAL"
    assert there.best_bound is not None
    assert there.best_bound == pytest.approx(here.best_bound, rel=1e-9)
    assert there.choice == here.choice
    assert choices and choices[-1][0].choice == there.choice  # told as found, the last one kept
    assert bounds and min(bounds) >= there.best_bound - 1e-6 * abs(there.best_bound)


def test_the_worker_solves_the_mip_in_whole_groups_per_rack_when_asked() -> None:
    p = tight_racks(Backend.AUTO)  # racks split freely hold three jobs, whole GPUs two
    configs = build_config_set(p)
    free = solve_aggregate(p, configs, integer=True, time_limit=20.0, fairness=True)
    here = solve_aggregate(
        p, configs, integer=True, time_limit=20.0, fairness=True, integral_racks=True
    )
    there = bound_worker.solve_mip_isolated(
        p,
        configs,
        end=time.monotonic() + 20.0,
        stop=lambda: False,
        on_choice=lambda *_: None,
        on_bound=lambda _: None,
        integral_racks=True,
    )
    assert free.best_bound is not None and there.best_bound is not None
    assert there.best_bound == pytest.approx(here.best_bound, rel=1e-9)
    assert there.best_bound < free.best_bound - 0.1
    assert len(there.choice) == 2


def _isolated(p: Problem, configs: ConfigSet, stop: Callable[[], bool]) -> AggregateOutcome:
    """The MIP in the worker, with 20 s to go and nothing told."""
    return bound_worker.solve_mip_isolated(
        p,
        configs,
        end=time.monotonic() + 20.0,
        stop=stop,
        on_choice=lambda *_: None,
        on_bound=lambda _: None,
    )


def test_a_stopped_call_answers_at_once() -> None:
    p, configs = _instance(HARD)
    start = time.monotonic()
    out = _isolated(p, configs, lambda: time.monotonic() - start > 0.1)
    assert out.status != "OPTIMAL"  # stopped before its proof (about 0.7 s alone)
    assert time.monotonic() - start < 2.0


def test_a_killed_worker_ends_the_call_without_a_bound_and_is_replaced() -> None:
    p, configs = _instance(HARD)
    bound_worker._pool.warm_now(1)  # the stopped call's worker may have been replaced
    (pid,) = bound_worker._pool.idle_pids()
    threading.Timer(0.15, os.kill, (pid, signal.SIGKILL)).start()
    start = time.monotonic()
    out = _isolated(p, configs, lambda: False)
    assert time.monotonic() - start < 5.0
    assert out.status.startswith("STOPPED") and out.best_bound is None and not out.choice
    bound_worker._pool.warm_now(1)  # the next call has a worker again
    again = _isolated(p, configs, lambda: False)
    assert again.status == "OPTIMAL"


def _auto(p: Problem, seconds: float) -> Problem:
    options = dataclasses.replace(p.options, backend=Backend.AUTO, time_budget_seconds=seconds)
    return dataclasses.replace(p, options=options)


@pytest.mark.parametrize(
    ("largest", "threads", "in_worker"),
    [
        (8_000, 2, True),
        (SolverSettings().isolated_mip_max_configurations, 2, False),
        (8_000, 1, False),
    ],
)
def test_the_exact_side_runs_its_mip_in_a_worker_beside_the_search_only(
    largest: int, threads: int, in_worker: bool
) -> None:
    """Beside the search (two threads) and up to the settings' size, in a worker; on one core
    the MIP runs after the search, alone, in process; by default (0), always in process."""
    bound_worker._pool.warm_now(1)
    p, _ = _instance(HARD)
    settings = SolverSettings(
        isolated_mip_max_configurations=largest, threads=threads, power_margin_z=0
    )
    r = solve(_auto(p, 3.0), settings=settings)
    assert "aggregate MIP" in r.stats.detail
    assert ("in a worker" in r.stats.detail) is in_worker


def test_a_worker_is_started_only_for_a_process_that_asks_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-shot solve runs its MIP in process and starts nothing; the second ask starts a
    worker in the background, and a later ask finds it ready."""
    pool = WorkerPool("aggregate-test", preload=("solver.search.bound",), keep=1)
    monkeypatch.setattr(bound_worker, "_pool", pool)
    monkeypatch.setattr(bound_worker, "_asked", 0)
    try:
        assert not bound_worker.ready()
        time.sleep(0.5)
        assert pool.idle() == 0  # nothing started for a one-shot solve
        assert not bound_worker.ready()
        deadline = time.monotonic() + 60
        while pool.idle() == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert bound_worker.ready()
    finally:
        pool.close()
