"""The guided placement's time window (solver.core.steps.guided.guided_window), when a guide's
placement starts (place_guided) and which placements of a guide run in the time left
(Heuristic.run_guided)."""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest

from solver.core.deadline import Clock, Deadline
from solver.core.incumbent import Incumbent
from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.core.steps.bound import dual_first
from solver.core.steps.guided import (
    WHOLE_PLACEMENT_NEED,
    guided_window,
    place_dual_guide,
    place_guided,
)
from solver.domain import Config
from solver.perfmodel.configs import build_config_set
from solver.search.guide import Guide
from solver.search.heuristic import GUIDED_PASSES, SPLIT_PASSES, Heuristic
from solver.search.state import SearchState
from tests.factories import cluster, job, node, point, problem
from tests.test_core_ruin import run_holding_a_and_b
from tests.test_ruin import two_for_three


def test_short_budgets_keep_the_fixed_safety_stop_and_the_extraction_reserve() -> None:
    s = SolverSettings(max_guided_seconds=2.0, guided_share=0.6, extract_seconds=0.15)
    assert guided_window(1.0, s, 0.15) == pytest.approx(0.85)  # all but the extraction reserve
    assert guided_window(3.0, s, 0.15) == pytest.approx(2.0)  # 0.6 x 3 s is below the 2 s stop


def test_a_slowed_call_keeps_a_stretched_extraction_reserve() -> None:
    # Materializing and checking the placed plan come after the window, as slow as the call.
    s = SolverSettings(max_guided_seconds=2.0, guided_share=0.6, extract_seconds=0.15)
    assert guided_window(1.0, s, s.extract_seconds, slowdown=2.0) == pytest.approx(0.7)
    assert guided_window(1.0, s, s.extract_seconds, slowdown=1.0) == pytest.approx(0.85)
    assert guided_window(20.0, s, 0.15, slowdown=2.0) == pytest.approx(12.0)  # the share binds


def test_longer_budgets_give_a_share_of_the_time_left() -> None:
    # At 1,024 nodes a placement takes about 0.6 s and the placement in the aggregated split's
    # racks runs only with twice that left after it: a fixed 2 s stop left it out whenever the
    # first placement ran slow.
    s = SolverSettings(max_guided_seconds=2.0, guided_share=0.6, extract_seconds=0.15)
    assert guided_window(4.5, s, s.extract_seconds) == pytest.approx(2.7)
    assert guided_window(20.0, s, s.extract_seconds) == pytest.approx(12.0)


def _spied(pass_seconds: float) -> tuple[Heuristic, list[bool], Guide]:
    """A heuristic whose first pass 'took' `pass_seconds`, recording each guided placement
    (True: in the split's racks), and a guide with a rack split."""
    nodes = (node("n0", rack="r0"), node("n1", rack="r1"))
    p = problem(
        cluster(*nodes, rack_power={"r0": 2000.0, "r1": 2000.0}),
        job("a", point(2, 100.0, 500.0), max_gpus=2),
    )
    configs = build_config_set(p)
    heuristic = Heuristic(p, configs)
    heuristic.pass_seconds = pass_seconds
    calls: list[bool] = []
    place = heuristic.guided

    def spy(
        choice: Mapping[str, Config],
        racks: Mapping[str, Mapping[str, float]] | None = None,
        stop_at: float | None = None,
    ) -> SearchState:
        calls.append(bool(racks))
        return place(choice, racks, stop_at)

    heuristic.guided = spy  # type: ignore[method-assign]
    guide = Guide({"a": configs.by_job["a"][0]}, {"a": {"r1": 2.0}})
    return heuristic, calls, guide


def test_with_time_for_both_placements_both_run_the_splits_first() -> None:
    heuristic, calls, guide = _spied(0.001)
    heuristic.run_guided(guide.choice, time.monotonic() + 5.0, guide.racks)
    assert calls == [True, False]


def test_without_a_split_only_the_placement_anywhere_runs() -> None:
    heuristic, calls, guide = _spied(0.001)
    heuristic.run_guided(guide.choice, time.monotonic() + 5.0, {})
    assert calls == [False]


def test_short_of_time_for_both_only_the_split_placement_runs() -> None:
    # At 1,024 nodes a first pass took 1.5-1.9 s on a slow day: with 2.4-2.9 s left the guided
    # placement was skipped altogether (14 % below the bound); the split's alone costs about
    # one pass (SPLIT_PASSES).
    heuristic, calls, guide = _spied(2.0)
    assert heuristic.guided_seconds(True) == pytest.approx(SPLIT_PASSES * 2.0)
    assert heuristic.guided_seconds(False) == pytest.approx(GUIDED_PASSES * 2.0)
    plan = heuristic.run_guided(guide.choice, time.monotonic() + 3.0, guide.racks)
    assert calls == [True]
    assert plan.assignment("a").config == guide.choice["a"]


def test_once_a_placement_ran_its_time_is_the_estimate() -> None:
    # A share of the first pass can be off several times over (at 1,024 nodes on a loaded
    # machine a placement in the racks took 1.7-2.3 first passes, and one started on the
    # estimate ran 0.6 s past the end): the last placement of each kind says better.
    heuristic, calls, guide = _spied(0.001)
    place = heuristic.guided

    def slow(
        choice: Mapping[str, Config],
        racks: Mapping[str, Mapping[str, float]] | None = None,
        stop_at: float | None = None,
    ) -> SearchState:
        time.sleep(0.05 if racks else 0.02)
        return place(choice, racks, stop_at)

    heuristic.guided = slow  # type: ignore[method-assign]
    heuristic.run_guided(guide.choice, time.monotonic() + 5.0, guide.racks)
    assert calls == [True, False]
    assert heuristic.guided_seconds(True) >= 0.05  # not 0.7 ms, the first pass's share
    assert heuristic.guided_seconds(False) >= 0.02
    # With less time than both measured placements need (0.05 + 1.5 x 0.02 s), only the
    # split's runs.
    calls.clear()
    heuristic.run_guided(guide.choice, time.monotonic() + 0.07, guide.racks)
    assert calls == [True]


def _three_jobs() -> tuple[Heuristic, dict[str, Config]]:
    p = problem(
        cluster(node("n0"), node("n1")),
        *(job(name, point(2, 100.0, 500.0), max_gpus=2) for name in ("a", "b", "c")),
    )
    configs = build_config_set(p)
    return Heuristic(p, configs), {n: configs.by_job[n][0] for n in ("a", "b", "c")}


def test_a_placement_stops_at_its_window_with_the_jobs_placed_by_then() -> None:
    # At 1,024 nodes on a loaded machine a placement started on its estimate ran 0.9 s, 0.2 s
    # past its window, and the worker was killed at its due instant: now it stops there.
    heuristic, choice = _three_jobs()
    whole = heuristic.guided(choice, stop_at=time.monotonic() + 60.0)
    assert not heuristic.guided_cut and set(whole.choices) == {"a", "b", "c"}
    cut = heuristic.guided(choice, stop_at=time.monotonic())  # already due
    assert heuristic.guided_cut and not cut.choices
    heuristic.guided(choice)  # no stop: the whole placement
    assert not heuristic.guided_cut


def test_a_placement_cut_short_only_raises_its_estimate() -> None:
    # It ran for less than it needed: its time is a lower bound on the next placement's.
    heuristic, choice = _three_jobs()
    heuristic.guided_took[False] = 0.5
    plan = heuristic.run_guided(choice, time.monotonic())  # due at once: cut at the start
    assert heuristic.guided_cut
    assert heuristic.guided_took[False] == 0.5
    assert all(a.config is None for a in plan.assignments)  # nothing placed, nothing broken
    heuristic.run_guided(choice, time.monotonic() + 60.0)
    assert not heuristic.guided_cut and heuristic.guided_took[False] < 0.5


def _run_with_slow_placements(estimate: float, left: float) -> tuple[SolveRun, Guide]:
    """A run with `left` seconds on its clock whose heuristic estimates a guided placement
    in the split's racks at `estimate` seconds (the placement itself takes milliseconds)."""
    heuristic, _, guide = _spied(0.001)
    heuristic.guided_took[True] = estimate
    settings = SolverSettings()
    p = heuristic.problem
    run = SolveRun(
        problem=p,
        settings=settings,
        clock=Clock(Deadline.after(left, settings)),
        incumbent=Incumbent(p),
        configs=heuristic.configs,
        heuristic=heuristic,
        threads=1,
    )
    return run, guide


def test_the_lp_guide_is_placed_with_a_share_of_its_estimate_left() -> None:
    # At 1,024 nodes under load a first pass of 1.27 s made the estimate 0.89 s; with 1.34 s
    # left the guide was not placed and the call answered 14 % below the bound, where a
    # placement cut at a third of its time is within 0.2 % of the whole one.
    s = SolverSettings()
    run, guide = _run_with_slow_placements(estimate=5.0, left=4.0)
    assert s.guided_start_share * 5.0 < 4.0 - s.extract_seconds < WHOLE_PLACEMENT_NEED * 5.0
    place_guided(run, guide, need=s.guided_start_share)
    best = run.incumbent.best
    assert best is not None and best.assignment("a").config == guide.choice["a"]


def test_a_mip_incumbent_needs_its_whole_estimate_and_half_again() -> None:
    run, guide = _run_with_slow_placements(estimate=5.0, left=4.0)
    place_guided(run, guide, "MIP-guided")
    assert run.incumbent.best is None  # not started: it would only take the solve's tail
    run, guide = _run_with_slow_placements(estimate=2.0, left=4.0)
    place_guided(run, guide, "MIP-guided")
    assert run.incumbent.best is not None


def test_with_less_than_the_share_left_the_lp_guide_waits() -> None:
    s = SolverSettings()
    run, guide = _run_with_slow_placements(estimate=20.0, left=4.0)
    assert s.guided_start_share * 20.0 > 4.0
    place_guided(run, guide, need=s.guided_start_share)
    assert run.incumbent.best is None


def test_without_the_lp_the_duals_choice_is_placed_as_a_guide() -> None:
    # Where the aggregated LP does not fit (a short budget, a loaded machine), the answer was
    # the first plan, 21 % below the LP's guide placed at 256 nodes / 400 jobs; the dual's
    # choice placed was 3.6 % below it. Here the first plan holds "a" and "b" (2.0); at the
    # dual's prices the three small jobs are worth more (2.4).
    run = run_holding_a_and_b(two_for_three())
    place_dual_guide(run)  # no dual computed: nothing to place
    before = run.incumbent.best
    assert before is not None and before.objective.total == pytest.approx(2.0)
    dual_first(run)
    place_dual_guide(run)
    best = run.incumbent.best
    assert best is not None and best.objective.total == pytest.approx(2.4)
    assert {a.job for a in best.assignments if a.config is not None} == {"c", "d", "e"}
    assert any(n.startswith("dual-guided placement") for n in run.incumbent.notes)


def test_the_duals_choice_needs_its_whole_estimate_and_half_again() -> None:
    # Cut short it is hardly above the first plan (1,024 nodes: 2,648 at 20 % of its
    # placement, against 2,646), so it does not take the priced passes' time for that.
    run, _ = _run_with_slow_placements(estimate=5.0, left=4.0)
    run.heuristic.guided_took[False] = 5.0  # anywhere: the dual's choice has no racks
    dual_first(run)
    place_dual_guide(run)
    assert run.incumbent.best is None
    run, _ = _run_with_slow_placements(estimate=5.0, left=4.0)
    run.heuristic.guided_took[False] = 2.0
    dual_first(run)
    place_dual_guide(run)
    assert run.incumbent.best is not None
