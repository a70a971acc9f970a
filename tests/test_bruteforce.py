"""Every exact backend's optimum equals exhaustive enumeration on tiny instances."""

from __future__ import annotations

import pytest

from solver.domain import Backend
from solver.exact import formulation
from solver.exact.backends import SolverStatus
from tests.bruteforce import EXACT_BACKENDS, enumerated, solve_exact


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
