"""The independent checker: one broken rule per test, named by its constraint family."""

from __future__ import annotations

import dataclasses

import pytest

from solver.domain import Config, GpuSlice, JobAssignment, JobState, Problem, Shape
from solver.perfmodel.configs import resolve_config
from solver.scoring import checker
from solver.scoring.checker import CHECKS, PlanView, check_plan
from tests.factories import V100, cluster, job, node, point, problem, running


def _config(p: Problem, name: str, gpus: int, tp: int = 1) -> Config:
    """The job's configuration of that shape at the top clock, Pareto-dominated or not."""
    j = next(j for j in p.jobs if j.name == name)
    config = resolve_config(p, j, Shape("A100", gpus // tp, tp, 1), 1410)
    assert config is not None
    return config


def _constraints(p: Problem, *assignments: JobAssignment) -> set[str]:
    return {v.constraint for v in check_plan(p, assignments)}


P = problem(
    cluster(node("n0", unavailable=frozenset({7})), node("n1", rack="r1"), node("v0", V100)),
    job("a", point(4, 400.0), point(4, 380.0, tp=2), point(8, 700.0)),
    job("b", point(2, 100.0)),
)


def run(name: str, config: Config, **slices: tuple[int, ...]) -> JobAssignment:
    return JobAssignment(
        name, JobState.RUNNING, config, tuple(GpuSlice(n, idx) for n, idx in slices.items())
    )


def test_valid_plan_passes() -> None:
    a = run("a", _config(P, "a", 4), n0=(0, 1, 2, 3))
    b = run("b", _config(P, "b", 2), n0=(4, 5))
    assert check_plan(P, [a, b]) == []


@pytest.mark.parametrize(
    ("assignments", "constraint"),
    [
        (
            lambda: [
                run("a", _config(P, "a", 4), n0=(0, 1, 2, 3)),
                run("b", _config(P, "b", 2), n0=(3, 4)),
            ],
            "gpu_capacity",
        ),
        (
            lambda: [
                run("a", _config(P, "a", 4), n0=(4, 5, 6, 7)),
                JobAssignment("b", JobState.QUEUED),
            ],
            "gpu_available",
        ),
        (
            lambda: [
                run("a", _config(P, "a", 4), n0=(0, 1, 2)),
                JobAssignment("b", JobState.QUEUED),
            ],
            "gang",
        ),
        (
            lambda: [
                run("a", _config(P, "a", 4, tp=2), n0=(0, 1, 2), n1=(0,)),
                JobAssignment("b", JobState.QUEUED),
            ],
            "tensor_group_in_node",
        ),
        (
            lambda: [
                run("a", _config(P, "a", 4), v0=(0, 1, 2, 3)),
                JobAssignment("b", JobState.QUEUED),
            ],
            "gpu_type_match",
        ),
        (
            lambda: [
                run("a", _config(P, "a", 4), n0=(0, 1, 2, 9)),
                JobAssignment("b", JobState.QUEUED),
            ],
            "gpu_index",
        ),
        (lambda: [run("a", _config(P, "a", 4), n0=(0, 1, 2, 3))], "one_assignment"),
        (
            lambda: [
                run(
                    "a",
                    _config(P, "a", 4)._replace(memory_per_gpu_gib=81.0),
                    n0=(0, 1, 2, 3),
                ),
                JobAssignment("b", JobState.QUEUED),
            ],
            "memory_fit",
        ),
        (
            lambda: [
                run("a", _config(P, "a", 4)._replace(sm_clock_mhz=1400), n0=(0, 1, 2, 3)),
                JobAssignment("b", JobState.QUEUED),
            ],
            "sm_clock",
        ),
        (
            lambda: [
                run("a", _config(P, "a", 8), n0=(0, 1, 2, 3, 4, 5, 6), n1=(0,)),
                JobAssignment("b", JobState.QUEUED),
            ],
            "gpu_limits",
        ),
    ],
)
def test_broken_rule_is_named(assignments: object, constraint: str) -> None:
    p = P
    if constraint == "gpu_limits":
        p = dataclasses.replace(P, jobs=(dataclasses.replace(P.jobs[0], max_gpus=4), P.jobs[1]))
    assert constraint in _constraints(p, *assignments())  # type: ignore[operator]
    # The family's own check finds it alone.
    own = getattr(checker, "check_" + FAMILY_OF.get(constraint, constraint))
    view = PlanView(p, assignments())  # type: ignore[operator]
    assert constraint in {v.constraint for v in own(view)}


FAMILY_OF = {
    "gpu_available": "placement",
    "gpu_index": "placement",
    "gpu_type_match": "placement",
    "one_assignment": "jobs_known_once",
    "memory_fit": "configuration",
    "sm_clock": "configuration",
    "gpu_limits": "configuration",
}
"""Constraint names reported by a check of another name."""


def test_every_family_passes_a_valid_plan_alone() -> None:
    a = run("a", _config(P, "a", 4), n0=(0, 1, 2, 3))
    b = run("b", _config(P, "b", 2), n0=(4, 5))
    for check in CHECKS:
        assert list(check(PlanView(P, [a, b]))) == [], check.__name__


def test_shared_gpu_is_one_capacity_violation_not_a_gang_one() -> None:
    a = run("a", _config(P, "a", 4), n0=(0, 1, 2, 3))
    b = run("b", _config(P, "b", 2), n0=(3, 3))
    found = check_plan(P, [a, b])
    assert [v.constraint for v in found] == ["gpu_capacity", "gpu_capacity", "gang"]
    assert found[0].message == "GPU n0/3 is also given to a"


def test_power_budget_counts_idle_gpus() -> None:
    # 3 nodes x 8 GPUs: 16 A100 idle at 50 W + 8 V100 at 40 W = 1120 W before any job.
    base = cluster(node("n0"), node("n1", rack="r1"), node("v0", V100), power=1120.0 + 1500.0)
    p = problem(base, job("a", point(4, 400.0, watts=1600.0)))
    cfg = _config(p, "a", 4)
    a = run("a", cfg, n0=(0, 1, 2, 3))
    # The job replaces 4 idle GPUs (200 W) with 1600 W: 1120 - 200 + 1600 = 2520 W <= 2620 W.
    assert "power_budget" not in _constraints(p, a)
    tight = dataclasses.replace(p, cluster=dataclasses.replace(base, power_budget_watts=2500.0))
    assert "power_budget" in _constraints(tight, a)


def test_rack_power_budget() -> None:
    c = cluster(node("n0"), node("n1", rack="r1"), rack_power={"r1": 1000.0})
    p = problem(c, job("a", point(4, 400.0, watts=1600.0)))
    cfg = _config(p, "a", 4)
    assert "rack_power_budget" not in _constraints(p, run("a", cfg, n0=(0, 1, 2, 3)))
    assert "rack_power_budget" in _constraints(p, run("a", cfg, n1=(0, 1, 2, 3)))


def test_non_preemptible_job_must_stay() -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(2, 100.0), current=running("A100", {"n0": (0, 1)}), preemptible=False),
    )
    cfg = _config(p, "a", 2)
    assert "non_preemptible" in _constraints(p, JobAssignment("a", JobState.QUEUED))
    assert "non_preemptible" in _constraints(p, run("a", cfg, n0=(2, 3)))
    assert not _constraints(p, run("a", cfg, n0=(0, 1)))
