"""Rack-power relocation (solver.search.relocate): a job that only a rack budget blocks starts
once running jobs move to a rack with watts to spare; nothing changes when none can."""

from __future__ import annotations

import pytest

from solver.domain import Job, Problem
from solver.perfmodel.budgets import rack_floor_watts
from solver.perfmodel.configs import build_config_set
from solver.search.heuristic import Heuristic
from solver.search.relocate import start_with_rack_room
from solver.search.scorer import Scorer
from solver.search.state import SearchState
from tests.factories import (
    A100,
    V100,
    checked_objective,
    cluster,
    job,
    node,
    point,
    problem,
    running,
)
from tests.test_moves import config

K_EXTRA = 300.0 - A100.idle_watts  # "k" on one A100 at 300 W
J_EXTRA = 200.0 - V100.idle_watts  # "j" on one V100 at 200 W


def _problem(*, room_in_b: bool = True, k: Job | None = None) -> Problem:
    """Rack a: one V100 (only "j" can use it) and one A100; rack b: one A100. Rack a's
    budget holds "k" or "j", not both; rack b's holds "k" when `room_in_b`."""
    nodes = (node("ax", V100, 1, "a"), node("ay", A100, 1, "a"), node("by", A100, 1, "b"))
    floors = rack_floor_watts(cluster(*nodes))
    rack_power = {
        "a": floors["a"] + K_EXTRA + J_EXTRA - 10.0,
        "b": floors["b"] + (K_EXTRA + 10.0 if room_in_b else K_EXTRA - 10.0),
    }
    k = k if k is not None else job("k", point(1, 100.0, 300.0), max_gpus=1)
    j = job("j", point(1, 100.0, 200.0, gpu=V100), max_gpus=1)
    return problem(cluster(*nodes, rack_power=rack_power), k, j)


def _state(p: Problem) -> tuple[Scorer, SearchState, int]:
    """ "k" on rack a's A100; the index of "j"'s configuration."""
    configs = build_config_set(p)
    scorer, state = Scorer(p, configs), SearchState(p)
    state.take("k", config(configs, "k", 1, A100.max_clock_mhz), {"ay": 1})
    j_config = config(configs, "j", 1, V100.max_clock_mhz, "V100")
    assert not state.within_budgets(j_config, {"ax": 1})  # rack a cannot hold both
    return scorer, state, scorer.position("j", j_config)


def test_a_job_moves_to_a_rack_with_watts_so_the_blocked_one_starts() -> None:
    p = _problem()
    scorer, state, index = _state(p)
    before = checked_objective(p, scorer, state)
    gained = start_with_rack_room(scorer, state, scorer.jobs["j"], index)
    assert state.choices["j"][1] == {"ax": 1}
    assert state.choices["k"][1] == {"by": 1}
    assert gained == pytest.approx(scorer.gain(scorer.jobs["j"], index, {"ax": 1}, False))
    assert checked_objective(p, scorer, state) == pytest.approx(before + gained)


def test_nothing_changes_when_no_rack_has_the_watts() -> None:
    p = _problem(room_in_b=False)
    scorer, state, index = _state(p)
    choices = dict(state.choices)
    assert start_with_rack_room(scorer, state, scorer.jobs["j"], index) == 0.0
    assert state.choices == choices
    assert state.rack_watts["a"] == pytest.approx(K_EXTRA)
    assert state.rack_watts.get("b", 0.0) == pytest.approx(0.0)


def test_a_job_that_may_not_be_preempted_is_not_moved() -> None:
    fixed = job(
        "k",
        point(1, 100.0, 300.0),
        max_gpus=1,
        current=running("A100", {"ay": (0,)}),
        preemptible=False,
    )
    p = _problem(k=fixed)
    scorer, state, index = _state(p)
    assert start_with_rack_room(scorer, state, scorer.jobs["j"], index) == 0.0
    assert "j" not in state.choices and state.choices["k"][1] == {"ay": 1}


def test_the_guided_placement_relocates_to_place_the_whole_choice() -> None:
    # "k" runs on rack a's A100 and the choice keeps it; "j" fits only rack a's V100: the
    # placement moves "k" to rack b (a migration, worth less than running "j").
    k = job("k", point(1, 100.0, 300.0), max_gpus=1, current=running("A100", {"ay": (0,)}))
    p = _problem(k=k)
    configs = build_config_set(p)
    choice = {
        "k": config(configs, "k", 1, A100.max_clock_mhz),
        "j": config(configs, "j", 1, V100.max_clock_mhz, "V100"),
    }
    heuristic = Heuristic(p, configs)
    state = heuristic.guided(choice)
    assert state.choices["j"][1] == {"ax": 1}
    assert state.choices["k"][1] == {"by": 1}
    checked_objective(p, heuristic.scorer, state)
