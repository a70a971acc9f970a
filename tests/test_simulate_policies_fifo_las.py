"""The queue-order baselines on hand-made rounds: FIFO (solver.simulate.policies.fifo) and LAS
(las), each rule by value, and every decision through the independent checker (power budget
included)."""

from __future__ import annotations

import pytest

from solver.domain import Shape
from solver.perfmodel.configs import resolve_config
from solver.simulate.policies.fifo import FifoPolicy
from solver.simulate.policies.las import LasPolicy
from tests.simulate_policy_helpers import (
    BIG,
    FAST,
    LLM,
    SLOW,
    TOP,
    cluster,
    draw,
    gpus_of,
    modeled,
    past,
    placed,
    problem,
    profiled,
    round_of,
    running,
    violations,
)

# ---------------------------------------------------------------- FIFO


def test_fifo_starts_in_submission_order_and_blocks_the_head_of_the_line() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "x", {(FAST, 1): 10.0})
    profiled(req, "y", {(FAST, 3): 30.0})
    profiled(req, "z", {(FAST, 2): 20.0})
    history = {"x": past(5, 1), "y": past(3, 3), "z": past(4, 2)}
    d = FifoPolicy().decide(round_of(req, history))
    # y (first submitted) takes 3 GPUs; z needs 2 of the 1 left and blocks x, which would fit.
    assert placed(d) == {"y": (FAST, 3)}
    assert "head of line: z" in d.detail
    assert violations(req, d) == []


def test_fifo_never_preempts_a_running_job() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "old", {(FAST, 4): 40.0}, current=running(FAST, "f0", [0, 1, 2, 3]))
    profiled(req, "new", {(FAST, 1): 10.0})
    history = {"old": past(0, 4, attained=1e6), "new": past(50, 1)}
    d = FifoPolicy().decide(round_of(req, history))
    assert placed(d) == {"old": (FAST, 4)}
    assert gpus_of(d, "old") == [("f0", 0), ("f0", 1), ("f0", 2), ("f0", 3)]


def test_fifo_skips_a_job_that_could_never_run() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "huge", {(FAST, 8): 80.0}, min_gpus=8, max_gpus=8)
    profiled(req, "small", {(FAST, 1): 10.0})
    d = FifoPolicy().decide(round_of(req, {"huge": past(0, 8), "small": past(1, 1)}))
    assert placed(d) == {"small": (FAST, 1)}


def test_fifo_splits_a_model_only_when_it_does_not_fit_one_gpu() -> None:
    req = cluster(("f0", FAST, 8))
    modeled(req, "small", LLM)
    modeled(req, "big", BIG)
    d = FifoPolicy().decide(round_of(req, {"small": past(0, 2), "big": past(1, 2)}))
    assert d.allocations["small"].shape == Shape(FAST, 2, 1, 1)
    # 6.7e9 parameters do not fit one 80 GiB GPU per replica: the smallest split that fits.
    p = problem(req)
    big = next(j for j in p.jobs if j.name == "big")
    assert resolve_config(p, big, Shape(FAST, 2, 1, 1), TOP[FAST]) is None
    assert d.allocations["big"].shape == Shape(FAST, 1, 2, 1)
    assert violations(req, d) == []


def test_fifo_takes_the_fastest_type_with_room() -> None:
    req = cluster(("f0", FAST, 1), ("s0", SLOW, 1))
    for name in ("a", "b"):
        profiled(req, name, {(FAST, 1): 20.0, (SLOW, 1): 10.0})
    d = FifoPolicy().decide(round_of(req, {"a": past(0, 1), "b": past(1, 1)}))
    assert placed(d) == {"a": (FAST, 1), "b": (SLOW, 1)}


def test_fifo_admits_within_the_power_budget_and_blocks_behind() -> None:
    # Idle 4 x 50 W; a 2-GPU job adds 2 x (300 - 50) = 500 W: one fits 900 W, two do not.
    req = cluster(("f0", FAST, 4), budget=900.0)
    profiled(req, "a", {(FAST, 2): 20.0})
    profiled(req, "b", {(FAST, 2): 20.0})
    profiled(req, "c", {(FAST, 1): 10.0})
    d = FifoPolicy().decide(round_of(req, {"a": past(0, 2), "b": past(1, 2), "c": past(2, 1)}))
    assert placed(d) == {"a": (FAST, 2)}
    assert draw(req, d) == pytest.approx(700.0)
    assert violations(req, d) == []


def test_fifo_stops_the_latest_started_job_when_the_budget_drops() -> None:
    req = cluster(("f0", FAST, 4), budget=900.0)
    profiled(req, "first", {(FAST, 2): 20.0}, current=running(FAST, "f0", [0, 1]))
    profiled(req, "second", {(FAST, 2): 20.0}, current=running(FAST, "f0", [2, 3]))
    d = FifoPolicy().decide(round_of(req, {"first": past(0, 2), "second": past(1, 2)}))
    assert placed(d) == {"first": (FAST, 2)}
    assert "stopped by the power budget: second" in d.detail
    assert violations(req, d) == []


# ---------------------------------------------------------------- LAS


def test_las_queues_follow_tiresias_thresholds() -> None:
    las = LasPolicy()
    assert [las.queue(s) for s in (0.0, 3249.9, 3250.0, 7199.0, 7200.0, 1e9)] == [0, 0, 1, 1, 2, 2]


def test_las_preempts_the_job_with_more_attained_service() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "old", {(FAST, 4): 40.0}, current=running(FAST, "f0", [0, 1, 2, 3]))
    profiled(req, "new", {(FAST, 4): 40.0})
    history = {"old": past(0, 4, attained=5000.0), "new": past(50, 4)}
    d = LasPolicy().decide(round_of(req, history))
    assert placed(d) == {"new": (FAST, 4)}
    assert violations(req, d) == []


def test_las_serves_running_jobs_first_in_a_queue_and_skips_what_does_not_fit() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "wide", {(FAST, 3): 30.0})
    profiled(req, "run", {(FAST, 2): 20.0}, current=running(FAST, "f0", [2, 3]))
    profiled(req, "narrow", {(FAST, 1): 10.0})
    history = {"wide": past(1, 3), "run": past(5, 2, attained=100.0), "narrow": past(2, 1)}
    d = LasPolicy().decide(round_of(req, history))
    # Queue 0 holds all three: run (running) first, then wide (3 of 2 free GPUs: skipped),
    # then narrow.
    assert placed(d) == {"run": (FAST, 2), "narrow": (FAST, 1)}
    assert gpus_of(d, "run") == [("f0", 2), ("f0", 3)]
