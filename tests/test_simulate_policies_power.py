"""Baseline policies under a power budget: Zeus's least-cost clock
(solver.simulate.policies.zeus), a non-preemptible job slowed rather than stopped by every
policy, and every policy's decisions through the independent checker when the budget binds
or falls below the running jobs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import Shape
from solver.simulate.core import JobHistory, Policy
from solver.simulate.policies.common import RoundView
from solver.simulate.policies.fifo import FifoPolicy
from solver.simulate.policies.gavel import GavelPolicy
from solver.simulate.policies.las import LasPolicy
from solver.simulate.policies.sia import SiaPolicy
from solver.simulate.policies.zeus import ZeusPolicy, zeus_cost_per_sample
from tests.simulate_policy_helpers import (
    FAST,
    IDLE,
    LLM,
    SLOW,
    cluster,
    config,
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


def test_a_non_preemptible_job_is_slowed_not_stopped_when_the_budget_drops() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "pinned", {(FAST, 2): 20.0}, current=running(FAST, "f0", [0, 1]),
             preemptible=False)  # fmt: skip
    at_1110 = config(req, "pinned", Shape(FAST, 2, 1, 1), 1110)
    at_1275 = config(req, "pinned", Shape(FAST, 2, 1, 1), 1275)
    budget = 2 * IDLE[FAST] + at_1110.watts + 1.0  # 1110 MHz fits, 1275 MHz does not
    assert 2 * IDLE[FAST] + at_1275.watts > budget
    req.cluster.power_budget_watts = budget
    for policy in (FifoPolicy(), LasPolicy(), GavelPolicy(), SiaPolicy(), ZeusPolicy()):
        d = policy.decide(round_of(req, {"pinned": past(0, 2)}))
        assert d.allocations["pinned"].sm_clock_mhz == 1110, policy.name
        assert gpus_of(d, "pinned") == [("f0", 0), ("f0", 1)]
        assert violations(req, d) == []


# ---------------------------------------------------------------- Zeus


@pytest.mark.parametrize("eta", [0.5, 1.0, 0.0])
def test_zeus_runs_each_job_at_its_least_cost_clock(eta: float) -> None:
    req = cluster(("f0", FAST, 8))
    modeled(req, "llm", LLM)
    d = ZeusPolicy(eta_knob=eta).decide(round_of(req, {"llm": past(0, 2)}))
    shape = Shape(FAST, 2, 1, 1)
    configs = [config(req, "llm", shape, c) for c in (1410, 1275, 1110, 960)]
    best = min(configs, key=lambda c: zeus_cost_per_sample(c, eta, 400.0 * 2))
    assert d.allocations["llm"].shape == shape
    assert d.allocations["llm"].sm_clock_mhz == best.sm_clock_mhz
    if eta == 0.0:  # time only: the fastest clock
        assert best.sm_clock_mhz == 1410


def test_zeus_lower_clocks_fit_more_jobs_in_a_power_budget() -> None:
    req = cluster(("f0", FAST, 8))
    modeled(req, "a", LLM)
    modeled(req, "b", LLM)
    low = config(req, "a", Shape(FAST, 2, 1, 1), 960)
    assert (
        ZeusPolicy(eta_knob=1.0).best_config(
            RoundView.of(round_of(req, {})), problem(req).jobs[0], low.shape
        )
        == low
    )  # energy only: the lowest clock
    req.cluster.power_budget_watts = 8 * IDLE[FAST] + 2 * (low.watts - 2 * IDLE[FAST]) + 1.0
    history = {"a": past(0, 2), "b": past(1, 2)}
    zeus = ZeusPolicy(eta_knob=1.0).decide(round_of(req, history))
    fifo = FifoPolicy().decide(round_of(req, history))
    assert placed(zeus) == {"a": (FAST, 2), "b": (FAST, 2)}
    assert len(fifo.allocations) < 2
    assert violations(req, zeus) == [] and violations(req, fifo) == []


# ---------------------------------------------------------------- every policy, checked


POLICIES: list[Callable[[], Policy]] = [FifoPolicy, LasPolicy, GavelPolicy, SiaPolicy, ZeusPolicy]


def mixed(budget: float | None) -> tuple[pb.SolveRequest, dict[str, JobHistory]]:
    req = cluster(("f0", FAST, 4), ("f1", FAST, 4), ("s0", SLOW, 2), budget=budget)
    profiled(req, "p1", {(FAST, 2): 30.0, (FAST, 4): 55.0, (SLOW, 2): 12.0},
             current=running(FAST, "f0", [0, 1]))  # fmt: skip
    profiled(req, "p2", {(FAST, 1): 10.0, (FAST, 2): 19.0, (SLOW, 1): 6.0, (SLOW, 2): 11.0})
    profiled(req, "p3", {(FAST, 4): 50.0, (FAST, 2): 27.0}, watts_per_gpu=350.0)
    modeled(req, "llm", LLM, max_gpus=4)
    history = {
        "p1": past(0, 2, attained=4000.0, by_type={FAST: 90.0}),
        "p2": past(10, 2),
        "p3": past(20, 4),
        "llm": past(30, 2),
    }
    return req, history


@pytest.mark.parametrize("make", POLICIES, ids=lambda p: p.__name__)
def test_every_decision_passes_the_checker_when_the_budget_binds(
    make: Callable[[], Policy],
) -> None:
    free_req, history = mixed(None)
    free = make().decide(round_of(free_req, history))
    assert violations(free_req, free) == []
    budget = draw(free_req, free) - 300.0  # below what the policy would draw without one
    req, _ = mixed(budget)
    d = make().decide(round_of(req, history))
    assert violations(req, d) == []
    assert draw(req, d) <= budget
    assert d.solver_seconds >= 0.0


@pytest.mark.parametrize("make", POLICIES, ids=lambda p: p.__name__)
def test_every_policy_handles_a_budget_below_the_running_jobs(make: Callable[[], Policy]) -> None:
    req = cluster(("f0", FAST, 4), ("s0", SLOW, 2))
    profiled(req, "a", {(FAST, 2): 20.0}, current=running(FAST, "f0", [0, 1]))
    profiled(req, "b", {(FAST, 2): 20.0}, current=running(FAST, "f0", [2, 3]))
    profiled(req, "c", {(SLOW, 2): 8.0}, current=running(SLOW, "s0", [0, 1]), preemptible=False)
    req.cluster.power_budget_watts = 1200.0  # idle 280 W; running 1800 W
    policy = make()
    d = policy.decide(round_of(req, {"a": past(0, 2), "b": past(1, 2), "c": past(2, 2)}))
    assert "c" in d.allocations
    assert len(d.allocations) < 3
    assert violations(req, d) == []
    policy.close()
