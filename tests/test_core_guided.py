"""The guided placement's time window (solver.core.steps.guided.guided_window)."""

from __future__ import annotations

import pytest

from solver.core.settings import SolverSettings
from solver.core.steps.guided import guided_window


def test_short_budgets_keep_the_fixed_safety_stop_and_the_extraction_reserve() -> None:
    s = SolverSettings(max_guided_seconds=2.0, guided_share=0.6, extract_seconds=0.15)
    assert guided_window(1.0, s) == pytest.approx(0.85)  # all but the extraction reserve
    assert guided_window(3.0, s) == pytest.approx(2.0)  # 0.6 x 3 s is below the 2 s stop


def test_longer_budgets_give_a_share_of_the_time_left() -> None:
    # At 1,024 nodes a placement takes about 0.6 s and the placement in the aggregated split's
    # racks runs only with twice that left after it: a fixed 2 s stop left it out whenever the
    # first placement ran slow.
    s = SolverSettings(max_guided_seconds=2.0, guided_share=0.6, extract_seconds=0.15)
    assert guided_window(4.5, s) == pytest.approx(2.7)
    assert guided_window(20.0, s) == pytest.approx(12.0)
