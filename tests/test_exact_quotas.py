"""The queue-quota family of the full model (solver.exact.quotas): on random tiny snapshots
with random queues, every exact backend reaches the optimum that exhaustive enumeration,
written apart from the model and judged by the independent checker, finds."""

from __future__ import annotations

import dataclasses
import random

import pytest

from solver.domain import POWER, Backend, Problem, Quota, TenantQueue
from solver.exact import formulation
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.search.bound import solve_aggregate
from tests.bruteforce import assert_reaches, optimum_of, solve_exact
from tests.factories import random_tiny
from tests.test_formulation import _same_model


def with_random_queues(seed: int) -> Problem:
    """random_tiny(seed), its jobs spread over two or three queues with random quotas."""
    rnd = random.Random(1000 + seed)
    p = random_tiny(seed)
    names = ["a", "b", "c"][: rnd.choice([2, 3])]
    cohort = rnd.choice(["", "x"])
    queues = []
    for name in names:
        in_cohort = cohort and rnd.random() < 0.8
        quotas = {
            "A100": Quota(
                rnd.choice([0, 2, 4]),
                rnd.choice([None, 0, 2]) if in_cohort else None,
                rnd.choice([None, 0, 2]) if in_cohort else None,
            ),
            "V100": Quota(rnd.choice([0, 2])),
        }
        if rnd.random() < 0.4:
            quotas[POWER] = Quota(rnd.choice([600.0, 1200.0]))
        queues.append(TenantQueue(name, cohort if in_cohort else "", quotas=quotas))
    jobs = tuple(dataclasses.replace(j, tenant=rnd.choice(names)) for j in p.jobs)
    return dataclasses.replace(
        p, cluster=dataclasses.replace(p.cluster, queues=tuple(queues)), jobs=jobs
    )


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("backend", [Backend.CPSAT, Backend.HIGHS])
def test_the_exact_models_optimum_is_the_enumerated_one(seed: int, backend: Backend) -> None:
    p, configs, best = optimum_of(with_random_queues, seed)
    assert_reaches(backend, p, configs, best)


def test_the_quotas_bind_in_these_snapshots() -> None:
    """The family matters here: without it, most optima break a quota."""
    broken = 0
    for seed in range(8):
        p = with_random_queues(seed)
        configs = build_config_set(p)
        families = tuple(
            fam
            for fam in formulation.CONSTRAINT_FAMILIES
            if fam is not formulation.add_queue_quotas
        )
        r = solve_exact(Backend.HIGHS, formulation.build(p, configs, families))
        if r.plan is not None and check_plan(p, r.plan.assignments):
            broken += 1
    assert broken >= 3


@pytest.mark.parametrize("seed", range(8))
def test_the_aggregated_bound_with_quotas_is_valid_and_tighter(seed: int) -> None:
    """The aggregated LP's quota rows (solver.search.bound): its bound stays above the
    enumerated optimum and below the bound without queues."""
    p, configs, best = optimum_of(with_random_queues, seed)
    bound = solve_aggregate(p, configs).best_bound
    free = dataclasses.replace(p, cluster=dataclasses.replace(p.cluster, queues=()))
    loose = solve_aggregate(free, configs).best_bound
    assert loose is not None
    if bound is None:  # the LP proved it infeasible: so is every plan
        assert best == float("-inf")
        return
    assert bound >= best - 1e-9
    assert bound <= loose + 1e-9


def test_the_quota_rows_tighten_the_aggregated_bound_somewhere() -> None:
    tighter = 0
    for seed in range(8):
        p = with_random_queues(seed)
        configs = build_config_set(p)
        bound = solve_aggregate(p, configs).best_bound
        free = dataclasses.replace(p, cluster=dataclasses.replace(p.cluster, queues=()))
        loose = solve_aggregate(free, configs).best_bound
        assert loose is not None
        tighter += bound is None or bound < loose - 1e-6
    assert tighter >= 3


@pytest.mark.parametrize("seed", range(8))
def test_the_family_is_the_reference_models(seed: int) -> None:
    """Row for row the plain reference family (tests/reference_quotas.py)."""
    p = with_random_queues(seed)
    _same_model(p, build_config_set(p))
