"""Exact solves and exhaustive enumeration of tiny problems, shared by the solver's tests.

Kept apart from ``tests/factories.py`` because importing it loads the exact backends and probes
Pyomo's solvers (about half a second); the service and validation tests need neither.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from solver.domain import Backend, Config, Node, Problem
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus
from solver.exact.backends.pyomo_backend import available_solvers
from solver.exact.solve import ExactResult, solve_full
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.plans import Choice, materialize
from tests.factories import random_tiny

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


def assert_reaches(backend: Backend, p: Problem, configs: ConfigSet, best: float) -> None:
    """The full model on `backend` proves INFEASIBLE where enumeration found no valid plan,
    else OPTIMAL with a plan the checker passes, worth `best`."""
    r = solve_exact(backend, formulation.build(p, configs))
    if best == float("-inf"):
        assert r.status is SolverStatus.INFEASIBLE
        return
    assert r.status is SolverStatus.OPTIMAL and r.plan is not None
    assert check_plan(p, r.plan.assignments) == []
    assert r.plan.objective.total == pytest.approx(best, abs=1e-6)


def placements(config: Config, nodes: list[Node]) -> Iterator[dict[str, int]]:
    """Every split of the configuration's GPUs over nodes of its type, in whole tensor groups."""
    usable = [n for n in nodes if n.gpu_type == config.gpu_type]
    tp = config.shape.tensor_parallel
    ranges = [range(0, n.available_gpus // tp + 1) for n in usable]
    for groups in itertools.product(*ranges):
        if sum(groups) * tp == config.num_gpus:
            yield {n.name: g * tp for n, g in zip(usable, groups, strict=True) if g}


def brute_force(p: Problem, configs: ConfigSet) -> float:
    """The best objective over every valid plan (``-inf`` when none is valid)."""
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
        # Only a plan worth more than the best so far can change it: the checker, most of the
        # time, runs on those alone.
        if plan.objective.total > best and not check_plan(p, plan.assignments):
            best = plan.objective.total
    return best


@functools.cache
def optimum_of(
    make: Callable[..., Problem | tuple[Problem, ConfigSet]], *key: Any
) -> tuple[Problem, ConfigSet, float]:
    """`make(*key)`'s problem, its configurations (``build_config_set``'s unless `make` gives
    them) and its brute-force optimum, enumerated once a session: the tests that compare
    several backends or bounds with one optimum share it."""
    made = make(*key)
    p, configs = made if isinstance(made, tuple) else (made, build_config_set(made))
    return p, configs, brute_force(p, configs)


def enumerated(seed: int) -> tuple[Problem, ConfigSet, float]:
    """A random tiny instance, its configurations and its brute-force optimum."""
    return optimum_of(_tiny_at_two_clocks, seed)


def _tiny_at_two_clocks(seed: int) -> tuple[Problem, ConfigSet]:
    """A random tiny instance with the top and lowest offered clocks only (a small enumeration)."""
    p = random_tiny(seed)
    full = build_config_set(p)
    by_job = {
        j: tuple(c for c in cs if c.sm_clock_mhz in (1410, 990, 1380, 960))
        for j, cs in full.by_job.items()
    }
    return p, ConfigSet(by_job, full.best_samples_per_second, full.num_enumerated)


def assert_models_meet_the_enumerated_optimum(p: Problem, configs: ConfigSet) -> float:
    """The full model on HiGHS reaches the optimum by enumeration and proves a bound above it,
    as do the aggregated LP and MIP and the Lagrangian dual; the optimum (-inf: infeasible)."""
    from solver.exact.backends import SolverStatus
    from solver.search.bound import solve_aggregate
    from solver.search.lagrangian import solve_lagrangian

    optimum = brute_force(p, configs)
    exact = solve_exact(Backend.HIGHS, formulation.build(p, configs))
    if optimum == float("-inf"):
        assert exact.status is SolverStatus.INFEASIBLE
        return optimum
    assert exact.plan is not None
    assert abs(exact.plan.objective.total - optimum) <= 1e-6
    assert exact.best_bound is not None and exact.best_bound >= optimum - 1e-9
    for integer in (False, True):
        bound = solve_aggregate(p, configs, integer=integer, time_limit=10.0).best_bound
        assert bound is not None and bound >= optimum - 1e-9, integer
    assert solve_lagrangian(p, configs, time_limit=5.0).best_bound >= optimum - 1e-9
    return optimum
