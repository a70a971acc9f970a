"""The CP-SAT translation of the formulation: integer model, indicators as enforcement
literals, and an integer-scaled objective whose rounding error is added to the bound.

The constraint families themselves are tested on every backend in test_backends_families.py.
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from ortools.sat.python import cp_model

from solver.domain import Backend, ObjectiveWeights
from solver.exact import formulation
from solver.exact.backends import ExactOptions, SolverStatus
from solver.exact.backends.cpsat import SCALE, CpSatModel
from solver.exact.milp import Formulation
from solver.exact.solve import solve_full
from solver.perfmodel.configs import build_config_set
from tests.factories import cluster, job, node, point, problem, running
from tests.test_process import _problem


def _formulation(budget: float | None = None) -> Formulation:
    p = problem(
        cluster(node("n0"), node("n1", rack="r1"), power=budget),
        job("a", point(8, 800, tp=2)),
        job("b", point(4, 500), current=running("A100", {"n0": (0, 1, 2, 3)})),
    )
    return formulation.build(p, build_config_set(p))


def test_the_translation_keeps_every_variable_and_row() -> None:
    f = _formulation()
    m = CpSatModel(f, names=True)
    proto = m.model.proto
    assert len(proto.variables) == f.num_variables
    assert len(proto.constraints) == len(f.constraints)
    for var, v in zip(f.variables, proto.variables, strict=True):
        assert list(v.domain) == [int(var.lb), int(var.ub)]
        assert v.name == var.name
    enforced = [c for c in f.constraints if c.enforce is not None]
    assert enforced, "the instance has indicator constraints (tensor groups, keep)"
    for c, ct in zip(f.constraints, proto.constraints, strict=True):
        assert ct.name == c.name
        assert len(ct.enforcement_literal) == (c.enforce is not None)


def test_the_objective_is_scaled_to_integers() -> None:
    f = _formulation()
    m = CpSatModel(f)
    scaled = dict(zip(m.model.proto.objective.vars, m.model.proto.objective.coeffs, strict=True))
    for v, c in f.objective:
        if round(c * SCALE):
            assert scaled[v] in (round(c * SCALE), -round(c * SCALE))  # maximised: CP-SAT negates
    assert 0 <= m.rounding_slack < 1e-4


@pytest.mark.parametrize("budget", [None, 2000.0])
def test_bound_is_at_least_the_objective(budget: float | None) -> None:
    f = _formulation(budget)
    outcome = solve_full(f, Backend.CPSAT, options=ExactOptions(time_limit=20, threads=1))
    assert outcome.status is SolverStatus.OPTIMAL
    assert outcome.plan is not None and outcome.best_bound is not None
    assert outcome.best_bound >= outcome.plan.objective.total
    assert outcome.best_bound - outcome.plan.objective.total < 1e-4


def test_the_same_seed_gives_the_same_plan() -> None:
    f = _formulation(2000.0)
    options = ExactOptions(time_limit=20, threads=2, seed=7, time_budget=10.0)
    first = solve_full(f, Backend.CPSAT, options=options)
    second = solve_full(f, Backend.CPSAT, options=options)
    assert first.plan == second.plan


def test_continuous_variables_are_refused() -> None:
    f = _formulation()
    f.add_var("s[extra]", 0.0, 1.5, integer=False)
    with pytest.raises(ValueError, match="integer variables only: s\\[extra\\]"):
        CpSatModel(f)


def _through_cp_model(f: Formulation) -> cp_model.CpModel:
    """The formulation translated one object at a time through CpModel's own API (as the
    backend did before it wrote the proto directly)."""
    m = cp_model.CpModel()
    xs = [
        m.new_bool_var(v.name)
        if v.binary and v.lb == 0
        else m.new_int_var(int(v.lb), int(v.ub), v.name)
        for v in f.variables
    ]

    def bound(b: float) -> int:
        return cp_model.INT_MAX if b == math.inf else cp_model.INT_MIN if b == -math.inf else int(b)

    for c in f.constraints:
        expr = cp_model.LinearExpr.weighted_sum(
            [xs[v] for v, _ in c.terms], [k for _, k in c.terms]
        )
        ct = m.add_linear_constraint(expr, bound(c.lo), bound(c.hi)).with_name(c.name)
        if c.enforce is not None:
            ct.only_enforce_if(xs[c.enforce])
    coefs = [(v, round(k * SCALE)) for v, k in f.objective if round(k * SCALE)]
    m.maximize(cp_model.LinearExpr.weighted_sum([xs[v] for v, _ in coefs], [k for _, k in coefs]))
    return m


@pytest.mark.parametrize("budget", [None, 2000.0])
def test_the_proto_is_the_one_cp_model_writes(budget: float | None) -> None:
    f = _formulation(budget)
    assert str(CpSatModel(f, names=True).model.proto) == str(_through_cp_model(f).proto)


def test_locality_rounding_error_is_bounded() -> None:
    # A locality weight that is not a multiple of 1/SCALE: every z and r coefficient rounds.
    p = problem(
        cluster(node("n0"), node("n1", rack="r1")),
        job("a", point(4, 400)),
        weights=ObjectiveWeights(1.0, 0.1, 0.05, 0.0123456789, 0.5),
    )
    f = formulation.build(p, build_config_set(p))
    m = CpSatModel(f)
    error = abs(round(0.0123456789 * SCALE) - 0.0123456789 * SCALE) / SCALE
    gpus = 16
    assert m.rounding_slack >= error * 2 * gpus
    outcome = solve_full(f, Backend.CPSAT, options=ExactOptions(time_limit=20, threads=1))
    assert outcome.plan is not None and outcome.best_bound is not None
    assert outcome.best_bound >= outcome.plan.objective.total


def test_a_stop_request_interrupts_the_search() -> None:
    """CP-SAT has no interrupt callback: a watcher stops it once the caller gives up."""
    p = _problem(jobs=60, nodes=30)  # CP-SAT runs to its limit on this one
    model = formulation.build(p, build_config_set(p))
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    out = solve_full(
        model, Backend.CPSAT, options=ExactOptions(time_limit=60.0, threads=1, stop=stop.is_set)
    )
    assert time.monotonic() - started < 30.0  # not the 60 s limit
    assert out.status is not SolverStatus.OPTIMAL
