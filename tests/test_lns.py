"""Large-neighbourhood search: the sub-problem it solves, the merge, and that it improves."""

from __future__ import annotations

import dataclasses
import time

import pytest

from solver.core.settings import SolverSettings
from solver.domain import JobState, Plan, Problem
from solver.exact import lns
from solver.exact.lns import Lns, Neighbourhood, merge, sub_problem
from solver.perfmodel import budgets
from solver.perfmodel.configs import build_config_set
from solver.power_states import NodePower, NodePowerState, PowerSaving
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.heuristic import Heuristic
from tests.bruteforce import brute_force, optimum_of
from tests.factories import (
    cluster,
    job,
    node,
    only_throughput,
    point,
    problem,
    random_tiny,
    solve,
)


def _two_node_problem(power: float | None = None) -> Problem:
    return problem(
        cluster(node("n0", rack="r0"), node("n1", rack="r1"), power=power),
        job("a", point(4, 400, watts=1200), point(8, 700, watts=2400)),
        job("b", point(4, 300, watts=1200), point(8, 500, watts=2400)),
        job("c", point(2, 100, watts=600), point(4, 180, watts=1200)),
        weights=only_throughput(),
    )


def _plan(p: Problem, picks: dict[str, tuple[int, dict[str, int]]]) -> Plan:
    configs = build_config_set(p)
    choices = {
        name: (next(c for c in configs.by_job[name] if c.num_gpus == g), counts)
        for name, (g, counts) in picks.items()
    }
    return materialize(p, configs, choices)


def test_sub_problem_takes_away_the_fixed_jobs_gpus_and_power() -> None:
    p = _two_node_problem(power=4000.0)
    configs = build_config_set(p)
    incumbent = _plan(p, {"a": (4, {"n0": 4}), "b": (4, {"n1": 4})})
    sub, sub_configs = sub_problem(p, configs, incumbent, {"b", "c"})
    assert [j.name for j in sub.jobs] == ["b", "c"]
    assert set(sub_configs.by_job) == {"b", "c"}
    assert sub.cluster.node("n0").available_gpus == 4  # a keeps four of n0's eight
    assert sub.cluster.node("n1").available_gpus == 8  # b is free: its GPUs are too
    a = incumbent.assignment("a").config
    assert a is not None
    idle = p.cluster.gpu_types["A100"].idle_watts
    assert sub.cluster.power_budget_watts == pytest.approx(4000.0 - (a.watts - 4 * idle))
    # The energy term keeps the whole cluster's denominator.
    assert sub.cluster.max_gpu_watts() == p.cluster.max_gpu_watts()


def test_merge_replaces_only_the_free_jobs() -> None:
    p = _two_node_problem()
    configs = build_config_set(p)
    incumbent = _plan(p, {"a": (4, {"n0": 4}), "b": (4, {"n1": 4})})
    sub, _ = sub_problem(p, configs, incumbent, {"b", "c"})
    sub_plan = _plan(sub, {"b": (8, {"n1": 8}), "c": (4, {"n0": 4})})
    merged = merge(p, configs, incumbent, {"b", "c"}, sub_plan)
    assert check_plan(p, merged.assignments) == []
    assert merged.assignment("a").gpus_per_node() == {"n0": 4}
    assert merged.assignment("b").gpus_per_node() == {"n1": 8}
    assert merged.assignment("c").gpus_per_node() == {"n0": 4}
    assert merged.objective.total > incumbent.objective.total


def test_lns_reaches_the_optimum_from_an_empty_plan() -> None:
    p = _two_node_problem(power=5000.0)
    configs = build_config_set(p)
    empty = materialize(p, configs, {})
    search = Lns(p, configs, empty)
    best = search.run(time.monotonic() + 10.0)
    assert check_plan(p, best.assignments) == []
    assert best.objective.total == pytest.approx(brute_force(p, build_config_set(p)), abs=1e-6)
    # Every job fits one neighbourhood: solved to optimality once, the search stops early.
    assert search.exhausted
    assert search.stats.improvements >= 1


@pytest.mark.parametrize("seed", range(6))
def test_lns_plans_pass_the_checker_and_never_get_worse(seed: int) -> None:
    p, configs, optimum = optimum_of(random_tiny, seed)
    start = materialize(p, configs, {})
    if check_plan(p, start.assignments):  # a job may not be preempted: start where it runs
        start = Heuristic(p, configs).run(time.monotonic() + 1.0)
    if optimum == float("-inf"):  # its running shape is over the budget at every clock
        assert check_plan(p, start.assignments)
        return
    seen: list[float] = [start.objective.total]

    def check(plan: Plan) -> None:
        assert check_plan(p, plan.assignments) == []
        assert plan.objective.total > seen[-1]
        seen.append(plan.objective.total)

    Lns(p, configs, start).run(time.monotonic() + 3.0, on_improve=check)
    assert seen[-1] <= optimum + 1e-6


def test_a_neighbourhood_without_gain_keeps_the_incumbent() -> None:
    p = _two_node_problem()
    configs = build_config_set(p)
    optimum = solve(p).plan
    search = Lns(p, configs, optimum)
    search.neighbourhood = lambda: Neighbourhood("random", frozenset({"a", "b"}))  # type: ignore[method-assign]
    assert not search.step(time.monotonic() + 5.0)
    assert search.best is optimum


def test_neighbourhoods_hold_running_and_waiting_jobs() -> None:
    p = _two_node_problem()
    configs = build_config_set(p)
    incumbent = _plan(p, {"a": (8, {"n0": 8})})
    search = Lns(p, configs, incumbent)
    for _ in range(20):
        hood = search.neighbourhood()
        assert hood.kind in lns.KINDS and hood.kind != "power"  # no budget: never priced
        assert hood.jobs <= {"a", "b", "c"}


def test_auto_searches_by_lns_when_the_full_model_is_too_large() -> None:
    p = dataclasses.replace(_two_node_problem(power=5000.0))
    # The margin off: the brute force knows the budget only.
    r = solve(p, settings=SolverSettings(full_model_max_variables=0, power_margin_z=0.0))
    assert "full model skipped" in r.stats.detail and "LNS" in r.stats.detail
    assert check_plan(p, r.plan.assignments) == []
    assert r.plan.objective.total == pytest.approx(brute_force(p, build_config_set(p)), abs=1e-6)
    assert sum(a.state is JobState.RUNNING for a in r.plan.assignments) >= 2


def test_sub_problem_keeps_the_power_saving_policy_and_the_floors() -> None:
    """A suspended node's floor is the policy's suspended_node_watts (80 W here), in the sub
    problem as in the whole (before, the sub problem lost the policy and counted 0 W)."""
    p = _two_node_problem(power=4000.0)
    asleep = dataclasses.replace(p.cluster.nodes[1], power=NodePower(NodePowerState.SUSPENDED))
    policy = PowerSaving(enabled=True, suspended_node_watts=80.0)
    c = dataclasses.replace(p.cluster, nodes=(p.cluster.nodes[0], asleep), power_saving=policy)
    p = dataclasses.replace(p, cluster=c)
    configs = build_config_set(p)
    incumbent = _plan(p, {"a": (4, {"n0": 4})})
    sub, _ = sub_problem(p, configs, incumbent, {"b", "c"})
    assert sub.cluster.power_saving == policy
    assert budgets.rack_floor_watts(sub.cluster) == budgets.rack_floor_watts(p.cluster)
    assert budgets.rack_floor_watts(sub.cluster)["r1"] == 80.0
