"""Ruin and recreate (solver.search.ruin): it finds the exchanges that single moves cannot make
where power binds, its gain is the plan's exact change, it never leaves a worse state, and it
is a function of its seed (a work limit, not the clock)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.domain import Job, Problem
from solver.perfmodel.configs import build_config_set
from solver.scoring.plans import materialize
from solver.search.heuristic import Heuristic
from solver.search.local import local_search
from solver.search.ruin import ruin_and_recreate
from solver.search.scorer import Scorer
from solver.search.state import SearchState, state_of
from tests.factories import checked_objective as objective
from tests.factories import cluster, job, node, only_throughput, point, problem

ROOT = Path(__file__).resolve().parent.parent
FAR = 60.0
CLOCKS = {1410: 100.0, 1275: 95.0, 1125: 85.0, 990: 70.0}


def fixed(name: str, gpus: int, watts: float, weight: float) -> Job:
    """A job that runs on exactly `gpus` A100s drawing `watts` at every clock: the lower
    clocks, slower for nothing, are dominated, so it has one configuration."""
    points = [point(gpus, sps, watts, clock=clock) for clock, sps in CLOCKS.items()]
    return job(name, *points, weight=weight, min_gpus=gpus, max_gpus=gpus)


def two_for_three() -> Problem:
    """One 8-GPU node, 1,600 W over idle: "a" and "b" (4 GPUs, 800 W over idle, worth 1 each)
    fill it, as do "c", "d" and "e" (2 GPUs, 500 W over idle, worth 0.8 each: 2.4 > 2). From
    a-and-b no single move helps: stopping one frees 800 W, room for one small job only."""
    return problem(
        cluster(node("n0"), power=8 * 50.0 + 1600.0),
        fixed("a", 4, 4 * 50.0 + 800.0, 1.0),
        fixed("b", 4, 4 * 50.0 + 800.0, 1.0),
        *(fixed(n, 2, 2 * 50.0 + 500.0, 0.8) for n in ("c", "d", "e")),
        weights=only_throughput(),
    )


def running(p: Problem, *names: str) -> tuple[Scorer, SearchState]:
    configs = build_config_set(p)
    scorer, state = Scorer(p, configs), SearchState(p)
    for name in names:
        [c] = configs.by_job[name]
        fitted = state.fit(scorer.jobs[name], c)
        assert fitted is not None
        state.take(name, c, fitted[0])
    return scorer, state


def test_it_makes_the_exchange_single_moves_cannot() -> None:
    p = two_for_three()
    scorer, state = running(p, "a", "b")
    before = objective(p, scorer, state)
    assert local_search(scorer, state, time.monotonic() + FAR) == 0.0
    gained = ruin_and_recreate(scorer, state, time.monotonic() + FAR, seed=1)
    assert set(state.choices) == {"c", "d", "e"}
    assert gained == pytest.approx(objective(p, scorer, state) - before, abs=1e-9)
    assert gained == pytest.approx(0.4 * before / 2.0)  # three jobs of 0.8 for two of 1


def hetero(name: str) -> Problem:
    request = load_request_json(ROOT / "instances" / "hetero-power" / f"{name}.json")
    return pipeline.to_problem(request, Limits(max_time_budget_seconds=600))


def test_on_a_power_bound_snapshot_it_gains_exactly_what_it_reports() -> None:
    p = hetero("hetero-power-32-s2")
    configs = build_config_set(p)
    heuristic = Heuristic(p, configs)
    state = heuristic.first()
    heuristic.improve(state, time.monotonic() + FAR)
    before = objective(p, heuristic.scorer, state)
    gained = ruin_and_recreate(heuristic.scorer, state, time.monotonic() + FAR, seed=0)
    after = objective(p, heuristic.scorer, state)
    assert gained > 0.0
    assert after - before == pytest.approx(gained, abs=1e-9)


def test_the_same_seed_gives_the_same_plan_and_another_seed_may_not() -> None:
    p = hetero("hetero-power-32-s2")
    configs = build_config_set(p)
    plans = []
    for seed in (3, 3):
        heuristic = Heuristic(p, configs)
        state = heuristic.first()
        ruin_and_recreate(heuristic.scorer, state, time.monotonic() + FAR, seed=seed)
        plans.append({k: (c, dict(n)) for k, (c, n) in state.choices.items()})
    assert plans[0] == plans[1]


def test_a_stop_leaves_the_state_as_it_was() -> None:
    p = two_for_three()
    scorer, state = running(p, "a", "b")
    gained = ruin_and_recreate(scorer, state, time.monotonic() + FAR, seed=1, stop=lambda: True)
    assert gained == 0.0 and set(state.choices) == {"a", "b"}


def test_a_plan_becomes_its_search_state_again() -> None:
    p = hetero("hetero-power-32-s1")
    configs = build_config_set(p)
    plan = Heuristic(p, configs).run(time.monotonic() + FAR)
    state = state_of(p, plan)
    again = materialize(p, configs, dict(state.choices))
    assert again.objective.total == pytest.approx(plan.objective.total, abs=1e-12)
    assert again.assignments == plan.assignments
