"""The aggregated bound as a step (solver.core.steps.bound): whether its LP fits in the time left
is judged at the call's pace; the MIP's bounds reach the incumbent as they are proven."""

from __future__ import annotations

import dataclasses
import time

import pytest

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.core.deadline import Clock, Deadline
from solver.core.incumbent import Incumbent
from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.core.steps.bound import (
    aggregate_fits,
    aggregate_is_slow,
    aggregate_seconds,
    couples_columns,
    dual_first,
    run_mip,
    seconds_to_guide,
)
from solver.core.steps.first import run_first, run_priced
from solver.domain import (
    Backend,
    Fairness,
    FairnessMode,
    FairnessScope,
    JobState,
    Problem,
    Termination,
)
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.search.heuristic import Heuristic
from tests import factories as f
from tests.backend_helpers import ROOT
from tests.factories import solve
from tests.test_bound_racks import two_racks
from tests.test_ruin import two_for_three


def run_with(left: float, slowdown: float) -> SolveRun:
    settings = SolverSettings(extract_seconds=0.15, extract_floor_seconds=0.15)
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
    need = idle.extract_seconds + aggregate_seconds(idle)
    assert need < 0.2
    assert aggregate_fits(run_with(left=1.5 * need + 0.05, slowdown=1.0))
    assert not aggregate_fits(run_with(left=1.5 * need + 0.05, slowdown=2.0))
    assert aggregate_fits(run_with(left=2.0 * need + 0.1, slowdown=2.0))


def test_the_lp_is_slow_when_its_guide_could_not_start_being_placed_after_it() -> None:
    # First the LP, then its guide's placement, which starts with guided_start_share of its
    # estimate left: when that does not fit in the time left (at idle pace), the priced
    # passes go first.
    idle = run_with(left=30.0, slowdown=1.0)
    s = idle.settings
    idle.heuristic.guided_took[False] = 0.5  # the last guided placement's time
    need = idle.extract_seconds + aggregate_seconds(idle) + s.guided_start_share * 0.5
    for left, slow in ((need + 0.05, False), (need - 0.05, True)):
        run = run_with(left=left, slowdown=3.0)  # the call's pace does not enter
        run.heuristic.guided_took[False] = 0.5
        assert aggregate_is_slow(run) is slow, left


def test_the_time_to_the_guides_plan_is_the_lp_the_extraction_and_the_placement() -> None:
    # What a re-solve for the power margin needs after its first plan (the probe reads it).
    run = run_with(left=30.0, slowdown=1.0)
    run.heuristic.guided_took[False] = 0.5
    lp = run.extract_seconds + aggregate_seconds(run)
    assert seconds_to_guide(run) == pytest.approx(lp + 0.5)
    assert seconds_to_guide(run, 0.3) == pytest.approx(lp + 0.15)


@pytest.mark.parametrize(
    ("mode", "scope", "couples"),
    [
        (FairnessMode.WEIGHTED_SUM, FairnessScope.JOB, False),
        (FairnessMode.PROPORTIONAL, FairnessScope.JOB, False),
        (FairnessMode.DRF, FairnessScope.TENANT, False),
        (FairnessMode.PROPORTIONAL, FairnessScope.TENANT, True),
        (FairnessMode.MAX_MIN, FairnessScope.JOB, True),
        (FairnessMode.MAX_MIN, FairnessScope.TENANT, True),
        (FairnessMode.FINISH_TIME, FairnessScope.JOB, True),
    ],
)
def test_a_fairness_term_that_couples_the_columns_lengthens_the_lps_estimate(
    mode: FairnessMode, scope: FairnessScope, couples: bool
) -> None:
    plain = run_with(left=30.0, slowdown=1.0)
    fair = run_with(left=30.0, slowdown=1.0)
    fair.problem = dataclasses.replace(fair.problem, fairness=Fairness(mode, scope))
    assert couples_columns(fair.problem.fairness) is couples
    factor = fair.settings.aggregate_fairness_factor if couples else 1.0
    assert aggregate_seconds(fair) == pytest.approx(factor * aggregate_seconds(plain))


class RecordingIncumbent(Incumbent):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem)
        self.told: list[float] = []

    def tighten(self, bound: float | None, *, with_fairness: bool = False) -> None:
        if bound is not None:
            self.told.append(bound)
        super().tighten(bound, with_fairness=with_fairness)


def stored_32_s2() -> Problem:
    request = load_request_json(ROOT / "instances/hetero-power/hetero-power-32-s2.json")
    return pipeline.to_problem(request, Limits(max_time_budget_seconds=600))


def run_of(p: Problem, incumbent: Incumbent, seconds: float = 60.0) -> SolveRun:
    """A run of `p` on one thread with `seconds` from now, its plans offered to `incumbent`."""
    configs = build_config_set(p)
    now = time.monotonic()
    return SolveRun(
        problem=p,
        settings=SolverSettings(),
        clock=Clock(Deadline(start=now, end=now + seconds, finish_seconds=0.01)),
        incumbent=incumbent,
        configs=configs,
        heuristic=Heuristic(p, configs),
        threads=1,
    )


def test_the_mip_tightens_the_incumbents_bound_while_it_runs() -> None:
    # At 1,024 nodes the MIP can still be inside a heuristic's sub-MIP when the answer is
    # made, and its result is then ignored: the bounds it proved on the way must be kept.
    p = stored_32_s2()
    incumbent = RecordingIncumbent(p)
    run = run_of(p, incumbent)
    run_mip(run, run.clock.end)
    assert len(incumbent.told) >= 3  # before: once, when the MIP returned
    assert all(b >= 109.558575 for b in incumbent.told)  # the stored proven optimum
    assert incumbent.bound == min(incumbent.told)


def test_a_slow_lp_is_preceded_by_the_dual_whose_bound_is_told_and_prices_the_passes() -> None:
    # At 2,048 jobs the LP, judged slow, comes after the priced passes and is stopped at the
    # deadline: without the dual first, the answer had no bound.
    run = run_with(left=30.0, slowdown=1.0)
    assert run.incumbent.bound is None and run.heuristic.dual is None
    dual_first(run)
    dual = run.heuristic.dual
    assert dual is not None
    assert run.incumbent.bound == pytest.approx(dual.best_bound, rel=1e-12)
    assert dual.best_bound == pytest.approx(2.525, rel=1e-6)  # the LP's bound of two_for_three
    run_priced(run, None, time.monotonic() + 30.0)
    assert run.heuristic.dual is dual  # the passes were priced with it, not a second one


def test_without_time_for_the_aggregated_lp_the_answer_keeps_the_duals_bound() -> None:
    """The LP judged not to fit, and the priced passes past their share of the budget (as on
    a loaded machine): the Lagrangian dual still bounds the answer, and the plan is the same."""
    p = two_for_three()
    before = solve(p, settings=SolverSettings(heuristic_share=1e-6))
    late = SolverSettings(aggregate_seconds_per_column=100.0, heuristic_share=1e-6)
    r = solve(p, settings=late)
    assert "no time left for the aggregated bound" in r.stats.detail
    assert "Lagrangian dual bound" in r.stats.detail
    assert "dual-guided placement" in r.stats.detail  # its choice placed, as the LP's is
    assert check_plan(p, r.plan.assignments) == []
    assert r.stats.best_bound is not None and r.stats.best_bound >= r.stats.objective - 1e-9
    assert before.stats.best_bound is not None and r.stats.best_bound >= before.stats.best_bound
    assert r.plan.objective.total == pytest.approx(before.plan.objective.total)


def tight_racks(backend: Backend) -> Problem:
    """Four one-GPU jobs and two racks with room above idle for 1.5 GPUs each: split freely
    over the racks, three jobs run; in whole GPUs (as any plan), two."""
    jobs = [f.job(f"j{i}", f.point(1, 10.0), min_gpus=1, max_gpus=1) for i in range(4)]
    return f.problem(two_racks(room=375.0), *jobs, backend=backend, budget=2.0)


@pytest.mark.parametrize("integral", [True, False])
def test_the_mip_in_whole_groups_per_rack_proves_what_a_placement_reaches(integral: bool) -> None:
    p = tight_racks(Backend.AGGREGATE)
    result = solve(p, settings=SolverSettings(mip_integral_racks=integral))
    assert not check_plan(p, result.plan.assignments)
    running = [a for a in result.plan.assignments if a.state is JobState.RUNNING]
    assert len(running) == 2
    if integral:
        assert result.stats.termination is Termination.OPTIMAL
    else:  # the racks split freely bound three jobs: half as much again as any plan
        assert result.stats.termination is Termination.FALLBACK  # the first plan, unproven
        assert result.stats.relative_gap is not None and result.stats.relative_gap > 0.3


def test_the_free_split_guides_until_it_promises_more_then_whole_groups_bound() -> None:
    # The free split's MIP stops at its first solution worth more than the best plan (handed
    # over to be placed); the MIP in whole groups per rack then proves the bound, and its own
    # solutions, worth no more than the best plan, do not take the pending guide's place.
    p = tight_racks(Backend.AUTO)
    run = run_of(p, Incumbent(p))
    run_first(run)
    best = run.incumbent.best
    assert best is not None
    assert sum(a.state is JobState.RUNNING for a in best.assignments) == 2
    run_mip(run, run.clock.end)
    notes = [n for n in run.incumbent.notes if n.startswith("aggregate MIP")]
    assert len(notes) == 2 and "whole groups" not in notes[0]  # (too small to be stopped)
    assert notes[1].startswith("aggregate MIP in whole groups per rack OPTIMAL")
    assert run.pending is not None and len(run.pending.choice) == 3
    assert run.incumbent.bound == pytest.approx(best.objective.total, rel=1e-6)
    assert run.incumbent.done()


def test_the_free_splits_mip_stops_at_its_first_solution_worth_more_than_the_best_plan() -> None:
    p = stored_32_s2()
    run = run_of(p, Incumbent(p))
    run_first(run)
    best = run.incumbent.best
    assert best is not None
    run_mip(run, run.clock.end)
    notes = [n for n in run.incumbent.notes if n.startswith("aggregate MIP")]
    assert notes[0].startswith("aggregate MIP STOPPED")  # alone, it closes in 0.35-0.40 s
    assert notes[1].startswith("aggregate MIP in whole groups per rack OPTIMAL")
    assert run.pending_objective > best.objective.total
    optimum = 109.558575  # stored, proven
    assert run.incumbent.bound is not None
    assert optimum <= run.incumbent.bound <= optimum * (1 + 1e-6)
