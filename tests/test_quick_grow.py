"""The quick plan's order and third step (solver.search.quick): waiting jobs start most value
per GPU first; jobs started at their fewest GPUs grow into what the others left, and
preemptible running jobs move where that gains more than the move costs; the budgets hold,
and the objective never falls for it."""

from __future__ import annotations

import dataclasses

import pytest

from solver.domain import JobState, ObjectiveWeights, Problem
from solver.scoring.checker import check_plan
from solver.search import quick
from solver.search.quick import QuickPlan
from tests.factories import A100, V100, cluster, job, node, point, problem, random_tiny, running
from tests.test_deadline import NEVER, assert_honest, quick_with_defaults


def elastic(power: float | None = None) -> Problem:
    """One empty 8-GPU A100 node; one queued job of 1-8 GPUs that scales well."""
    j = job(
        "j",
        point(1, 100.0, 300.0),
        point(2, 195.0, 600.0),
        point(4, 380.0, 1200.0),
        point(8, 740.0, 2400.0),
        min_gpus=1,
        max_gpus=8,
    )
    return problem(cluster(node("n0"), power=power), j)


def test_a_job_started_at_its_fewest_gpus_grows_into_the_empty_node() -> None:
    q = quick_with_defaults(elastic(), NEVER)
    a = q.plan.assignment("j")
    assert a.config is not None and a.config.num_gpus == 8
    assert q.started == 1 and q.grown == 1
    assert check_plan(elastic(), q.plan.assignments) == []
    assert "1 grown" in q.summary()


def test_growing_stays_within_the_power_budget() -> None:
    """Room over idle for one GPU at full power (A100: 50 W idle, 300 W here): the job keeps
    the one GPU it started on."""
    idle = 8 * A100.idle_watts
    p = elastic(power=idle + 300.0)
    q = quick_with_defaults(p, NEVER)
    a = q.plan.assignment("j")
    assert a.config is not None and a.config.num_gpus == 1
    assert q.grown == 0
    assert check_plan(p, q.plan.assignments) == []


def on_the_slow_type(migration: float) -> Problem:
    """A job of 8 GPUs running on V100s, four times faster on the empty A100 node."""
    j = job(
        "j",
        point(8, 100.0, 2000.0, gpu=V100),
        point(8, 400.0, 2400.0),
        min_gpus=8,
        max_gpus=8,
        current=running("V100", {"v0": tuple(range(8))}, clock=V100.max_clock_mhz),
    )
    weights = dataclasses.replace(ObjectiveWeights(), migration=migration)
    return problem(cluster(node("v0", V100), node("a0")), j, weights=weights)


@pytest.mark.parametrize(("migration", "moves"), [(0.05, True), (5.0, False)])
def test_a_running_job_moves_to_a_faster_type_only_where_that_gains_more_than_the_move(
    migration: float, moves: bool
) -> None:
    p = on_the_slow_type(migration)
    q = quick_with_defaults(p, NEVER)
    a = q.plan.assignment("j")
    assert a.state is JobState.RUNNING and a.config is not None
    assert a.config.gpu_type == ("A100" if moves else "V100")
    assert a.migrated is moves
    assert check_plan(p, q.plan.assignments) == []
    assert_honest(p, q.plan.objective.total, q.plan.assignments)


def without_growing(p: Problem, monkeypatch: pytest.MonkeyPatch) -> QuickPlan:
    with monkeypatch.context() as m:
        m.setattr(quick._Quick, "grow", lambda self: None)
        return quick_with_defaults(p, NEVER)


@pytest.mark.parametrize("seed", range(40))
def test_growing_never_lowers_the_objective(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    p = random_tiny(seed)
    q = quick_with_defaults(p, NEVER)
    if q.blocked:
        return
    before = without_growing(p, monkeypatch)
    assert q.plan.objective.total >= before.plan.objective.total - 1e-9
    assert check_plan(p, q.plan.assignments) == []


def test_the_growing_shows_on_random_tiny_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above would hold for a step that does nothing: here it gains."""
    gained = 0
    for seed in range(40):
        p = random_tiny(seed)
        q = quick_with_defaults(p, NEVER)
        if not q.blocked:
            gained += q.plan.objective.total > without_growing(p, monkeypatch).plan.objective.total
    assert gained >= 5


def test_waiting_jobs_start_most_value_per_gpu_first() -> None:
    """One 8-GPU node; a heavier job that needs all eight, and eight one-GPU jobs worth
    almost as much each: heaviest first ran the wide one alone (1.5), value per GPU first runs
    the eight (8)."""
    wide = job("wide", point(8, 800.0, 2400.0), min_gpus=8, max_gpus=8, weight=1.5)
    small = [job(f"s{k}", point(1, 100.0, 300.0), min_gpus=1, max_gpus=1) for k in range(8)]
    p = problem(cluster(node("n0")), wide, *small)
    q = quick_with_defaults(p, NEVER)
    running = {a.job for a in q.plan.assignments if a.state is JobState.RUNNING}
    assert running == {f"s{k}" for k in range(8)}
    assert q.plan.assignment("wide").queue_detail != ""  # waiting for GPUs, and says so
    assert check_plan(p, q.plan.assignments) == []
