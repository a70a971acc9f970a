"""Every constraint family of the formulation on its own, on every installed exact backend. A
family test builds an instance on which the family binds: the model without it breaks the
rule (shown by the checker on the solver's values, read as literally as possible), and the
full model's plan passes the checker."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from solver.domain import (
    Backend,
    GpuSlice,
    JobAssignment,
    JobState,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    Problem,
)
from solver.exact import formulation
from solver.exact.backends import SolverStatus
from solver.exact.milp import Formulation
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from tests.backend_helpers import by_backend
from tests.bruteforce import solve_exact
from tests.factories import V100, cluster, job, node, only_throughput, point, problem, running

Family = Callable[[Formulation], None]


def solve(p: Problem, backend: Backend, leave_out: Family | None = None) -> Plan:
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not leave_out]
    outcome = solve_exact(backend, formulation.build(p, build_config_set(p), families))
    assert outcome.status is SolverStatus.OPTIMAL, outcome.detail
    assert outcome.plan is not None
    return outcome.plan


def broken(p: Problem, plan: Plan) -> set[str]:
    return {v.constraint for v in check_plan(p, plan.assignments)}


def unchecked(p: Problem, backend: Backend, leave_out: Family) -> Plan:
    """The optimum of the model without one family, turned into a plan as literally as possible.

    GPU indices are handed out in order per node and wrap around when a node is over-committed,
    so that capacity and grouping problems show in the checker.
    """
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not leave_out]
    configs = build_config_set(p)
    f = formulation.build(p, configs, families)
    outcome = solve_exact(backend, f)
    assert outcome.values is not None, outcome.detail
    values = outcome.values
    taken: dict[str, int] = {}
    out = []
    for j in p.jobs:
        chosen = [c for i, c in enumerate(configs.by_job[j.name]) if values[f.y[j.name, i]] > 0.5]
        if not chosen:
            out.append(JobAssignment(j.name, JobState.QUEUED))
            continue
        placement = []
        for n in f.candidates[j.name]:
            k = round(values[f.x[j.name, n.name]])
            if k:
                free = n.available_gpu_indices
                start = taken.get(n.name, 0)
                idx = tuple(sorted({free[(start + t) % len(free)] for t in range(k)}))
                taken[n.name] = start + k
                placement.append(GpuSlice(n.name, idx))
        out.append(JobAssignment(j.name, JobState.RUNNING, chosen[0], tuple(placement)))
    return Plan(tuple(out), ObjectiveBreakdown(0, 0, 0, 0, 0, 0))


def model_objective(f: Formulation, values: tuple[float, ...]) -> float:
    return f.offset + sum(c * values[v] for v, c in f.objective)


@by_backend
def test_config_choice(backend: Backend) -> None:
    # Without "at most one configuration", the job takes both (4 + 2 GPUs, 1.625 > 1).
    p = problem(
        cluster(node("n0")), job("a", point(4, 400), point(2, 250)), weights=only_throughput()
    )
    assert "gang" in broken(p, unchecked(p, backend, formulation.add_config_choice))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.config is not None and a.config.num_gpus == 4


@by_backend
def test_gang_size(backend: Backend) -> None:
    # b holds 4 of the 8 GPUs; without the gang rule a runs its 8-GPU shape on the other 4.
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), point(4, 300)),
        job("b", point(4, 1000)),
        weights=only_throughput(),
    )
    assert "gang" in broken(p, unchecked(p, backend, formulation.add_gang_size))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.config is not None and a.config.num_gpus == 4
    assert sum(len(s.gpu_indices) for s in a.placement) == 4


@by_backend
def test_gpu_type_match(backend: Backend) -> None:
    # b takes the A100 node; without the rule a runs its A100 shape on the V100 node.
    c = cluster(node("a0"), node("v0", V100))
    p = problem(
        c,
        job("a", point(8, 800), point(8, 100, gpu=V100)),
        job("b", point(8, 900), weight=2.0),
        weights=only_throughput(),
    )
    assert "gpu_type_match" in broken(p, unchecked(p, backend, formulation.add_gpu_type_match))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.config is not None and a.config.gpu_type == "V100"
    assert [s.node for s in a.placement] == ["v0"]


@by_backend
def test_tensor_groups_in_node(backend: Backend) -> None:
    # Two 8-GPU nodes with 2 GPUs each taken: 6 free per node. The tp=4 job a (8 GPUs) can
    # only take 4 + 4, which leaves 2 + 2: b runs its 2-GPU shape. Without the family a splits
    # 6 + 2, which leaves 4 GPUs on one node for b's better tp=4 shape.
    c = cluster(
        node("n0", unavailable=frozenset({0, 1})), node("n1", unavailable=frozenset({0, 1}))
    )
    p = problem(
        c,
        job("a", point(8, 800, tp=4)),
        job("b", point(2, 250), point(4, 260, tp=4)),
        weights=only_throughput(),
    )
    assert "tensor_group_in_node" in broken(
        p, unchecked(p, backend, formulation.add_tensor_groups_in_node)
    )
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert sorted(len(s.gpu_indices) for s in a.placement) == [4, 4]


@by_backend
def test_gpu_capacity(backend: Backend) -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), min_gpus=8),
        job("b", point(8, 900), min_gpus=8, weight=2.0),
        weights=only_throughput(),
    )
    assert "gpu_capacity" in broken(p, unchecked(p, backend, formulation.add_gpu_capacity))
    plan = solve(p, backend)
    assert not broken(p, plan)
    assert plan.assignment("a").state is JobState.QUEUED
    assert plan.assignment("b").state is JobState.RUNNING


@by_backend
def test_locality(backend: Backend) -> None:
    # Locality is an objective term: without the family the model scores a plan spread over
    # two nodes and racks as if it were compact; with it, the model's value is the plan's score.
    c = cluster(node("n0", rack="r0"), node("n1", rack="r1"))
    p = problem(c, job("a", point(4, 400)), weights=ObjectiveWeights(1, 0, 0, 0.1, 0))
    configs = build_config_set(p)
    spread = formulation.build(p, configs)
    cfg = max(configs.by_job["a"], key=lambda c: c.samples_per_second)
    split = materialize(p, configs, {"a": (cfg, {"n0": 2, "n1": 2})})
    assert split.objective.locality == 2
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not formulation.add_locality]
    without = formulation.build(p, configs, families)
    hinted = formulation.hint(without, split)
    values = tuple(hinted.get(i, 0.0) for i in range(without.num_variables))
    assert model_objective(without, values) > split.objective.total + 0.1
    hinted = formulation.hint(spread, split)
    values = tuple(hinted.get(i, 0.0) for i in range(spread.num_variables))
    assert model_objective(spread, values) == pytest.approx(split.objective.total, abs=1e-9)

    outcome = solve_exact(backend, spread)
    assert outcome.plan is not None and outcome.values is not None
    assert not broken(p, outcome.plan)
    assert len(outcome.plan.assignment("a").placement) == 1
    assert outcome.plan.objective.locality == 0
    assert model_objective(spread, outcome.values) == pytest.approx(
        outcome.plan.objective.total, abs=1e-6
    )


@by_backend
def test_migration_keeps_running_job(backend: Backend) -> None:
    # "a" runs on GPUs 4-7 of n0. Moving it gains nothing; the migration weight keeps it.
    c = cluster(node("n0"), node("n1"))
    a = job("a", point(4, 400), current=running("A100", {"n0": (4, 5, 6, 7)}))
    p = problem(c, a, weights=ObjectiveWeights(1.0, 0.0, 0.5, 0.0, 0.0))
    plan = solve(p, backend)
    assert not plan.assignment("a").migrated
    assert plan.assignment("a").placement[0].gpu_indices == (4, 5, 6, 7)


@by_backend
def test_non_preemptible_job_stays(backend: Backend) -> None:
    # "b" is worth more on n0, but "a" may not be moved off it.
    c = cluster(node("n0", count=4))
    a = job("a", point(4, 100), current=running("A100", {"n0": (0, 1, 2, 3)}), preemptible=False)
    b = job("b", point(4, 1000), weight=4.0)
    p = problem(c, a, b, weights=only_throughput())
    assert "non_preemptible" in broken(p, unchecked(p, backend, formulation.add_migration))
    plan = solve(p, backend)
    assert plan.assignment("a").state is JobState.RUNNING
    assert plan.assignment("b").state is JobState.QUEUED


@by_backend
def test_kept_only_configuration_stays_where_it_runs(backend: Backend) -> None:
    # a runs on n1 in a shape over the memory limit (kept_only); b needs all of n1 (tp=8).
    # a may not move to n0, so either it stays (b waits) or it waits: here b is worth more.
    c = cluster(node("n0", count=4), node("n1"))
    a = job("a", point(4, 400), current=running("A100", {"n1": (0, 1, 2, 3)}))
    b = job("b", point(8, 1000, tp=8), weight=4.0)
    p = problem(c, a, b, weights=only_throughput())
    base = build_config_set(p)
    kept = tuple(cfg._replace(kept_only=True, memory_per_gpu_gib=90.0) for cfg in base.by_job["a"])
    configs = ConfigSet({**base.by_job, "a": kept}, base.best_samples_per_second, 0)
    outcome = solve_exact(backend, formulation.build(p, configs))
    assert outcome.plan is not None
    assert outcome.plan.assignment("a").state is JobState.QUEUED
    assert not broken(p, outcome.plan)
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not formulation.add_migration]
    moved = solve_exact(backend, formulation.build(p, configs, families))
    assert moved.plan is not None
    assert "memory_fit" in broken(p, moved.plan)


@by_backend
def test_power_budget_lowers_clock(backend: Backend) -> None:
    # 8 GPUs at 300 W each at the top clock (2400 W) against a budget of 1900 W, idle 50 W x 8
    # counted in it: the job must run at a lower clock (or fewer GPUs).
    c = cluster(node("n0"), power=1900.0)
    p = problem(c, job("a", point(8, 800)), weights=only_throughput())
    assert "power_budget" in broken(p, unchecked(p, backend, formulation.add_power_budget))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.state is JobState.RUNNING and a.config is not None
    assert a.config.sm_clock_mhz < 1410


@by_backend
def test_rack_power_budget(backend: Backend) -> None:
    c = cluster(node("n0", rack="r0"), node("n1", rack="r1"), rack_power={"r0": 500.0})
    p = problem(c, job("a", point(8, 800)), job("b", point(8, 790)), weights=only_throughput())
    assert "rack_power_budget" in broken(
        p, unchecked(p, backend, formulation.add_rack_power_budget)
    )
    plan = solve(p, backend)
    assert not broken(p, plan)
    in_r0 = [a for a in plan.assignments if any(s.node == "n0" for s in a.placement)]
    assert all(a.config is not None and a.config.watts <= 500 for a in in_r0)


@by_backend
def test_an_unkeepable_non_preemptible_job_makes_the_model_infeasible(backend: Backend) -> None:
    # a runs in a shape (2 GPUs) its profile doesn't have: it can't be kept, nor stopped.
    c = cluster(node("n0"))
    a = job("a", point(4, 400), current=running("A100", {"n0": (0, 1)}), preemptible=False)
    p = problem(c, a, weights=only_throughput())
    outcome = solve_exact(backend, formulation.build(p, build_config_set(p)))
    assert outcome.status is SolverStatus.INFEASIBLE
    assert outcome.plan is None and outcome.best_bound is None
