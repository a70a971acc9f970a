"""Local-search moves: each happens where it must, by the objective change worked out by hand,
and not where it would lose; every resulting plan passes the checker."""

from __future__ import annotations

import pytest

from solver.domain import Config, Job, ObjectiveWeights, Problem, ProfilePoint
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.search.moves import move_admit, move_clock, move_reshape, move_swap
from solver.search.scorer import Scorer
from solver.search.state import SearchState
from tests.factories import V100, cluster, job, node, only_throughput, point, problem, running
from tests.factories import checked_objective as objective

IDLE = 8 * 50.0
"""Idle watts of one 8-GPU A100 node (the factories' A100 idles at 50 W)."""
LADDER = {1410: (100.0, 1600.0), 1275: (95.0, 1300.0), 1125: (85.0, 1000.0), 990: (70.0, 800.0)}
"""A 4-GPU job measured at the four A100 clocks: samples/s and watts. Over the 200 W its GPUs
idle at, it draws 1400, 1100, 800 and 600 W."""


def at_clocks(gpus: int, table: dict[int, tuple[float, float]], **kw: object) -> list[ProfilePoint]:
    return [point(gpus, sps, watts, clock=clk, **kw) for clk, (sps, watts) in table.items()]  # type: ignore[arg-type]


def four(name: str, weight: float = 1.0, **kw: object) -> Job:
    """A job that runs on exactly 4 A100s, measured at every clock (LADDER)."""
    return job(name, *at_clocks(4, LADDER), weight=weight, min_gpus=4, max_gpus=4, **kw)


def config(configs: ConfigSet, name: str, gpus: int, clock: int, gpu: str = "A100") -> Config:
    return next(
        c
        for c in configs.by_job[name]
        if c.num_gpus == gpus and c.sm_clock_mhz == clock and c.gpu_type == gpu
    )


def start(p: Problem, **runs: tuple[int, int]) -> tuple[Scorer, SearchState]:
    """A state where each named job runs with (GPUs, clock), placed as the state fits it."""
    configs = build_config_set(p)
    scorer, state = Scorer(p, configs), SearchState(p)
    for name, (gpus, clock) in runs.items():
        c = config(configs, name, gpus, clock)
        fitted = state.fit(scorer.jobs[name], c)
        assert fitted is not None
        state.take(name, c, fitted[0])
    return scorer, state


def clock_of(state: SearchState, name: str) -> int:
    return state.choices[name][0].sm_clock_mhz


# ------------------------------------------------------------------ move_clock


def test_move_clock_lowers_a_clock_that_saves_more_energy_than_it_loses() -> None:
    # Energy weight 0.1 over 8 x 400 W: 1410 is worth 1 - 0.1 * 1600/3200 = 0.95; 1125 (98 samples/s
    # at 1000 W) 0.98 - 0.03125 = 0.94875; 990 (97 at 800 W) 0.97 - 0.025 = 0.945; 1275 (99.5 at
    # 1100 W) 0.995 - 0.034375 = 0.960625: the best, 0.010625 above the top clock.
    table = {1410: (100.0, 1600.0), 1275: (99.5, 1100.0), 1125: (98.0, 1000.0), 990: (97.0, 800.0)}
    p = problem(
        cluster(node("n0")),
        job("a", *at_clocks(4, table), min_gpus=4, max_gpus=4),
        weights=ObjectiveWeights(1.0, 0.1, 0.0, 0.0, 0.0),
    )
    scorer, state = start(p, a=(4, 1410))
    before = objective(p, scorer, state)
    counts = dict(state.choices["a"][1])
    gained = move_clock(scorer, state, scorer.jobs["a"])
    assert gained == pytest.approx(0.010625)
    assert objective(p, scorer, state) - before == pytest.approx(gained)
    assert clock_of(state, "a") == 1275 and state.choices["a"][1] == counts


def test_move_clock_keeps_the_top_clock_when_throughput_is_all_that_counts() -> None:
    p = problem(cluster(node("n0")), four("a"), weights=only_throughput())
    scorer, state = start(p, a=(4, 1410))
    assert move_clock(scorer, state, scorer.jobs["a"]) == 0.0
    assert clock_of(state, "a") == 1410


def test_move_clock_raises_a_clock_only_as_far_as_the_power_budget_allows() -> None:
    # Over idle, 1100 W of room: 1275 (1100 W) fits, 1410 (1400 W) does not. 0.95 - 0.70 = 0.25.
    p = problem(cluster(node("n0"), power=IDLE + 1100), four("a"), weights=only_throughput())
    scorer, state = start(p, a=(4, 990))
    assert move_clock(scorer, state, scorer.jobs["a"]) == pytest.approx(0.25)
    assert clock_of(state, "a") == 1275
    assert objective(p, scorer, state) == pytest.approx(0.95)


# ------------------------------------------------------------------ move_reshape


def test_move_reshape_moves_a_job_to_a_faster_gpu_type() -> None:
    # "a" runs on 2 V100s at 50 samples/s (0.5 of its best, 100 on 2 A100s): re-placed, +0.5.
    p = problem(
        cluster(node("n0"), node("v0", V100, count=4, rack="r1")),
        job("a", point(2, 100.0), point(2, 50.0, gpu=V100), min_gpus=2, max_gpus=2),
        weights=only_throughput(),
    )
    configs = build_config_set(p)
    scorer, state = Scorer(p, configs), SearchState(p)
    state.take("a", config(configs, "a", 2, 1380, "V100"), {"v0": 2})
    before = objective(p, scorer, state)
    gained = move_reshape(scorer, state, scorer.jobs["a"])
    assert gained == pytest.approx(0.5)
    assert objective(p, scorer, state) - before == pytest.approx(0.5)
    assert state.choices["a"][0].gpu_type == "A100"


def test_move_reshape_leaves_a_running_job_whose_move_gains_less_than_its_migration() -> None:
    # On A100s it would be 0.04 faster, but restarting it costs migration 0.05.
    p = problem(
        cluster(node("n0"), node("v0", V100, count=4, rack="r1")),
        job(
            "a",
            point(2, 100.0),
            point(2, 96.0, gpu=V100),
            min_gpus=2,
            max_gpus=2,
            current=running("V100", {"v0": (0, 1)}, clock=1380),
        ),
        weights=ObjectiveWeights(1.0, 0.0, 0.05, 0.0, 0.0),
    )
    configs = build_config_set(p)
    scorer, state = Scorer(p, configs), SearchState(p)
    state.take("a", config(configs, "a", 2, 1380, "V100"), {"v0": 2})
    assert move_reshape(scorer, state, scorer.jobs["a"]) == 0.0
    assert state.choices["a"][0].gpu_type == "V100"


# ------------------------------------------------------------------ move_admit


def test_move_admit_lowers_a_running_clock_to_start_a_job_worth_more() -> None:
    # 1900 W over idle. "a" runs at 1410 (1400 W); "b" needs 600 W at least: no room. Lowering
    # "a" to 1125 (-0.15, 600 W freed) lets "b" run at 1275 (+0.95), or "a" to 1275 (-0.05) lets
    # "b" run at 1125 (+0.85): +0.80 either way, the optimum 1.8 (0.95 + 0.85).
    p = problem(
        cluster(node("n0"), power=IDLE + 1900), four("a"), four("b"), weights=only_throughput()
    )
    scorer, state = start(p, a=(4, 1410))
    assert objective(p, scorer, state) == pytest.approx(1.0)
    gained = move_admit(scorer, state, scorer.jobs["b"])
    assert gained == pytest.approx(0.8)
    assert objective(p, scorer, state) == pytest.approx(1.8)
    assert {clock_of(state, "a"), clock_of(state, "b")} == {1275, 1125}


def test_move_admit_does_not_slow_others_for_a_job_worth_less_than_they_lose() -> None:
    # "b" of weight 0.05 gains at most 0.05 * 0.85 = 0.0425, the cheapest repair costs 0.05.
    p = problem(
        cluster(node("n0"), power=IDLE + 1900),
        four("a"),
        four("b", weight=0.05),
        weights=only_throughput(),
    )
    scorer, state = start(p, a=(4, 1410))
    assert move_admit(scorer, state, scorer.jobs["b"]) == 0.0
    assert "b" not in state.choices and clock_of(state, "a") == 1410


def test_move_admit_starts_a_job_that_fits_without_a_repair() -> None:
    # 2200 W over idle: "b" fits at 1125 (800 W) beside "a" at 1410 (+0.85); the repair that
    # would run both at 1275 (+0.95 - 0.05 = +0.90) is better and is taken.
    p = problem(
        cluster(node("n0"), power=IDLE + 2200), four("a"), four("b"), weights=only_throughput()
    )
    scorer, state = start(p, a=(4, 1410))
    assert move_admit(scorer, state, scorer.jobs["b"]) == pytest.approx(0.9)
    assert clock_of(state, "a") == clock_of(state, "b") == 1275
    assert objective(p, scorer, state) == pytest.approx(1.9)


# ------------------------------------------------------------------ move_swap


def eight(name: str, weight: float, **kw: object) -> Job:
    return job(name, point(8, 100.0), weight=weight, min_gpus=8, max_gpus=8, **kw)


def test_move_swap_stops_a_job_for_one_worth_more() -> None:
    # "a" (weight 1, running before: stopping it costs migration 0.05) holds the only 8 GPUs;
    # "b" (weight 2) needs all 8: 2 - 1 - 0.05 = +0.95.
    p = problem(
        cluster(node("n0")),
        eight("a", 1.0, current=running("A100", {"n0": tuple(range(8))})),
        eight("b", 2.0),
        weights=ObjectiveWeights(1.0, 0.0, 0.05, 0.0, 0.0),
    )
    scorer, state = start(p, a=(8, 1410))
    before = objective(p, scorer, state)
    gained = move_swap(scorer, state, scorer.jobs["b"])
    assert gained == pytest.approx(0.95)
    assert objective(p, scorer, state) - before == pytest.approx(0.95)
    assert set(state.choices) == {"b"}


@pytest.mark.parametrize(
    ("weight", "preemptible"),
    [(1.02, True), (2.0, False)],
    ids=["gain-below-migration", "not-preemptible"],
)
def test_move_swap_keeps_the_running_job(weight: float, preemptible: bool) -> None:
    # Weight 1.02 gains 0.02 over "a", less than its migration 0.05; a non-preemptible "a" stays.
    p = problem(
        cluster(node("n0")),
        eight("a", 1.0, current=running("A100", {"n0": tuple(range(8))}), preemptible=preemptible),
        eight("b", weight),
        weights=ObjectiveWeights(1.0, 0.0, 0.05, 0.0, 0.0),
    )
    scorer, state = start(p, a=(8, 1410))
    assert move_swap(scorer, state, scorer.jobs["b"]) == 0.0
    assert set(state.choices) == {"a"}


def test_move_swap_moves_the_stopped_job_to_another_gpu_type() -> None:
    # "a" holds the A100s but runs nearly as fast on the V100s (0.9); "b" needs the A100s:
    # stop "a" (-1), start "b" (+1), restart "a" on the V100s (+0.9): +0.9.
    p = problem(
        cluster(node("n0"), node("v0", V100, rack="r1")),
        job("a", point(8, 100.0), point(8, 90.0, gpu=V100), min_gpus=8, max_gpus=8),
        eight("b", 1.0),
        weights=only_throughput(),
    )
    scorer, state = start(p, a=(8, 1410))
    gained = move_swap(scorer, state, scorer.jobs["b"])
    assert gained == pytest.approx(0.9)
    assert objective(p, scorer, state) == pytest.approx(1.9)
    assert state.choices["a"][0].gpu_type == "V100" and state.choices["b"][0].gpu_type == "A100"


def test_move_swap_stops_one_job_for_several_that_together_are_worth_more() -> None:
    # "a" (1.0) holds all 8 GPUs; four 2-GPU jobs of weight 0.4 each are worth 1.6 together,
    # though any one alone is worth less than "a": +0.6.
    small = [job(f"q{k}", point(2, 100.0), weight=0.4, min_gpus=2, max_gpus=2) for k in range(4)]
    p = problem(cluster(node("n0")), eight("a", 1.0), *small, weights=only_throughput())
    scorer, state = start(p, a=(8, 1410))
    assert move_swap(scorer, state, scorer.jobs["q0"]) == pytest.approx(0.6)
    assert set(state.choices) == {"q0", "q1", "q2", "q3"}
    assert objective(p, scorer, state) == pytest.approx(1.6)


def test_a_rejected_swap_leaves_the_state_as_it_was() -> None:
    # Two 2-GPU jobs (0.8) are not worth "a" (1.0): every tentative change is undone.
    small = [job(f"q{k}", point(2, 100.0), weight=0.4, min_gpus=2, max_gpus=2) for k in range(2)]
    p = problem(cluster(node("n0")), eight("a", 1.0), *small, weights=only_throughput())
    scorer, state = start(p, a=(8, 1410))
    before = (dict(state.choices), state.job_watts, state.placer.free("n0"))
    assert move_swap(scorer, state, scorer.jobs["q0"]) == 0.0
    assert (dict(state.choices), state.job_watts, state.placer.free("n0")) == before
