"""CP-SAT (OR-Tools) backend: the formulation as a CP-SAT model.

Variables become Boolean or integer variables, rows linear constraints, indicators
``only_enforce_if``. CP-SAT works on integers: objective coefficients are scaled by SCALE and
rounded; the formulation bounds the total rounding error, which is added to the reported bound
so that the bound stays a proven one.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from ortools.sat.python import cp_model

from solver.exact.backends import (
    DEFAULT_OPTIONS,
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    outcome,
)
from solver.exact.model import Formulation

SCALE = 1_000_000
"""Objective units per integer step."""

DETERMINISTIC_TIME_PER_SECOND = 0.5
"""CP-SAT deterministic-time units allowed per second of budget: a limit independent of
machine load, so the same request and seed give the same plan. The wall clock still caps it."""


class CpSatModel:
    """A formulation translated: the CP-SAT model and its variables by formulation index."""

    def __init__(self, formulation: Formulation) -> None:
        self.formulation = formulation
        self.model = cp_model.CpModel()
        self.vars: list[cp_model.IntVar] = []
        m = self.model
        for v in formulation.variables:
            if not v.integer:
                raise ValueError(f"CP-SAT takes integer variables only: {v.name}")
            if v.binary and v.lb == 0:
                self.vars.append(m.new_bool_var(v.name))
            else:
                self.vars.append(m.new_int_var(_int(v.lb), _int(v.ub), v.name))
        xs = self.vars
        for c in formulation.constraints:
            expr = cp_model.LinearExpr.weighted_sum(
                [xs[v] for v, _ in c.terms], [k for _, k in c.terms]
            )
            ct = m.add_linear_constraint(expr, _int(c.lo), _int(c.hi))
            ct.with_name(c.name)
            if c.enforce is not None:
                ct.only_enforce_if(xs[c.enforce])
        coefs = [(v, round(k * SCALE)) for v, k in formulation.objective]
        coefs = [(v, k) for v, k in coefs if k]
        m.maximize(
            cp_model.LinearExpr.weighted_sum([xs[v] for v, _ in coefs], [k for _, k in coefs])
        )
        self.rounding_slack = formulation.rounding_slack(SCALE)
        """Largest total error of the integer-rounded objective, in objective units."""

    def add_hint(self, hint: Mapping[int, float]) -> None:
        for v, value in hint.items():
            self.model.add_hint(self.vars[v], round(value))


def _int(bound: float) -> int:
    if bound == math.inf:
        return cp_model.INT_MAX
    if bound == -math.inf:
        return cp_model.INT_MIN
    return int(bound)


_STATUS = {
    cp_model.OPTIMAL: SolverStatus.OPTIMAL,
    cp_model.FEASIBLE: SolverStatus.FEASIBLE,
    cp_model.INFEASIBLE: SolverStatus.INFEASIBLE,
    cp_model.UNKNOWN: SolverStatus.NO_SOLUTION,
    cp_model.MODEL_INVALID: SolverStatus.ERROR,
}


class CpSatBackend:
    name = "CP-SAT"

    def solve(
        self,
        formulation: Formulation,
        *,
        hint: Mapping[int, float] | None = None,
        options: ExactOptions = DEFAULT_OPTIONS,
    ) -> ExactOutcome:
        start = time.monotonic()
        m = CpSatModel(formulation)
        if hint:
            m.add_hint(hint)
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.max_time_in_seconds = max(options.time_limit - (time.monotonic() - start), 0.001)
        limit = deterministic_limit(options.time_budget)
        if limit is not None:
            params.max_deterministic_time = limit
        params.random_seed = options.seed
        params.num_workers = max(options.threads, 1)
        params.interleave_search = options.threads > 1
        params.relative_gap_limit = options.relative_gap
        params.log_search_progress = False
        code = solver.solve(m.model)
        status = _STATUS.get(code, SolverStatus.ERROR)
        detail = f"{solver.deterministic_time:.2f} deterministic"
        if code == cp_model.MODEL_INVALID:
            detail = m.model.validate()
        values = bound = None
        if status in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            values = tuple(float(solver.value(v)) for v in m.vars)
            bound = solver.best_objective_bound / SCALE + formulation.offset + m.rounding_slack
        return outcome(status, values, bound, time.monotonic() - start, detail)


def deterministic_limit(time_budget: float | None) -> float | None:
    """CP-SAT's deterministic-time limit for a request's whole time budget."""
    return None if time_budget is None else DETERMINISTIC_TIME_PER_SECOND * time_budget
