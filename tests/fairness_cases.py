"""Fairness problems shared by the tests of F (tests/test_fairness.py) and of the aggregated
model's fairness rows (tests/test_bound_fairness.py)."""

from __future__ import annotations

import dataclasses
import random

from solver.domain import (
    AttainedService,
    Fairness,
    FairnessMode,
    FairnessScope,
    Problem,
    TenantQueue,
)
from solver.perfmodel.configs import ConfigSet
from tests.bruteforce import enumerated
from tests.factories import A100, V100, cluster, job, node, point, problem


def fair(seed: int, mode: FairnessMode, scope: FairnessScope) -> tuple[Problem, ConfigSet]:
    """enumerated(seed) with a fairness policy, two tenants, attained service and ages."""
    p, configs, _ = enumerated(seed)
    rnd = random.Random(seed)
    jobs = tuple(
        dataclasses.replace(
            j,
            tenant="ab"[k % 2],
            attained=AttainedService(rnd.uniform(0, 900), rnd.uniform(0, 600)),
            age_seconds=rnd.uniform(0, 3000),
            remaining_samples=j.remaining_samples or 2e4,
        )
        for k, j in enumerate(p.jobs)
    )
    queues = (TenantQueue("a", weight=2.0, attained=AttainedService(300.0, 200.0)),)
    p = dataclasses.replace(
        p,
        cluster=dataclasses.replace(p.cluster, queues=queues) if seed % 2 else p.cluster,
        jobs=jobs,
        fairness=Fairness(mode, scope, horizon_seconds=rnd.choice([120.0, 300.0])),
        weights=dataclasses.replace(p.weights, fairness=rnd.choice([0.5, 2.0])),
    )
    if mode is not FairnessMode.PROPORTIONAL:  # seeds 1 and 2 count every entity too
        mean = [0.0, 0.5, 3.0][seed % 3]
        p = dataclasses.replace(p, fairness=dataclasses.replace(p.fairness, mean_weight=mean))
    return p, configs


def two_types_two_tenants() -> Problem:
    """Four A100s, four V100s. Tenant x has two jobs that run only on A100s and two only on
    V100s (weights 1 and 0.5); tenant y six jobs of weight 3 that run on either. x's fair
    share is two GPUs of one type (DRF's dominant share, 1/2 of a type); one job per type is
    a dominant share of 1/4."""
    c = cluster(node("a", count=4), node("v", V100, count=4))
    x = [
        dataclasses.replace(
            job(f"x{t}{k}", point(1, 100.0, gpu=gpu), max_gpus=1, weight=w), tenant="x"
        )
        for t, gpu in (("a", A100), ("v", V100))
        for k, w in ((1, 1.0), (2, 0.5))
    ]
    both = (point(1, 100.0), point(1, 100.0, gpu=V100))
    y = [
        dataclasses.replace(job(f"y{k}", *both, max_gpus=1, weight=3.0), tenant="y")
        for k in range(6)
    ]
    p = dataclasses.replace(
        problem(c, *x, *y), fairness=Fairness(FairnessMode.DRF, FairnessScope.TENANT)
    )
    return dataclasses.replace(p, weights=dataclasses.replace(p.weights, fairness=2.0))
