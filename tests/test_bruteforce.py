"""Every exact backend's optimum equals exhaustive enumeration on tiny instances."""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterator

import pytest

from solver.domain import Backend, Config, Node, ObjectiveWeights, Problem
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus
from solver.exact.backends.pyomo_backend import available_solvers
from solver.exact.solve import ExactResult, solve_full
from solver.model.configs import ConfigSet, build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.plans import Choice, materialize
from tests.factories import V100, cluster, job, node, point, problem, running

EXACT_BACKENDS = [Backend.CPSAT, Backend.HIGHS] + (
    [Backend.PYOMO] if "appsi_highs" in available_solvers() else []
)
"""The exact backends installed here (Pyomo with its default solver, appsi_highs)."""


def solve_exact(
    backend: Backend, f: formulation.Formulation, time_limit: float = 30.0
) -> ExactResult:
    """Solve to proven optimality (one thread, seed 0)."""
    options = ExactOptions(time_limit=time_limit, relative_gap=0.0, seed=0, threads=1)
    return solve_full(f, backend, hint=None, options=options)


def placements(config: Config, nodes: list[Node]) -> Iterator[dict[str, int]]:
    """Every split of the configuration's GPUs over nodes of its type, in whole tensor groups."""
    usable = [n for n in nodes if n.gpu_type == config.gpu_type]
    tp = config.shape.tensor_parallel
    ranges = [range(0, n.available_gpus // tp + 1) for n in usable]
    for groups in itertools.product(*ranges):
        if sum(groups) * tp == config.num_gpus:
            yield {n.name: g * tp for n, g in zip(usable, groups, strict=True) if g}


def brute_force(p: Problem, configs: ConfigSet) -> float:
    nodes = list(p.cluster.nodes)
    options: list[list[Choice | None]] = []
    for j in p.jobs:
        opts: list[Choice | None] = [None]
        for c in configs.by_job[j.name]:
            opts.extend((c, counts) for counts in placements(c, nodes))
        options.append(opts)
    best = float("-inf")
    for combo in itertools.product(*options):
        used: dict[str, int] = {}
        for choice in combo:
            if choice is not None:
                for n, k in choice[1].items():
                    used[n] = used.get(n, 0) + k
        if any(used.get(n.name, 0) > n.available_gpus for n in nodes):
            continue
        choices = {j.name: ch for j, ch in zip(p.jobs, combo, strict=True) if ch is not None}
        plan = materialize(p, configs, choices)
        if not check_plan(p, plan.assignments):
            best = max(best, plan.objective.total)
    return best


def random_tiny(seed: int) -> Problem:
    rnd = random.Random(seed)
    nodes = [
        node("n0", count=4, rack="r0"),
        node("n1", count=4, rack="r1", unavailable=frozenset({rnd.randrange(4)})),
        node("v0", V100, count=2, rack="r1"),
    ]
    jobs = []
    for k in range(3):
        pts = [
            point(
                g,
                rnd.uniform(50, 100) * g ** rnd.uniform(0.6, 1.0),
                tp=tp,
                watts=rnd.uniform(150, 400) * g,
            )
            for g, tp in [(1, 1), (2, 1), (4, 2)]
            if rnd.random() < 0.8
        ]
        pts.append(point(2, rnd.uniform(20, 60), gpu=V100))
        current = running("A100", {"n0": (0, 1)}) if k == 0 and rnd.random() < 0.5 else None
        jobs.append(
            job(
                f"j{k}",
                *pts,
                weight=rnd.choice([1.0, 2.0]),
                max_gpus=4,
                current=current,
                preemptible=rnd.random() < 0.7,
                remaining_samples=rnd.choice([0.0, 6000.0]),
                deadline_seconds=60.0,
            )
        )
    power = rnd.choice([None, 2500.0, 3500.0])
    weights = ObjectiveWeights(1.0, rnd.choice([0.0, 0.5]), 0.2, rnd.choice([0.0, 0.05]), 0.3)
    c = cluster(*nodes, power=power, rack_power=rnd.choice([{}, {"r1": 1200.0}]))
    return problem(c, *jobs, weights=weights)


@functools.cache
def enumerated(seed: int) -> tuple[Problem, ConfigSet, float]:
    """A random tiny instance, its configurations and its brute-force optimum."""
    p = random_tiny(seed)
    # Keep the enumeration small: the top and lowest offered clocks only.
    full = build_config_set(p)
    by_job = {
        j: tuple(c for c in cs if c.sm_clock_mhz in (1410, 990, 1380, 960))
        for j, cs in full.by_job.items()
    }
    configs = ConfigSet(by_job, full.best_samples_per_second, full.num_enumerated)
    return p, configs, brute_force(p, configs)


@pytest.mark.parametrize("backend", EXACT_BACKENDS, ids=lambda b: b.value)
@pytest.mark.parametrize("seed", range(6))
def test_exact_optimum_equals_brute_force(seed: int, backend: Backend) -> None:
    p, configs, expected = enumerated(seed)
    outcome = solve_exact(backend, formulation.build(p, configs))
    if expected == float("-inf"):
        assert outcome.status is SolverStatus.INFEASIBLE
        return
    assert outcome.status is SolverStatus.OPTIMAL, outcome.detail
    assert outcome.plan is not None
    assert outcome.plan.objective.total == pytest.approx(expected, abs=1e-5)
    assert outcome.best_bound is not None and outcome.best_bound >= expected - 1e-9
