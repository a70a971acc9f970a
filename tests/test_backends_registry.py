"""The exact backends' registry and shared outcome (solver.exact.backends, base): which
backends exist and registering one, Pyomo's solvers, HiGHS's thread pool, a model without
variables, and one consistent outcome and plan extraction whatever a solver says."""

from __future__ import annotations

import time

import pytest

from solver.domain import Backend, JobState
from solver.exact import formulation
from solver.exact.backends import (
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    exact_backends,
    get_backend,
    outcome,
    register_backend,
)
from solver.exact.backends.highs import stop_at
from solver.exact.backends.pyomo_backend import KNOWN_SOLVERS, available_solvers
from solver.exact.milp import Formulation
from solver.exact.solve import plan_of, solve_full
from solver.perfmodel.configs import build_config_set
from tests.backend_helpers import _instance, by_backend
from tests.bruteforce import solve_exact
from tests.factories import V100, cluster, job, node, point, problem


def test_the_registry_knows_the_exact_backends() -> None:
    assert set(exact_backends()) >= {Backend.CPSAT, Backend.HIGHS, Backend.PYOMO}
    assert get_backend(Backend.CPSAT).name == "CP-SAT"
    assert get_backend(Backend.HIGHS).name == "HiGHS"
    assert get_backend(Backend.PYOMO).name.startswith("Pyomo/")
    with pytest.raises(ValueError, match="not an exact backend"):
        get_backend(Backend.HEURISTIC)


def test_a_registered_backend_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stub:
        name = "stub"

        def solve(
            self,
            formulation: Formulation,
            *,
            hint: object = None,
            options: ExactOptions = ExactOptions(),  # noqa: B008
        ) -> ExactOutcome:
            return ExactOutcome(SolverStatus.NO_SOLUTION, None, None, 0.0, "stub")

    from solver.exact import backends

    monkeypatch.setattr(backends, "_registry", {})
    register_backend(Backend.HIGHS, Stub)
    assert get_backend(Backend.HIGHS).name == "stub"


def test_available_solvers_probes_the_known_list_without_raising() -> None:
    found = available_solvers()
    assert "appsi_highs" in found
    assert set(found) <= set(KNOWN_SOLVERS)


def test_an_unavailable_pyomo_solver_is_an_error_outcome() -> None:
    p, configs = _instance("tiny-1node")
    missing = "no_such_solver"  # a name Pyomo has no plugin for
    o = solve_full(
        formulation.build(p, configs),
        Backend.PYOMO,
        hint=None,
        options=ExactOptions(solver_name=missing),
    )
    assert o.status is SolverStatus.ERROR
    assert missing in o.detail and "not available" in o.detail


def test_highs_solves_whatever_thread_count_its_pool_was_made_with() -> None:
    # HiGHS sizes one process-wide thread pool on its first solve and refuses other sizes
    # later; the backend then runs on the pool as it is.
    p, configs = _instance("tiny-power")
    f = formulation.build(p, configs)
    outcomes = [
        solve_full(f, Backend.HIGHS, options=ExactOptions(time_limit=10, threads=t))
        for t in (1, 2, 3)
    ]
    assert all(o.status is SolverStatus.OPTIMAL for o in outcomes)
    assert any("existing thread pool" in o.detail for o in outcomes)


@by_backend
def test_a_model_without_variables_is_solved(backend: Backend) -> None:
    # No job has a configuration (V100 profile on an A100 cluster): the objective is a constant.
    p = problem(cluster(node("n0")), job("a", point(4, 100, gpu=V100)))
    f = formulation.build(p, build_config_set(p))
    assert f.num_variables == 0
    o = solve_exact(backend, f)
    assert o.status is SolverStatus.OPTIMAL and o.plan is not None
    assert o.plan.assignment("a").state is JobState.QUEUED
    assert o.best_bound is not None and o.best_bound >= o.plan.objective.total


# ---------------------------------------------------------------- one outcome, one extraction


def test_an_outcome_is_made_consistent_whatever_the_solver_said() -> None:
    limit = outcome(SolverStatus.FEASIBLE, None, 3.0, 0.1)
    assert (limit.status, limit.values, limit.best_bound) == (SolverStatus.NO_SOLUTION, None, 3.0)
    claimed = outcome(SolverStatus.OPTIMAL, None, 3.0, 0.1, "x")
    assert claimed.status is SolverStatus.ERROR and claimed.best_bound is None
    assert claimed.detail == "x; optimal without a solution"
    infeasible = outcome(SolverStatus.INFEASIBLE, (1.0,), 2.0, 0.1)
    assert infeasible.values is None and infeasible.best_bound is None


def test_values_that_are_no_plan_make_an_error_result() -> None:
    p, configs = _instance("tiny-1node")
    f = formulation.build(p, configs)
    good = solve_exact(Backend.HIGHS, f)
    assert good.values is not None and good.plan is not None
    # Every variable at 100: more GPUs on a node than it has.
    bad_values = tuple(100.0 for _ in good.values)
    bad = plan_of(f, outcome(SolverStatus.FEASIBLE, bad_values, 5.0, 0.1), "stub")
    assert bad.status is SolverStatus.ERROR and bad.plan is None and bad.best_bound is None
    assert bad.detail.startswith("stub solution unreadable")
    same = plan_of(f, outcome(SolverStatus.OPTIMAL, good.values, good.best_bound, 0.1), "stub")
    assert same.plan == good.plan


def test_pyomo_without_time_to_hand_over_its_model_returns_at_once() -> None:
    """Handing a Pyomo model to its solver is outside the solver's time limit: with no time
    left after building it, no solver is started."""
    p, configs = _instance("tiny-power")
    o = solve_full(
        formulation.build(p, configs), Backend.PYOMO, options=ExactOptions(time_limit=1e-9)
    )
    assert o.status is SolverStatus.NO_SOLUTION and o.plan is None
    assert "no time left to hand it the model" in o.detail


def test_highs_is_interrupted_at_its_time_limit_or_on_request() -> None:
    """HiGHS checks its own limit only between phases (its root ran 0.1-0.4 s past it); the
    interrupt it polls in the simplex says stop from the limit on, or on request."""
    now = time.monotonic()
    assert stop_at(now - 1.0)() is True
    assert stop_at(now + 60.0)() is False
    asked = [False]
    early = stop_at(now + 60.0, lambda: asked[0])
    assert early() is False
    asked[0] = True
    assert early() is True


def test_cpsat_without_time_after_building_its_model_does_not_search() -> None:
    """CP-SAT loads and presolves a model before it looks at its limit: with no time left
    after building it, no search starts."""
    p, configs = _instance("tiny-power")
    o = solve_full(
        formulation.build(p, configs), Backend.CPSAT, options=ExactOptions(time_limit=1e-9)
    )
    assert o.status is SolverStatus.NO_SOLUTION and o.plan is None
    assert "no time left to search" in o.detail
