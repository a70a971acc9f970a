"""The objective of docs/objective.md, recomputed by hand on small plans."""

from __future__ import annotations

import pytest

from solver.domain import GpuSlice, JobAssignment, JobState, ObjectiveWeights
from solver.perfmodel.configs import build_config_set
from solver.scoring.objective import deadline_shortfall, is_migrated, score_plan, utility
from solver.scoring.plans import materialize
from tests.factories import cluster, job, node, point, problem, running


def test_score_by_hand() -> None:
    # Two racks; "a" (weight 2) runs 4 GPUs spread over two nodes in two racks where one node
    # would do; "b" waits with a deadline; "c" ran before and is now queued (a migration).
    c = cluster(node("n0", rack="r0"), node("n1", rack="r1"))
    a = job("a", point(4, 400.0, watts=1000.0), point(8, 500.0, watts=2000.0), weight=2.0)
    b = job("b", point(2, 100.0), remaining_samples=3600.0, deadline_seconds=60.0)
    cj = job("c", point(2, 50.0), current=running("A100", {"n1": (6, 7)}))
    w = ObjectiveWeights(throughput=1.0, energy=0.5, migration=0.25, locality=0.1, deadline=0.3)
    p = problem(c, a, b, cj, weights=w)
    configs = build_config_set(p)
    a4 = next(x for x in configs.by_job["a"] if x.num_gpus == 4 and x.sm_clock_mhz == 1410)
    plan = [
        JobAssignment("a", JobState.RUNNING, a4, (GpuSlice("n0", (0, 1)), GpuSlice("n1", (0, 1)))),
        JobAssignment("b", JobState.QUEUED),
        JobAssignment("c", JobState.QUEUED),
    ]
    got = score_plan(p, plan, configs.best_samples_per_second)
    max_watts = 2 * 8 * 400.0
    assert configs.best_samples_per_second["a"] == 500.0
    assert got.throughput == pytest.approx(2.0 * 400 / 500)
    assert got.energy == pytest.approx(1000.0 / max_watts)
    assert got.locality == 2  # one extra node, one extra rack
    assert got.deadline == pytest.approx(1.0)  # b queued with a deadline: full shortfall
    assert got.migration == pytest.approx(1.0)
    assert got.total == pytest.approx(1.6 - 0.5 * 1000 / 6400 - 0.25 - 0.1 * 2 - 0.3)


def test_deadline_shortfall_is_share_of_rate_missed() -> None:
    p = problem(
        cluster(node("n0")),
        job("b", point(2, 30.0), remaining_samples=3600.0, deadline_seconds=60.0),
    )
    configs = build_config_set(p)
    top = max(configs.by_job["b"], key=lambda x: x.samples_per_second)
    assert deadline_shortfall(p.jobs[0], top) == pytest.approx(1 - 30 / 60)
    assert utility(top, 30.0) == 1.0


def test_clock_change_alone_is_not_a_migration() -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(2, 100.0), current=running("A100", {"n0": (0, 1)}, clock=1410)),
    )
    configs = build_config_set(p)
    slow = min(configs.by_job["a"], key=lambda x: x.sm_clock_mhz)
    assert slow.sm_clock_mhz < 1410
    stay = JobAssignment("a", JobState.RUNNING, slow, (GpuSlice("n0", (0, 1)),))
    moved = JobAssignment("a", JobState.RUNNING, slow, (GpuSlice("n0", (2, 3)),))
    assert not is_migrated(p.jobs[0], stay)
    assert is_migrated(p.jobs[0], moved)


def test_materialize_gives_a_staying_job_its_own_gpus() -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(2, 100.0), current=running("A100", {"n0": (5, 6)})),
        job("b", point(4, 100.0)),
    )
    configs = build_config_set(p)
    a2 = next(x for x in configs.by_job["a"] if x.sm_clock_mhz == 1410)
    b4 = next(x for x in configs.by_job["b"] if x.sm_clock_mhz == 1410)
    plan = materialize(p, configs, {"b": (b4, {"n0": 4}), "a": (a2, {"n0": 2})})
    assert plan.assignment("a").placement == (GpuSlice("n0", (5, 6)),)
    assert plan.assignment("b").placement == (GpuSlice("n0", (0, 1, 2, 3)),)
    assert not plan.assignment("a").migrated
