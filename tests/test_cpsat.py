"""Each constraint family of the CP-SAT model on its own: the instance is built so that the
family binds, the model without it breaks the rule, and the full model keeps it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ortools.sat.python import cp_model

from solver import cpsat
from solver.checker import check_plan
from solver.configs import build_config_set
from solver.domain import (
    GpuSlice,
    JobAssignment,
    JobState,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    Problem,
)
from tests.factories import V100, cluster, job, node, only_throughput, point, problem, running


def solve(p: Problem, leave_out: Callable[[cpsat.CpSatModel], None] | None = None) -> Plan:
    families = [f for f in cpsat.CONSTRAINT_FAMILIES if f is not leave_out]
    configs = build_config_set(p)
    m = cpsat.build(p, configs, families)
    outcome = cpsat.solve(m, time_limit=20, seed=0, threads=1, relative_gap=0.0)
    assert outcome.status == "OPTIMAL"
    assert outcome.plan is not None
    return outcome.plan


def constraints_broken(p: Problem, plan: Plan) -> set[str]:
    return {v.constraint for v in check_plan(p, plan.assignments)}


def test_gpu_capacity() -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), min_gpus=8),
        job("b", point(8, 900), min_gpus=8, weight=2.0),
        weights=only_throughput(),
    )
    assert "gpu_capacity" in constraints_broken(p, _unchecked(p, cpsat.add_gpu_capacity))
    plan = solve(p)
    assert not constraints_broken(p, plan)
    assert plan.assignment("a").state is JobState.QUEUED
    assert plan.assignment("b").state is JobState.RUNNING


def test_gang_size() -> None:
    p = problem(
        cluster(node("n0", count=4)),
        job("a", point(8, 800), point(4, 300)),
        weights=only_throughput(),
    )
    plan = solve(p)
    a = plan.assignment("a")
    assert a.config is not None and a.config.num_gpus == 4
    assert sum(len(s.gpu_indices) for s in a.placement) == 4


def test_gpu_type_match() -> None:
    c = cluster(node("a0"), node("v0", V100))
    p = problem(c, job("a", point(8, 800), point(8, 100, gpu=V100)), weights=only_throughput())
    plan = solve(p)
    a = plan.assignment("a")
    assert a.config is not None and a.config.gpu_type == "A100"
    assert [s.node for s in a.placement] == ["a0"]


def test_tensor_groups_in_node() -> None:
    # Two 8-GPU nodes with 2 GPUs each taken: 6 free per node. A tp=4 job of 8 GPUs can only
    # take 4 + 4; without the family the model happily splits 6 + 2.
    c = cluster(
        node("n0", unavailable=frozenset({0, 1})), node("n1", unavailable=frozenset({0, 1}))
    )
    p = problem(
        c,
        job("a", point(8, 800, tp=4)),
        job("b", point(2, 250), point(4, 260)),
        weights=only_throughput(),
    )
    broken = constraints_broken(p, _unchecked(p, cpsat.add_tensor_groups_in_node))
    plan = solve(p)
    assert not constraints_broken(p, plan)
    a = plan.assignment("a")
    assert sorted(len(s.gpu_indices) for s in a.placement) == [4, 4]
    assert broken <= {"tensor_group_in_node"}


def test_power_budget_lowers_clock() -> None:
    # 8 GPUs at 300 W each at the top clock (2400 W) against a budget of 1900 W, idle 50 W x 8
    # counted in it: the job must run at a lower clock (or fewer GPUs).
    c = cluster(node("n0"), power=1900.0)
    p = problem(c, job("a", point(8, 800)), weights=only_throughput())
    assert "power_budget" in constraints_broken(p, _unchecked(p, cpsat.add_power_budget))
    plan = solve(p)
    assert not constraints_broken(p, plan)
    a = plan.assignment("a")
    assert a.state is JobState.RUNNING and a.config is not None
    assert a.config.sm_clock_mhz < 1410


def test_rack_power_budget() -> None:
    c = cluster(node("n0", rack="r0"), node("n1", rack="r1"), rack_power={"r0": 500.0})
    p = problem(c, job("a", point(8, 800)), job("b", point(8, 790)), weights=only_throughput())
    assert "rack_power_budget" in constraints_broken(p, _unchecked(p, cpsat.add_rack_power_budget))
    plan = solve(p)
    assert not constraints_broken(p, plan)
    in_r0 = [a for a in plan.assignments if any(s.node == "n0" for s in a.placement)]
    assert all(a.config is not None and a.config.watts <= 500 for a in in_r0)


def test_migration_keeps_running_job() -> None:
    # "a" runs on GPUs 4-7 of n0. Moving it gains nothing; the migration weight keeps it.
    c = cluster(node("n0"), node("n1"))
    a = job("a", point(4, 400), current=running("A100", {"n0": (4, 5, 6, 7)}))
    p = problem(c, a, weights=ObjectiveWeights(1.0, 0.0, 0.5, 0.0, 0.0))
    plan = solve(p)
    assert not plan.assignment("a").migrated
    assert plan.assignment("a").placement[0].gpu_indices == (4, 5, 6, 7)


def test_non_preemptible_job_stays() -> None:
    # "b" is worth more on n0, but "a" may not be moved off it.
    c = cluster(node("n0", count=4))
    a = job("a", point(4, 100), current=running("A100", {"n0": (0, 1, 2, 3)}), preemptible=False)
    b = job("b", point(4, 1000), weight=4.0)
    p = problem(c, a, b, weights=only_throughput())
    assert "non_preemptible" in constraints_broken(p, _unchecked(p, cpsat.add_migration))
    plan = solve(p)
    assert plan.assignment("a").state is JobState.RUNNING
    assert plan.assignment("b").state is JobState.QUEUED


def test_locality_prefers_one_node() -> None:
    c = cluster(node("n0", rack="r0"), node("n1", rack="r1"))
    p = problem(c, job("a", point(4, 400)), weights=ObjectiveWeights(1, 0, 0, 0.1, 0))
    plan = solve(p)
    assert len(plan.assignment("a").placement) == 1
    assert plan.objective.locality == 0


@pytest.mark.parametrize("budget", [None, 2000.0])
def test_bound_is_at_least_the_objective(budget: float | None) -> None:
    p = problem(cluster(node("n0"), power=budget), job("a", point(8, 800)), job("b", point(4, 500)))
    configs = build_config_set(p)
    outcome = cpsat.solve(
        cpsat.build(p, configs), time_limit=20, seed=0, threads=1, relative_gap=0.0
    )
    assert outcome.plan is not None and outcome.best_bound is not None
    assert outcome.best_bound >= outcome.plan.objective.total
    assert outcome.best_bound - outcome.plan.objective.total < 1e-4


def _unchecked(p: Problem, leave_out: Callable[[cpsat.CpSatModel], None]) -> Plan:
    """The optimum of the model without one family, turned into a plan as literally as possible.

    GPU indices are handed out in order per node and wrap around when a node is over-committed,
    so that capacity and grouping problems show in the checker.
    """
    families = [f for f in cpsat.CONSTRAINT_FAMILIES if f is not leave_out]
    configs = build_config_set(p)
    m = cpsat.build(p, configs, families)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(m.model) == cp_model.OPTIMAL
    taken: dict[str, int] = {}
    out = []
    for j in p.jobs:
        chosen = [
            c for i, c in enumerate(configs.by_job[j.name]) if solver.boolean_value(m.y[j.name, i])
        ]
        if not chosen:
            out.append(JobAssignment(j.name, JobState.QUEUED))
            continue
        placement = []
        for n in m.candidates[j.name]:
            k = solver.value(m.x[j.name, n.name])
            if k:
                free = n.available_gpu_indices
                start = taken.get(n.name, 0)
                idx = tuple(sorted({free[(start + t) % len(free)] for t in range(k)}))
                taken[n.name] = start + k
                placement.append(GpuSlice(n.name, idx))
        out.append(JobAssignment(j.name, JobState.RUNNING, chosen[0], tuple(placement)))
    return Plan(tuple(out), ObjectiveBreakdown(0, 0, 0, 0, 0, 0))
