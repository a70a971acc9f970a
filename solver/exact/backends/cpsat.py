"""CP-SAT (OR-Tools) backend: the formulation as a CP-SAT model.

Variables become integer variables, rows linear constraints, indicators enforcement literals,
written straight into the model's proto from the formulation's arrays. CP-SAT works on
integers: objective coefficients are scaled by SCALE and rounded; the formulation bounds the
total rounding error, which is added to the reported bound so that the bound stays a proven one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np
from ortools.sat.python import cp_model

from solver.exact.backends.base import (
    DEFAULT_OPTIONS,
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    outcome,
)
from solver.exact.index import Values, dense
from solver.exact.milp import Formulation
from solver.exact.rows import NO_ENFORCE, FloatArray, Rows

SCALE = 1_000_000
"""Objective units per integer step."""

DETERMINISTIC_TIME_PER_SECOND = 0.5
"""CP-SAT deterministic-time units allowed per second of budget: a limit independent of
machine load, so the same request and seed give the same plan. The wall clock still caps it."""


class CpSatModel:
    """A formulation translated: the CP-SAT model, filled from the formulation's arrays.

    The model's proto is written directly (one variable or constraint message each, no
    expression objects), as ``CpModel`` would write it: terms sorted by variable, infinite
    bounds as INT_MIN/INT_MAX, the maximised objective negated with scaling factor -1.
    Names are written only when asked for (they cost time and CP-SAT does not need them).
    """

    def __init__(self, formulation: Formulation, *, names: bool = False) -> None:
        self.formulation = formulation
        self.model = cp_model.CpModel()
        f = formulation
        lb, ub, integer = f.bounds()
        if not integer.all():
            raise ValueError(
                "CP-SAT takes integer variables only: "
                f"{f.variable_names()[int(np.flatnonzero(~integer)[0])]}"
            )
        proto = self.model.proto
        add_variable = proto.variables.add
        var_names = f.variable_names() if names else None
        for k, (low, high) in enumerate(zip(_ints(lb), _ints(ub), strict=True)):
            var = add_variable()
            var.domain.extend([low, high])
            if var_names is not None:
                var.name = var_names[k]
        self._add_rows(f.rows(), f.row_names() if names else None)
        variables, coefs = f.objective_arrays()
        scaled = np.round(coefs * SCALE).astype(np.int64)
        variables, scaled = variables[scaled != 0], scaled[scaled != 0]
        used, inverse = np.unique(variables, return_inverse=True)
        total = np.zeros(used.size, dtype=np.int64)
        np.add.at(total, inverse, scaled)
        objective = proto.objective
        objective.vars.extend(used[total != 0].tolist())
        objective.coeffs.extend((-total[total != 0]).tolist())
        objective.scaling_factor = -1.0  # maximised
        self.rounding_slack = rounding_slack(formulation, SCALE)
        """Largest total error of the integer-rounded objective, in objective units."""

    def _add_rows(self, rows: Rows, names: list[str] | None) -> None:
        counts = np.diff(rows.indptr)
        row_of = np.repeat(np.arange(rows.num_rows, dtype=np.int64), counts)
        order = np.argsort(row_of * max(self.formulation.num_variables, 1) + rows.indices)
        indices = rows.indices[order].tolist()
        coefs = rows.coefs[order].tolist()
        pointer = rows.indptr.tolist()
        add = self.model.proto.constraints.add
        for r, (low, high, enforce) in enumerate(
            zip(_ints(rows.lo), _ints(rows.hi), rows.enforce.tolist(), strict=True)
        ):
            ct = add()
            if names is not None:
                ct.name = names[r]
            if enforce != NO_ENFORCE:
                ct.enforcement_literal.append(enforce)
            linear = ct.linear
            a, b = pointer[r], pointer[r + 1]
            linear.vars.extend(indices[a:b])
            linear.coeffs.extend(coefs[a:b])
            linear.domain.extend([low, high])

    def add_hint(self, hint: Mapping[int, float]) -> None:
        values = dense(hint, self.formulation.num_variables)
        which = np.arange(values.size) if isinstance(hint, Values) else np.array(list(hint))
        solution_hint = self.model.proto.solution_hint
        solution_hint.vars.extend(which.tolist())
        solution_hint.values.extend(np.rint(values[which]).astype(np.int64).tolist())


def _ints(bounds: FloatArray) -> list[int]:
    """Bounds as CP-SAT integers: infinities as INT_MIN and INT_MAX."""
    out = np.zeros(bounds.size, dtype=np.int64)
    finite = np.isfinite(bounds)
    out[finite] = bounds[finite]
    out[~finite & (bounds < 0)] = cp_model.INT_MIN
    out[~finite & (bounds > 0)] = cp_model.INT_MAX
    result: list[int] = out.tolist()
    return result


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
        built = time.monotonic() - start
        if options.time_limit - built <= NO_TIME_SECONDS:
            # CP-SAT loads and presolves a model before it looks at its limit (0.45 s at
            # 157,000 variables on a 1 ms limit): no search without time for one.
            detail = f"no time left to search (the model took {built:.2f} s to build)"
            return outcome(SolverStatus.NO_SOLUTION, None, None, built, detail)
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
        with stop_search_on_request(solver, options.stop):
            code = solver.solve(m.model)
        status = _STATUS.get(code, SolverStatus.ERROR)
        detail = f"{solver.deterministic_time:.2f} deterministic"
        if code == cp_model.MODEL_INVALID:
            detail = m.model.validate()
        values = bound = None
        if status in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
            values = tuple(np.asarray(solver.response_proto.solution, dtype=np.float64).tolist())
            bound = solver.best_objective_bound / SCALE + formulation.offset + m.rounding_slack
        return outcome(status, values, bound, time.monotonic() - start, detail)


NO_TIME_SECONDS = 0.01
"""Below this much of its limit left after building the model, CP-SAT is not started."""
STOP_POLL_SECONDS = 0.02
"""How often a running CP-SAT search polls its stop request (a cancelled call)."""


@contextmanager
def stop_search_on_request(
    solver: cp_model.CpSolver, stop: Callable[[], bool] | None
) -> Iterator[None]:
    """While the block runs, stop `solver`'s search once `stop()` is true (CP-SAT has no
    interrupt callback: a watcher thread calls stop_search, which CP-SAT allows)."""
    if stop is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(STOP_POLL_SECONDS):
            if stop():
                solver.stop_search()
                return

    watcher = threading.Thread(target=watch, name="dsfro-cpsat-stop", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def deterministic_limit(time_budget: float | None) -> float | None:
    """CP-SAT's deterministic-time limit for a request's whole time budget."""
    return None if time_budget is None else DETERMINISTIC_TIME_PER_SECOND * time_budget


def rounding_slack(f: Formulation, scale: float) -> float:
    """Largest total error, in objective units, of the objective rounded to 1/scale steps.

    Per objective group: its largest coefficient error times the number of its variables that
    can be 1; any other variable: its error times its largest magnitude.
    """
    v, c = f.objective_arrays()
    scaled = c * scale
    error = np.zeros(f.num_variables)
    error[v] = np.abs(np.round(scaled) - scaled)
    grouped = np.zeros(f.num_variables, dtype=bool)
    slack = 0.0
    for indptr, indices, active in f.group_arrays:
        sizes = np.diff(indptr)
        nonempty = np.flatnonzero(sizes > 0)
        if indices.size:
            worst = np.maximum.reduceat(error[indices], indptr[nonempty])
            slack += float(np.sum(worst * active[nonempty]))
        grouped[indices] = True
    lb, ub, _ = f.bounds()
    rest = np.zeros(f.num_variables, dtype=bool)
    rest[v] = True
    rest &= ~grouped
    slack += float(np.sum(error[rest] * np.maximum(np.abs(lb[rest]), np.abs(ub[rest]))))
    return slack / scale
