"""The exact backends against each other and the truth: the same optimum on random tiny and
bundled instances, bounds and gaps never below the true ones when a solve is cut short (and
HiGHS's documented margin), and warm starts from the heuristic's plan."""

from __future__ import annotations

import math

import pytest

from solver.domain import Backend, Problem
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus
from solver.exact.solve import ExactResult, solve_full
from solver.perfmodel.configs import ConfigSet
from solver.scoring.checker import check_plan
from solver.search.heuristic import Heuristic
from tests.backend_helpers import _instance, by_backend
from tests.bruteforce import EXACT_BACKENDS, enumerated, solve_exact


def _agree(p: Problem, configs: ConfigSet, time_limit: float) -> dict[Backend, ExactResult]:
    f = formulation.build(p, configs)
    outcomes = {b: solve_exact(b, f, time_limit) for b in EXACT_BACKENDS}
    for b, o in outcomes.items():
        assert o.status is SolverStatus.OPTIMAL, f"{b.value}: {o.detail}"
        assert o.plan is not None and not check_plan(p, o.plan.assignments)
    objectives = [o.plan.objective.total for o in outcomes.values() if o.plan is not None]
    for value in objectives:
        assert value == pytest.approx(objectives[0], rel=1e-6, abs=1e-9)
    for o in outcomes.values():
        assert o.best_bound is not None and o.best_bound >= objectives[0] - 1e-9
    return outcomes


@pytest.mark.parametrize("seed", range(6))
def test_backends_agree_on_random_tiny_instances(seed: int) -> None:
    p, configs, expected = enumerated(seed)
    if expected == float("-inf"):  # no valid plan: every backend must prove it
        f = formulation.build(p, configs)
        for b in EXACT_BACKENDS:
            assert solve_exact(b, f, 30.0).status is SolverStatus.INFEASIBLE, b.value
        return
    outcomes = _agree(p, configs, 30.0)
    plan = outcomes[Backend.CPSAT].plan
    assert plan is not None and plan.objective.total == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", ["tiny-1node", "tiny-power", "tiny-migration", "small"])
def test_backends_agree_on_the_bundled_instances(name: str) -> None:
    # small: CP-SAT and HiGHS each prove it in ~0.2 s (Pyomo ~0.5 s, model building included).
    _agree(*_instance(name), time_limit=60.0)


# ---------------------------------------------------------------- bounds


@by_backend
def test_a_bound_under_a_tiny_time_limit_is_above_the_exact_optimum(backend: Backend) -> None:
    # The exact optimum of small, proven by every backend above (and recomputed here).
    p, configs = _instance("small")
    f = formulation.build(p, configs)
    exact = solve_exact(Backend.HIGHS, f, 60.0)
    assert exact.status is SolverStatus.OPTIMAL and exact.plan is not None
    optimum = exact.plan.objective.total
    # Whatever a short limit stops at on this machine (nothing, a plan, a plan and a bound),
    # a bound is never below the optimum, and the reported gap never below the true one.
    for time_limit in (0.02, 0.06, 0.12):
        quick = solve_full(
            f, backend, hint=None, options=ExactOptions(time_limit=time_limit, threads=1)
        )
        assert quick.status is not SolverStatus.ERROR, quick.detail
        if quick.best_bound is not None:
            assert quick.best_bound >= optimum - 1e-9
        if quick.plan is not None:
            assert not check_plan(p, quick.plan.assignments)
            assert quick.plan.objective.total <= optimum + 1e-9
            if quick.best_bound is not None:
                reported = quick.best_bound - quick.plan.objective.total
                assert reported >= optimum - quick.plan.objective.total - 1e-9
    # A proven bound is never much above the optimum when the solve finishes.
    assert exact.best_bound is not None
    assert exact.best_bound - optimum <= 1e-6 * max(1.0, abs(optimum))


def test_cpsat_stopped_early_reports_a_gap_at_least_the_true_gap() -> None:
    # CP-SAT cut by deterministic time (machine-independent, one worker): a feasible plan and a
    # bound short of optimality; the exact optimum comes from the long solves above.
    p, configs = _instance("small")
    f = formulation.build(p, configs)
    optimum = solve_exact(Backend.HIGHS, f, 60.0)
    assert optimum.plan is not None
    best = optimum.plan.objective.total
    for limit in (0.02, 0.03):
        o = solve_full(
            f,
            Backend.CPSAT,
            hint=None,
            options=ExactOptions(time_limit=10, threads=1, time_budget=2 * limit),
        )
        assert o.status is SolverStatus.FEASIBLE and o.plan is not None, o.detail
        assert o.best_bound is not None
        reported_gap = (o.best_bound - o.plan.objective.total) / abs(o.plan.objective.total)
        true_gap = (best - o.plan.objective.total) / abs(o.plan.objective.total)
        assert reported_gap >= true_gap > 0
        assert o.best_bound >= best


def test_the_highs_bound_carries_the_documented_margin() -> None:
    p, configs = _instance("tiny-1node")
    o = solve_exact(Backend.HIGHS, formulation.build(p, configs))
    assert o.plan is not None and o.best_bound is not None
    margin = o.best_bound - o.plan.objective.total
    assert 0 < margin <= 2e-7 * max(1.0, abs(o.plan.objective.total))
    assert math.isfinite(o.best_bound)


# ---------------------------------------------------------------- warm start


def test_highs_warm_started_with_the_heuristic_plan_does_at_least_as_well() -> None:
    p, configs = _instance("small")
    heuristic = Heuristic(p, configs).run(0.0)
    assert not check_plan(p, heuristic.assignments)
    f = formulation.build(p, configs)
    hint = formulation.hint(f, heuristic)
    # A tiny limit: HiGHS may stop before finding anything of its own; the hint is its start.
    for time_limit in (0.02, 5.0):
        o = solve_full(
            f, Backend.HIGHS, hint=hint, options=ExactOptions(time_limit=time_limit, threads=1)
        )
        assert o.plan is not None, o.detail
        assert o.plan.objective.total >= heuristic.objective.total - 1e-9
        assert not check_plan(p, o.plan.assignments)


@by_backend
def test_a_hint_is_accepted_by_every_backend(backend: Backend) -> None:
    p, configs = _instance("tiny-migration")
    heuristic = Heuristic(p, configs).run(0.0)
    f = formulation.build(p, configs)
    o = solve_full(
        f,
        backend,
        hint=formulation.hint(f, heuristic),
        options=ExactOptions(time_limit=10, threads=1),
    )
    assert o.status is SolverStatus.OPTIMAL and o.plan is not None
    assert o.plan.objective.total >= heuristic.objective.total - 1e-9
