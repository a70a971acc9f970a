"""The priced passes as a step of the solve (solver.core.steps.first.run_priced): they improve on
the best plan with time left, and do not start past their stop (a plan materialized and
checked at 1,024 nodes takes tenths of a second on a loaded machine)."""

from __future__ import annotations

import time

import pytest

from solver.core.steps.first import run_priced
from tests.test_core_ruin import run_holding_a_and_b
from tests.test_ruin import two_for_three


def test_with_time_left_the_priced_passes_offer_a_better_plan() -> None:
    run = run_holding_a_and_b(two_for_three())
    first = run.incumbent.best
    run_priced(run, None, time.monotonic() + 30.0)
    assert run.priced
    best = run.incumbent.best
    assert best is not None and first is not None
    assert best.objective.total > first.objective.total


def test_past_their_stop_the_priced_passes_do_not_start() -> None:
    run = run_holding_a_and_b(two_for_three())
    first = run.incumbent.best
    run_priced(run, None, time.monotonic() - 0.001)
    assert not run.priced  # not run: a later call with time may still run them
    assert run.incumbent.best is first
    assert not any("priced passes" in n for n in run.incumbent.notes)


def test_the_dual_that_priced_the_passes_bounds_the_answer() -> None:
    # At 2,048 jobs the aggregated LP, judged slow, runs after the priced passes and is stopped
    # at the deadline: without the priced passes' dual the answer had no bound at all.
    run = run_holding_a_and_b(two_for_three())
    assert run.incumbent.bound is None
    run_priced(run, None, time.monotonic() + 30.0)
    bound = run.incumbent.bound
    assert bound is not None
    # The optimum is 2.4 ("c", "d", "e"); the LP relaxation's 2.525 (those three, and with the
    # 100 W left an eighth of "a"), which the Lagrangian dual reaches at its minimum.
    assert bound >= 2.4
    assert bound == pytest.approx(2.525, rel=1e-6)
    gap = run.incumbent.gap()
    assert gap is not None and 0.0 <= gap < 0.07
