"""The fairness term in the aggregated model (solver.search.bound_fairness): in every mode its
bound stays a proven bound on the whole objective and no looser than the headroom's, its rows
value a fixed choice as F does, and under DRF its choice is DRF's."""

from __future__ import annotations

import dataclasses
import random

import pytest

from solver.domain import AttainedService, Backend, Fairness, FairnessMode, FairnessScope
from solver.exact import formulation
from solver.exact.backends import SolverStatus
from solver.perfmodel.configs import build_config_set
from solver.scoring.fairness import FairnessTerms, fairness_headroom
from solver.search.array_lp import ArrayLp
from solver.search.bound import solve_aggregate
from solver.search.bound_fairness import add_drf, add_fairness, holds_fairness
from tests.bruteforce import optimum_of, solve_exact
from tests.factories import cluster, job, node, point, problem
from tests.fairness_cases import fair, two_types_two_tenants

MODES = [m for m in FairnessMode if m is not FairnessMode.WEIGHTED_SUM]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scope", list(FairnessScope))
@pytest.mark.parametrize("seed", range(3))
def test_the_bound_with_fairness_held_is_above_the_optimum_and_within_the_headroom(
    mode: FairnessMode, scope: FairnessScope, seed: int
) -> None:
    p, configs, optimum = optimum_of(fair, seed, mode, scope)
    headroom = fairness_headroom(p, configs.by_job, configs.best_samples_per_second)
    for integer in (False, True):  # the LP, and the MIP
        without = solve_aggregate(p, configs, integer=integer)
        assert not without.with_fairness and without.best_bound is not None
        held = solve_aggregate(p, configs, integer=integer, fairness=True)
        assert held.with_fairness and held.best_bound is not None
        assert held.best_bound >= optimum - 1e-9
        # each bound carries its relative safety margin (solver.search.bound)
        assert held.best_bound <= (without.best_bound + headroom) * (1 + 1e-6) + 1e-9


def test_the_choice_with_drf_held_gives_the_tenant_its_share_on_one_type() -> None:
    p = two_types_two_tenants()
    configs = build_config_set(p)
    exact = solve_exact(Backend.HIGHS, formulation.build(p, configs))
    assert exact.status is SolverStatus.OPTIMAL and exact.plan is not None
    optimum = exact.plan.objective.total
    without = solve_aggregate(p, configs, integer=True)
    x_without = sorted(c.gpu_type for n, c in without.choice.items() if n.startswith("x"))
    assert x_without == ["A100", "V100"]  # x's heavier jobs, one per type: F = 1/2
    held = solve_aggregate(p, configs, integer=True, fairness=True)
    x_types = [c.gpu_type for n, c in held.choice.items() if n.startswith("x")]
    assert len(x_types) == 2 and len(set(x_types)) == 1
    terms = FairnessTerms(p, configs.best_samples_per_second)
    assert terms.value(held.choice) == pytest.approx(1.0)
    # one-GPU jobs on four-GPU nodes: placing loses nothing, so the bound is the optimum
    assert held.best_bound == pytest.approx(optimum, rel=1e-6)


def test_drf_rows_cap_each_tenant_at_its_picked_resource_and_at_one() -> None:
    """The rows alone, on columns fixed to a choice: the LP's optimum is weight x F of it."""
    p = two_types_two_tenants()
    configs = build_config_set(p)
    terms = FairnessTerms(p, configs.best_samples_per_second)
    top = {j.name: configs.by_job[j.name] for j in p.jobs}
    for running in (["xa1", "xv1", "y0", "y1"], ["xa1", "xa2", "y0"], ["y0", "y1", "y2"]):
        lp = ArrayLp()
        columns = {}
        for j in p.jobs:
            on = 1.0 if j.name in running else 0.0
            fixed = [
                (i, lp.column(0.0, 0.0, on if i == 0 else 0.0)) for i in range(len(top[j.name]))
            ]
            columns[j.name] = fixed
            if on:
                lp.row([(fixed[0][1], 1.0)], lo=1.0)
        picks = add_drf(lp, terms, top, columns)
        chosen = {n: top[n][0] for n in running}
        expected = p.weights.fairness * terms.value(chosen)
        _, objective, _ = lp.solve(picks)
        assert objective == pytest.approx(expected, abs=1e-5), running  # HiGHS tolerances


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scope", list(FairnessScope))
@pytest.mark.parametrize("seed", range(3))
def test_the_rows_value_a_fixed_choice_as_f_does(
    mode: FairnessMode, scope: FairnessScope, seed: int
) -> None:
    """The rows alone, on columns fixed to choices: the LP's optimum plus the constant is
    weight x F of the choice; under a sum of logs by tenant at most the tangents' overrating
    above it."""
    p, configs = fair(seed, mode, scope)
    terms = FairnessTerms(p, configs.best_samples_per_second)
    rnd = random.Random(seed)
    for _ in range(4):
        lp = ArrayLp()
        columns, chosen = {}, {}
        for j in p.jobs:
            options = configs.by_job[j.name]
            pick = rnd.randrange(len(options) + 1) - 1  # -1: queued
            columns[j.name] = [
                (i, lp.column(0.0, *((1.0, 1.0) if i == pick else (0.0, 0.0))))
                for i in range(len(options))
            ]
            if pick >= 0:
                chosen[j.name] = options[pick]
        picks, constant = add_fairness(lp, terms, configs.by_job, columns)
        expected = p.weights.fairness * terms.value(chosen)
        _, objective, _ = lp.solve(picks)
        assert objective is not None
        value = objective + constant
        if mode is FairnessMode.PROPORTIONAL and scope is FairnessScope.TENANT:
            assert expected - 1e-6 <= value <= expected + 0.01 * abs(expected) + 1e-6
        else:
            assert value == pytest.approx(expected, abs=1e-5), chosen


def test_every_fairness_mode_is_held() -> None:
    p = two_types_two_tenants()
    for mode in FairnessMode:
        other = dataclasses.replace(p, fairness=dataclasses.replace(p.fairness, mode=mode))
        assert holds_fairness(other) is (mode is not FairnessMode.WEIGHTED_SUM)


@pytest.mark.parametrize("mode", [FairnessMode.MAX_MIN, FairnessMode.FINISH_TIME])
def test_the_choice_with_a_least_row_held_runs_the_job_at_the_bottom(mode: FairnessMode) -> None:
    """One GPU, two jobs: `fast` weighs three times as much and has been served for long;
    `starved` waited its whole life. Throughput picks `fast`; the least row, `starved`."""
    c = cluster(node("a", count=1))
    fast = dataclasses.replace(
        job("fast", point(1, 300.0), max_gpus=1, weight=3.0),
        attained=AttainedService(9000.0, 9000.0),
        age_seconds=9000.0,
        remaining_samples=3e5,
    )
    starved = dataclasses.replace(
        job("starved", point(1, 100.0), max_gpus=1),
        age_seconds=90000.0,
        remaining_samples=3e5,
    )
    p = dataclasses.replace(problem(c, fast, starved), fairness=Fairness(mode, FairnessScope.JOB))
    p = dataclasses.replace(p, weights=dataclasses.replace(p.weights, fairness=100.0))
    configs = build_config_set(p)
    without = solve_aggregate(p, configs, integer=True)
    assert set(without.choice) == {"fast"}
    held = solve_aggregate(p, configs, integer=True, fairness=True)
    assert set(held.choice) == {"starved"}
    terms = FairnessTerms(p, configs.best_samples_per_second)
    assert terms.value(held.choice) > terms.value(without.choice)
