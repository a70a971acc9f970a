"""Carbon-aware rounds (solver.core.carbon), one rule each, on one 8-GPU A100 node and a job
that runs 800 samples/s at 8 GPUs: its predicted run is remaining_samples / 800 s. The
hourly forecast HOURLY is 400, 300, 100, 100 gCO2/kWh over four hours."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.core.carbon import SCALE_WINDOW_SECONDS, defer_for_carbon, scaled_energy, with_deferred
from solver.core.settings import SolverSettings
from solver.domain import Allocation, Backend, Job, JobState, ObjectiveWeights, Problem, QueueReason
from solver.grid import GridForecast, GridPoint
from tests.factories import (
    V100,
    canned_result,
    cluster,
    job,
    node,
    point,
    problem,
    random_tiny,
    running,
    solve,
)

H = 3600.0
RATE = 800.0
"""The job's best samples/s (its only measured point, at the highest clock)."""


def forecast(*carbon: float, min_saving: float = 0.1, scale: bool = False) -> GridForecast:
    """Hourly periods from now at these intensities."""
    points = tuple(GridPoint(k * H, c) for k, c in enumerate(carbon))
    return GridForecast(points, min_saving=min_saving, scale_energy=scale)


HOURLY = forecast(400.0, 300.0, 100.0, 100.0)


def waiting(
    hours: float = 1.0,
    *,
    deadline_seconds: float | None = None,
    max_deferral_seconds: float | None = None,
    age_seconds: float = 0.0,
    current: Allocation | None = None,
) -> Job:
    """An 8-GPU job (waiting unless `current`) whose predicted run lasts `hours`."""
    return job(
        "j",
        point(8, RATE, 2400.0),
        min_gpus=8,
        remaining_samples=RATE * hours * H,
        deadline_seconds=deadline_seconds,
        max_deferral_seconds=max_deferral_seconds,
        age_seconds=age_seconds,
        current=current,
    )


def round_of(*jobs: Job, grid: GridForecast | None = HOURLY, energy: float = 0.0) -> Problem:
    c = replace(cluster(node("n0")), grid=grid)
    return problem(c, *jobs, weights=ObjectiveWeights(energy=energy), backend=Backend.HEURISTIC)


def held(p: Problem, settings: SolverSettings | None = None) -> dict[str, str]:
    return dict(defer_for_carbon(p, settings or SolverSettings()).held)


def test_a_job_waits_for_the_cleanest_start_within_its_slack() -> None:
    """Deadline 4 h, run 1 h: slack 4 - 1.25 = 2.75 h; the start at 2 h runs at 100 against
    400 now, a 75 % saving."""
    p = round_of(waiting(deadline_seconds=4 * H))
    deferral = defer_for_carbon(p, SolverSettings())
    why = deferral.held["j"]
    assert "a start in 2.0 h runs at 100 gCO2/kWh" in why
    assert "against 400 for a start now" in why
    assert deferral.problem.jobs == ()


def test_it_starts_when_the_saving_is_below_min_saving() -> None:
    """75 % saved: it waits at min_saving 0.75 (the bound counts) and starts at 0.8."""
    j = waiting(deadline_seconds=4 * H)
    assert "j" in held(round_of(j, grid=replace(HOURLY, min_saving=0.75)))
    assert held(round_of(j, grid=replace(HOURLY, min_saving=0.8))) == {}
    # 400 -> 380 is 5 %, below the default 10 %
    assert held(round_of(j, grid=forecast(400.0, 380.0))) == {}


def test_it_starts_when_its_slack_is_gone() -> None:
    """Deadline 2 h: slack 2 - 1.25 = 0.75 h, before the first later period; deadline 1 h:
    none at all."""
    assert held(round_of(waiting(deadline_seconds=2 * H))) == {}
    assert held(round_of(waiting(deadline_seconds=1 * H))) == {}


def test_the_slack_takes_the_run_carbon_deadline_margin_longer() -> None:
    """Deadline 3.1 h: with the default margin 0.25 the slack is 1.85 h (the start at 1 h,
    300); without a margin it is 2.1 h (the start at 2 h, 100)."""
    p = round_of(waiting(deadline_seconds=3.1 * H))
    assert "a start in 1.0 h runs at 300" in held(p)["j"]
    no_margin = SolverSettings(carbon_deadline_margin=0.0)
    assert "a start in 2.0 h runs at 100" in held(p, no_margin)["j"]


def test_a_running_job_is_never_deferred() -> None:
    j = waiting(deadline_seconds=4 * H, current=running("A100", {"n0": tuple(range(8))}))
    assert held(round_of(j)) == {}


def test_a_job_without_deadline_or_max_deferral_never_waits() -> None:
    assert held(round_of(waiting())) == {}


def test_max_deferral_minus_age_bounds_the_wait() -> None:
    """max_deferral 3 h: the start at 2 h at age 0, only the one at 1 h at age 1.5 h, none at
    age 3 h; with a deadline too, the tighter bound holds."""
    three = 3 * H
    assert "a start in 2.0 h" in held(round_of(waiting(max_deferral_seconds=three)))["j"]
    older = waiting(max_deferral_seconds=three, age_seconds=1.5 * H)
    assert "a start in 1.0 h" in held(round_of(older))["j"]
    assert held(round_of(waiting(max_deferral_seconds=three, age_seconds=three))) == {}
    both = waiting(deadline_seconds=4 * H, max_deferral_seconds=1.5 * H)
    assert "a start in 1.0 h" in held(round_of(both))["j"]


def test_hours_past_the_forecast_count_at_its_mean() -> None:
    """400 then 100 over two hours (mean 250), a 2-hour run: now 250; from 1 h, an hour at 100
    and an unknown one at 250, 175 on average: 30 % saved."""
    p = round_of(waiting(2.0, deadline_seconds=10 * H), grid=forecast(400.0, 100.0))
    why = held(p)["j"]
    assert "a start in 1.0 h runs at 175 gCO2/kWh" in why
    assert "against 250 for a start now" in why


def test_scale_energy_scales_the_energy_weight_by_now_over_the_next_day() -> None:
    """Two hours, 300 then 100: the next 24 h are known only for two, mean 200, factor 1.5.
    Over 48 h (300, then 23 h at 100, then 1000): only the first day counts."""
    two = forecast(300.0, 100.0, scale=True)
    short = round_of(waiting(), grid=two, energy=2.0)
    assert scaled_energy(short, two).weights.energy == pytest.approx(3.0)
    assert defer_for_carbon(short, SolverSettings()).problem.weights.energy == pytest.approx(3.0)
    day = forecast(300.0, *[100.0] * 23, *[1000.0] * 24, scale=True)
    assert SCALE_WINDOW_SECONDS == 24 * H
    long = round_of(waiting(), grid=day, energy=1.0)
    assert scaled_energy(long, day).weights.energy == pytest.approx(300.0 / (2600.0 / 24))


def test_without_scale_energy_the_weight_stays() -> None:
    p = round_of(waiting(), grid=forecast(300.0, 100.0), energy=2.0)
    assert scaled_energy(p, forecast(300.0, 100.0)) is p
    assert defer_for_carbon(p, SolverSettings()).problem.weights.energy == 2.0


def test_without_a_grid_the_round_and_its_result_are_the_same_objects() -> None:
    p = round_of(waiting(deadline_seconds=4 * H), grid=None)
    deferral = defer_for_carbon(p, SolverSettings())
    assert deferral.problem is p and deferral.held == {}
    result = canned_result(p)
    assert with_deferred(p, deferral, result) is result


@pytest.mark.parametrize("seed", range(3))
def test_a_grid_that_defers_nothing_leaves_the_plan_as_without_one(seed: int) -> None:
    """random_tiny's jobs have deadlines; under a flat forecast none waits, and the heuristic
    plans exactly as carbon-blind."""
    p = random_tiny(seed)
    p = replace(p, options=replace(p.options, backend=Backend.HEURISTIC, time_budget_seconds=2.0))
    flat = replace(p, cluster=replace(p.cluster, grid=forecast(300.0, 300.0, 300.0)))
    assert held(flat) == {}
    blind, aware = solve(p).plan, solve(flat).plan
    assert aware.assignments == blind.assignments


def test_the_deferred_job_is_queued_deferred_beside_the_round_plan() -> None:
    """The solver's plan: the deferred job QUEUED with reason DEFERRED and the detail, the
    other (no slack) running; the stats say how many waited."""
    other = replace(waiting(deadline_seconds=H), name="k")
    p = round_of(waiting(deadline_seconds=4 * H), other)
    r = solve(p)
    a = r.plan.assignment("j")
    assert (a.state, a.queue_reason) == (JobState.QUEUED, QueueReason.DEFERRED)
    assert a.queue_detail == held(p)["j"]
    assert r.plan.assignment("k").state is JobState.RUNNING
    assert "carbon: 1 jobs deferred (intensity now 400 gCO2/kWh)" in r.stats.detail


def four_racks() -> Problem:
    """Four 8-GPU nodes on four racks (so DECOMPOSED has parts) and five 1-hour jobs: `later`
    (deadline 4 h) and `capped` (max_deferral 3 h) wait; `urgent` (deadline 1 h), `running`
    (already on n1) and `anytime` (neither bound) do not."""
    c = replace(cluster(*(node(f"n{i}", rack=f"r{i}") for i in range(4))), grid=HOURLY)
    jobs = (
        replace(waiting(deadline_seconds=4 * H), name="later"),
        replace(waiting(max_deferral_seconds=3 * H), name="capped"),
        replace(waiting(deadline_seconds=H), name="urgent"),
        replace(
            waiting(deadline_seconds=4 * H, current=running("A100", {"n1": tuple(range(8))})),
            name="running",
        ),
        replace(waiting(), name="anytime"),
    )
    return problem(c, *jobs, weights=ObjectiveWeights(energy=0.1))


def _backends() -> list[Backend]:
    from tests.bruteforce import EXACT_BACKENDS

    rest = [Backend.AUTO, Backend.HEURISTIC, Backend.AGGREGATE, Backend.DECOMPOSED]
    return rest + EXACT_BACKENDS


@pytest.mark.parametrize("backend", _backends(), ids=lambda b: b.value)
def test_every_backend_defers_the_same_jobs_and_plans_valid(backend: Backend) -> None:
    from solver.runtime.pools import InlineExecutor
    from solver.scoring.checker import check_plan

    p = four_racks()
    p = replace(p, options=replace(p.options, backend=backend, time_budget_seconds=3.0))
    r = solve(p, executor=InlineExecutor())
    deferred = {a.job for a in r.plan.assignments if a.queue_reason is QueueReason.DEFERRED}
    assert deferred == {"later", "capped"}, backend
    assert sorted(a.job for a in r.plan.assignments) == sorted(j.name for j in p.jobs)
    plan = r.plan
    assert check_plan(p, plan.assignments, plan.layout_changes, plan.power_actions) == []
    assert plan.assignment("running").state is JobState.RUNNING
    assert {plan.assignment(n).state for n in ("urgent", "anytime")} == {JobState.RUNNING}


def test_the_first_plan_told_early_queues_the_deferred_job_too() -> None:
    """The service answers with the first plan when the solve's worker dies: it must list the
    deferred job (QUEUED, DEFERRED) like the final plan, and pass the checker on the round."""
    from solver.core.solver import Solver
    from solver.domain import Plan
    from solver.scoring.checker import check_plan

    other = replace(waiting(deadline_seconds=H), name="k")
    p = round_of(waiting(deadline_seconds=4 * H), other)
    told: list[Plan] = []
    solver = Solver()
    try:
        solver.solve(p, on_first_plan=told.append)
    finally:
        solver.close()
    [first] = told
    assert sorted(a.job for a in first.assignments) == ["j", "k"]
    assert first.assignment("j").queue_reason is QueueReason.DEFERRED
    assert check_plan(p, first.assignments, first.layout_changes, first.power_actions) == []


def test_the_quick_fallback_defers_as_the_solve_does() -> None:
    from solver.core.deadline import Clock, Deadline
    from solver.core.solver import Solver

    p = round_of(waiting(deadline_seconds=4 * H))
    solver = Solver()
    try:
        r = solver.quick(p, Clock(Deadline.after(2.0, solver.settings, 1)), "test")
    finally:
        solver.close()
    a = r.plan.assignment("j")
    assert (a.state, a.queue_reason) == (JobState.QUEUED, QueueReason.DEFERRED)


def test_a_month_of_forecast_and_thousands_of_waiting_jobs_each_get_their_cleanest_start() -> None:
    """The longest valid forecast (MAX_GRID_POINTS hourly periods) and 2,000 jobs that may
    wait a week: each job weighs up to 168 starts (the time it takes: scripts/bench_carbon.py,
    docs/benchmarks.md)."""
    from solver.wire import MAX_GRID_POINTS

    grid = forecast(*(400.0 if k % 24 < 12 else 150.0 for k in range(MAX_GRID_POINTS)))
    jobs = [replace(waiting(max_deferral_seconds=7 * 24 * H), name=f"j{k}") for k in range(2000)]
    p = round_of(*jobs, grid=grid)
    deferral = defer_for_carbon(p, SolverSettings())
    assert len(deferral.held) == 2000
    assert "a start in 12.0 h runs at 150" in deferral.held["j0"]


def test_the_deadline_is_planned_on_the_slowest_gpu_type_the_job_may_get() -> None:
    """Deadline 4 h; 1 h on the A100 node, 4 h on the V100 node (200 samples/s): planned on the
    V100, the slack is 4 - 1.25 x 4 < 0 and the job starts; on A100s alone it waits."""
    two_types = job(
        "j",
        point(8, RATE, 2400.0),
        point(8, RATE / 4, 2400.0, gpu=V100),
        min_gpus=8,
        remaining_samples=RATE * H,
        deadline_seconds=4 * H,
    )
    both = replace(cluster(node("a"), node("v", V100)), grid=HOURLY)
    assert held(problem(both, two_types, backend=Backend.HEURISTIC)) == {}
    a100_only = replace(cluster(node("a")), grid=HOURLY)
    assert "j" in held(problem(a100_only, two_types, backend=Backend.HEURISTIC))


@pytest.mark.parametrize("seed", range(5))
def test_the_means_of_many_starts_at_once_equal_one_window_at_a_time(seed: int) -> None:
    """_Intensity.run_means against GridForecast.mean_carbon, hours past the end at the mean."""
    import random

    import numpy as np

    from solver.core.carbon import _Intensity

    rng = random.Random(seed)
    starts = [0.0]
    for _ in range(rng.randint(1, 40)):
        starts.append(starts[-1] + rng.choice((900.0, 1800.0, H, 2 * H)))
    grid = GridForecast(tuple(GridPoint(s, rng.uniform(0, 800)) for s in starts))
    fill = grid.mean_carbon(0.0, grid.end_seconds)
    assert fill is not None
    intensity = _Intensity(grid)
    for duration in (0.0, 600.0, rng.uniform(0, 3 * grid.end_seconds)):
        at = np.array(starts)
        got = intensity.run_means(at, duration)
        for s, value in zip(starts, got, strict=True):
            if duration == 0:
                expected = grid.mean_carbon(s, s)
            else:
                known_end = min(s + duration, grid.end_seconds)
                known = grid.mean_carbon(s, known_end)
                assert known is not None
                past = s + duration - known_end
                expected = (known * (known_end - s) + fill * past) / duration
            assert value == pytest.approx(expected, rel=1e-9, abs=1e-9)


def test_saving_per_delay_prices_the_wait_against_the_run() -> None:
    """Run 1 h, deadline 4 h: the start at 2 h saves 75 % and the one at 1 h 25 %. At a price of
    0.3 per run-length waited, 2 h nets 0.75 - 0.6 and is taken; at 0.5 no start nets > 0."""

    def with_price(price: float) -> dict[str, str]:
        grid = replace(HOURLY, saving_per_delay=price)
        return held(round_of(waiting(deadline_seconds=4 * H), grid=grid))

    assert "a start in 2.0 h" in with_price(0.3)["j"]
    assert with_price(0.5) == {}
    assert "a start in 2.0 h" in with_price(0.0)["j"]


def test_the_energy_scale_stays_within_a_factor_of_ten() -> None:
    """Now 5,000 against a day that is otherwise 1 gCO2/kWh: x10, not x200."""
    spiky = forecast(5000.0, *[1.0] * 23, scale=True)
    scaled = scaled_energy(round_of(waiting(), grid=spiky, energy=0.1), spiky)
    assert scaled.weights.energy == pytest.approx(1.0)
    calm = forecast(1.0, *[5000.0] * 23, scale=True)
    assert scaled_energy(round_of(waiting(), grid=calm, energy=0.1), calm).weights.energy == (
        pytest.approx(0.01)
    )
