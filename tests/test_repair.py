"""Clock-lowering repair: ladders along the convex hull, cheapest watts first, racks honoured."""

from __future__ import annotations

import pytest

from solver.domain import Config, Shape
from solver.perfmodel.configs import build_config_set
from solver.search.repair import ClockStep, Ladder, Ladders, apply_repair, job_ladder
from solver.search.scorer import Scorer
from solver.search.state import SearchState
from tests.factories import cluster, job, node, only_throughput, problem
from tests.test_moves import at_clocks, config, four


def step(name: str, freed: float, loss: float, racks: dict[str, float] | None = None) -> ClockStep:
    shape = Shape("A100", 1, 1, 1)
    c = Config(name, shape, 990, 1.0, 100.0, 10.0, 1, 1)
    return ClockStep(name, c, loss, freed, racks or {})


def test_a_ladder_skips_clocks_off_the_convex_hull() -> None:
    # Over 200 W idle: 1400 W at 1410, 1300 at 1275, 800 at 1125, 600 at 990. 1275 frees 100 W
    # for 0.10 (1e-3 per W), 1125 frees 600 W for 0.12 (2e-4 per W): 1275 is never worth it.
    table = {1410: (100.0, 1600.0), 1275: (90.0, 1500.0), 1125: (88.0, 1000.0), 990: (70.0, 800.0)}
    p = problem(
        cluster(node("n0")),
        job("a", *at_clocks(4, table), min_gpus=4, max_gpus=4),
        weights=only_throughput(),
    )
    configs = build_config_set(p)
    scorer, state = Scorer(p, configs), SearchState(p)
    state.take("a", config(configs, "a", 4, 1410), {"n0": 4})
    rungs = job_ladder(scorer, state, "a")
    assert [r.config.sm_clock_mhz for r in rungs] == [1125, 990]
    assert [r.freed for r in rungs] == pytest.approx([600.0, 200.0])
    assert [r.loss for r in rungs] == pytest.approx([0.12, 0.18])


def test_repair_takes_the_cheapest_watts_and_drops_rungs_made_unneeded() -> None:
    # 450 W short: "x" frees 100 W cheaply, then "y" 500 W; "y" alone covers it, so "x" is spared.
    ladder = Ladder([step("x", 100.0, 0.01), step("y", 500.0, 0.1), step("z", 900.0, 0.5)])
    repair = ladder.repair(450.0, {})
    assert repair is not None
    assert set(repair.configs) == {"y"}
    assert repair.loss == pytest.approx(0.1)
    assert ladder.least_loss(450.0) == pytest.approx(0.01 + 350.0 * 0.1 / 500.0)


def test_repair_is_none_when_every_rung_together_falls_short() -> None:
    ladder = Ladder([step("x", 100.0, 0.01), step("y", 500.0, 0.1)])
    assert ladder.repair(601.0, {}) is None
    assert ladder.least_loss(601.0) == float("inf")


def test_repair_takes_every_rung_that_gains_first() -> None:
    # A rung that gains (negative loss) comes first and is always worth taking.
    ladder = Ladder([step("x", 50.0, -0.02), step("y", 500.0, 0.1)])
    repair = ladder.repair(400.0, {})
    assert repair is not None and set(repair.configs) == {"x", "y"}
    assert repair.loss == pytest.approx(0.08)
    assert ladder.least_loss(30.0) == pytest.approx(-0.02)


def test_repair_frees_watts_in_the_rack_that_is_short() -> None:
    # Rack r1 is 300 W short, the cluster not at all: only "y" (in r1) helps, though "x" is cheaper.
    ladder = Ladder([step("x", 400.0, 0.01, {"r0": 400.0}), step("y", 400.0, 0.2, {"r1": 400.0})])
    repair = ladder.repair(-100.0, {"r1": 300.0})
    assert repair is not None and set(repair.configs) == {"y"}
    assert ladder.repair(-100.0, {"r1": 500.0}) is None


def test_ladders_follow_the_state_and_a_repair_keeps_each_job_on_its_gpus() -> None:
    p = problem(
        cluster(node("n0", rack="r0"), node("n1", rack="r1"), rack_power={"r1": 8 * 50.0 + 900}),
        four("x"),
        four("y"),
        four("q"),
        weights=only_throughput(),
    )
    configs = build_config_set(p)
    scorer, state = Scorer(p, configs), SearchState(p)
    state.take("x", config(configs, "x", 4, 1410), {"n0": 4})
    state.take("y", config(configs, "y", 4, 1125), {"n1": 4})
    # "q" at 990 on n1 draws 600 W over idle: r1 would be 800 + 600 - 900 = 500 W over.
    c = config(configs, "q", 4, 990)
    over, racks = state.deficits(c, {"n1": 4})
    assert over == float("-inf") and racks == {"r1": pytest.approx(500.0)}
    ladders = Ladders(scorer)
    ladder = ladders.of(state)
    assert ladders.of(state) is ladder  # unchanged state: reused
    assert ladder.repair(over, racks) is None  # y frees at most 200 W in r1
    racks = {"r1": 150.0}
    repair = ladder.repair(over, racks)
    assert repair is not None and set(repair.configs) == {"y"}
    apply_repair(state, repair)
    assert state.choices["y"][1] == {"n1": 4}
    assert state.choices["y"][0].sm_clock_mhz == 990
    assert ladders.of(state) is not ladder
