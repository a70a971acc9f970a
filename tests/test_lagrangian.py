"""The Lagrangian bound: valid (above the exact optimum) and as tight as the LP it dualises."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.perfmodel.configs import build_config_set
from solver.search.bound import solve_aggregate
from solver.search.lagrangian import solve_lagrangian
from tests.bruteforce import optimum_of
from tests.factories import (
    cluster,
    job,
    node,
    only_throughput,
    point,
    problem,
    random_tiny,
    running,
)
from tests.test_moves import four

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("seed", range(6))
def test_bound_is_above_the_brute_force_optimum(seed: int) -> None:
    p, configs, optimum = optimum_of(random_tiny, seed)
    bound = solve_lagrangian(p, configs, time_limit=5).best_bound
    if optimum != float("-inf"):
        assert bound >= optimum - 1e-9


@pytest.mark.parametrize("name", ["small", "medium", "pai", "modern-power"])
def test_bound_meets_the_lp_bound(name: str) -> None:
    p = problem_from_proto(load_request_json(ROOT / "instances" / f"{name}.json"), Limits())
    configs = build_config_set(p)
    lp = solve_aggregate(p, configs).best_bound
    lagrangian = solve_lagrangian(p, configs, time_limit=10).best_bound
    assert lp is not None
    # Both bound the same relaxation; the LP adds a 1e-6 safety margin, the cuts stop at 1e-6.
    assert lagrangian == pytest.approx(lp, rel=3e-6)


def test_a_pool_shared_by_two_jobs_is_priced() -> None:
    # 8 GPUs, two jobs that each want all 8 (values 1 and 2): the relaxation may take the better
    # one whole and nothing of the other, so the bound is 2, not 3.
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), min_gpus=8),
        job("b", point(8, 900), min_gpus=8, weight=2.0),
        weights=only_throughput(),
    )
    result = solve_lagrangian(p, build_config_set(p), time_limit=5)
    assert result.best_bound == pytest.approx(2.0, rel=1e-6)


def test_non_preemptible_job_counts_even_at_a_loss() -> None:
    # "a" must keep running though it is worth less than "b", which it blocks.
    p = problem(
        cluster(node("n0", count=4)),
        job("a", point(4, 100), current=running("A100", {"n0": (0, 1, 2, 3)}), preemptible=False),
        job("b", point(4, 1000), weight=4.0),
        weights=only_throughput(),
    )
    result = solve_lagrangian(p, build_config_set(p), time_limit=5)
    assert result.best_bound == pytest.approx(1.0, rel=1e-6)


def test_prices_of_a_shared_pool_and_no_power_budget() -> None:
    # L(l) = 8 l + max(0, 1 - 8 l) + max(0, 2 - 8 l) is 2 for every l in [1/8, 2/8].
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), min_gpus=8),
        job("b", point(8, 900), min_gpus=8, weight=2.0),
        weights=only_throughput(),
    )
    result = solve_lagrangian(p, build_config_set(p), time_limit=5)
    assert 0.125 - 1e-6 <= result.prices["A100"] <= 0.25 + 1e-6
    assert result.watt_price == 0.0


def test_watt_price_of_a_binding_power_budget() -> None:
    # Two 4-GPU jobs, 1900 W over idle: the relaxation runs both between 1275 (1100 W, 0.95) and
    # 1125 (800 W, 0.85): a watt is worth 0.10 / 300.
    p = problem(
        cluster(node("n0"), power=8 * 50.0 + 1900), four("a"), four("b"), weights=only_throughput()
    )
    result = solve_lagrangian(p, build_config_set(p), time_limit=5)
    assert result.best_bound == pytest.approx(1.8, rel=1e-6)
    assert result.watt_price == pytest.approx(0.1 / 300, rel=1e-3)
    assert result.prices["A100"] == pytest.approx(0.0, abs=1e-9)
