"""The aggregated bound as a step (solver.core.steps.bound): whether its LP fits in the time left
is judged at the call's pace."""

from __future__ import annotations

import time

from solver.core.deadline import Clock, Deadline
from solver.core.incumbent import Incumbent
from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.core.steps.bound import aggregate_fits, aggregate_seconds
from solver.perfmodel.configs import build_config_set
from solver.search.heuristic import Heuristic
from tests.test_ruin import two_for_three


def run_with(left: float, slowdown: float) -> SolveRun:
    settings = SolverSettings(extract_seconds=0.15)
    p = two_for_three()
    configs = build_config_set(p)
    now = time.monotonic()
    deadline = Deadline(start=now, end=now + left, finish_seconds=0.01, slowdown=slowdown)
    return SolveRun(
        problem=p,
        settings=settings,
        clock=Clock(deadline),
        incumbent=Incumbent(p),
        configs=configs,
        heuristic=Heuristic(p, configs),
        threads=1,
    )


def test_the_lp_fits_only_with_its_time_and_the_extraction_at_the_calls_pace() -> None:
    # At 1,024 nodes on a loaded machine (pace 2.2-2.3) an LP that fitted at idle pace took
    # 0.66 s and the call answered 0.3 s past its window (the LP's build is not bounded by
    # its time limit).
    idle = run_with(left=30.0, slowdown=1.0)
    need = idle.settings.extract_seconds + aggregate_seconds(idle)
    assert need < 0.2
    assert aggregate_fits(run_with(left=1.5 * need + 0.05, slowdown=1.0))
    assert not aggregate_fits(run_with(left=1.5 * need + 0.05, slowdown=2.0))
    assert aggregate_fits(run_with(left=2.0 * need + 0.1, slowdown=2.0))
