"""Pyomo backend: the formulation as a Pyomo ConcreteModel, solved by any SolverFactory name.

Each variable kind (``y``, ``x``, ``z`` ...) is one indexed ``Var`` and each row kind one indexed
``Constraint``, so a written model reads like the formulation (``y[job,3]``,
``gang_size[job]``). Indicators are big-M rows as for HiGHS (``Formulation.linear_rows``), which
every solver and file format takes. The default solver is ``appsi_highs``; another name given
in ``SolveOptions.pyomo_solver`` (gurobi, cplex, scip, cbc ...) is used as it is, with the time
limit, and its gap, seed and thread options where this module knows their names.

Pyomo is imported on first use: loading it takes about half a second.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from solver.exact.backends.base import (
    DEFAULT_OPTIONS,
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    outcome,
)
from solver.exact.backends.highs import BOUND_MARGIN, new_highs
from solver.exact.milp import Formulation

DEFAULT_SOLVER = "appsi_highs"
KNOWN_SOLVERS = (
    "appsi_highs",
    "highs",
    "gurobi",
    "gurobi_direct",
    "cplex",
    "cplex_direct",
    "scip",
    "cbc",
    "glpk",
)
"""Names available_solvers() probes."""
HANDOVER_RATIO = 1.2
"""Time to hand a built Pyomo model to its solver (appsi's ``set_instance``, or writing the
file for a file-based solver), as a multiple of the time ``to_pyomo`` took: 0.75-1.14 from
481 to 26,673 variables (2026-12-05). Neither is within the solver's own time limit."""


_GAP_SEED_THREADS: dict[str, tuple[str | None, str | None, str | None]] = {
    # HiGHS's thread pool is process-wide and fixed by its first solve: threads left alone.
    "appsi_highs": ("mip_rel_gap", "random_seed", None),
    "highs": ("mip_rel_gap", "random_seed", None),
    "gurobi": ("MIPGap", "Seed", "Threads"),
    "gurobi_direct": ("MIPGap", "Seed", "Threads"),
    "cplex": ("mip_tolerances_mipgap", "randomseed", "threads"),
    "cplex_direct": ("mip_tolerances_mipgap", "randomseed", "threads"),
    "scip": ("limits/gap", "randomization/randomseedshift", "parallel/maxnthreads"),
    "cbc": ("ratioGap", "randomCbcSeed", "threads"),
    "glpk": ("mipgap", None, None),
}
"""Option names of the relative gap, random seed and thread count, per solver."""


class _AbortedLoadFilter(logging.Filter):
    """Drops Pyomo's warning on loading a solution after a time limit: that is expected here
    (the status says FEASIBLE)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Loading a SolverResults object with a")


_filter = _AbortedLoadFilter()


def _pyomo() -> Any:
    import pyomo.environ as pyo  # type: ignore[import-untyped]

    logger = logging.getLogger("pyomo.core")
    if _filter not in logger.filters:
        logger.addFilter(_filter)
    return pyo


@functools.cache
def available_solvers() -> list[str]:
    """The names of KNOWN_SOLVERS that Pyomo can run here (probed once, never raises)."""
    try:
        pyo = _pyomo()
    except Exception:  # pragma: no cover - pyomo is a dependency
        return []
    found = []
    for name in KNOWN_SOLVERS:
        try:
            if pyo.SolverFactory(name).available(exception_flag=False):
                found.append(name)
        except Exception:  # a broken plugin or executable: not available
            continue
    return found


def _split(name: str, used: set[str]) -> tuple[str, str]:
    """``kind[key]`` as (kind, key), the key made unique within its kind."""
    kind, sep, rest = name.partition("[")
    key = rest[:-1] if sep and rest.endswith("]") else rest
    if key in used:
        key = f"{key}#{len(used)}"
    used.add(key)
    return kind, key


def to_pyomo(f: Formulation) -> tuple[Any, list[Any]]:
    """The ConcreteModel of a formulation, and its variables by formulation index."""
    pyo = _pyomo()
    from pyomo.core.expr.numeric_expr import LinearExpression  # type: ignore[import-untyped]

    m = pyo.ConcreteModel(name="dsfro")
    kinds: dict[str, list[tuple[int, str]]] = {}
    used: dict[str, set[str]] = {}
    for i, v in enumerate(f.variables):
        kind, _, _ = v.name.partition("[")
        kind, key = _split(v.name, used.setdefault(kind, set()))
        kinds.setdefault(kind, []).append((i, key))
    xs: list[Any] = [None] * f.num_variables
    for kind, items in kinds.items():
        comp = pyo.Var([k for _, k in items], dense=True)
        m.add_component(_component_name(m, kind), comp)
        for i, key in items:
            v = f.variables[i]
            var = comp[key]
            var.domain = pyo.Binary if v.binary else (pyo.Integers if v.integer else pyo.Reals)
            var.setlb(_bound(v.lb))
            var.setub(_bound(v.ub))
            xs[i] = var
    rows: dict[str, list[tuple[str, Any, float | None, float | None]]] = {}
    used_rows: dict[str, set[str]] = {}
    for _, name, terms, lo, hi in f.linear_rows():
        kind, _, _ = name.partition("[")
        kind, key = _split(name, used_rows.setdefault(kind, set()))
        expr = LinearExpression(
            constant=0, linear_coefs=[c for _, c in terms], linear_vars=[xs[v] for v, _ in terms]
        )
        rows.setdefault(kind, []).append((key, expr, _bound(lo), _bound(hi)))
    for kind, row_items in rows.items():
        data = {key: (lo, expr, hi) for key, expr, lo, hi in row_items}
        comp = pyo.Constraint(list(data), rule=lambda _m, k, d=data: d[k])
        m.add_component(_component_name(m, kind), comp)
    objective = LinearExpression(
        constant=f.offset,
        linear_coefs=[c for _, c in f.objective],
        linear_vars=[xs[v] for v, _ in f.objective],
    )
    m.objective = pyo.Objective(expr=objective, sense=pyo.maximize)
    return m, xs


def _bound(value: float) -> int | float | None:
    """None for an infinite bound; an integer as an int (written files read ``<= 8``)."""
    if math.isinf(value):
        return None
    return int(value) if value.is_integer() else value


def _component_name(m: Any, kind: str) -> str:
    name = kind or "v"
    while m.component(name) is not None:
        name += "_"
    return name


def export_model(f: Formulation, path: str | Path, fmt: str) -> Path:
    """Write the formulation as an MPS or LP file (readable names) for any MILP solver.

    Maximised; the objective's constant is kept as the writer allows (see docs/backends.md).
    """
    from pyomo.opt import ProblemFormat  # type: ignore[import-untyped,unused-ignore]

    writers = {"mps": ProblemFormat.mps, "lp": ProblemFormat.cpxlp}
    writer = writers.get(fmt)
    if writer is None:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(writers)}")
    m, _ = to_pyomo(f)
    out = Path(path)
    m.write(str(out), format=writer, io_options={"symbolic_solver_labels": True})
    return out


class PyomoBackend:
    def __init__(self, solver_name: str = "") -> None:
        self.solver_name = solver_name
        self.name = f"Pyomo/{solver_name or DEFAULT_SOLVER}"

    def solve(
        self,
        formulation: Formulation,
        *,
        hint: Mapping[int, float] | None = None,
        options: ExactOptions = DEFAULT_OPTIONS,
    ) -> ExactOutcome:
        start = time.monotonic()
        name = options.solver_name or self.solver_name or DEFAULT_SOLVER
        self.name = f"Pyomo/{name}"
        try:
            return self._solve(formulation, hint, options, name, start)
        except Exception as e:  # a solver plugin failing is an outcome, not a crash
            detail = f"{name}: {type(e).__name__}: {e}"
            return outcome(SolverStatus.ERROR, None, None, time.monotonic() - start, detail)

    def _solve(
        self,
        f: Formulation,
        hint: Mapping[int, float] | None,
        options: ExactOptions,
        name: str,
        start: float,
    ) -> ExactOutcome:
        pyo = _pyomo()
        from pyomo.opt import TerminationCondition as TC  # type: ignore[import-untyped,unused-ignore]

        if not f.num_variables:  # a constant: no solver takes an empty model
            return outcome(
                SolverStatus.OPTIMAL, (), f.offset, time.monotonic() - start, "empty model"
            )
        if "highs" in name:
            new_highs()  # HiGHS's one-off banner goes to /dev/null, not to stdout
        built = time.monotonic()
        m, xs = to_pyomo(f)
        took = time.monotonic() - built
        # Handing the model to the solver takes about as long again, outside its time limit.
        handover = HANDOVER_RATIO * took
        if options.time_limit - (time.monotonic() - start) - handover <= 0:
            detail = f"{name}: no time left to hand it the model (built in {took:.2f} s)"
            return outcome(SolverStatus.NO_SOLUTION, None, None, time.monotonic() - start, detail)
        opt = pyo.SolverFactory(name)
        if not opt.available(exception_flag=False):
            raise RuntimeError(f"solver {name!r} is not available")
        kwargs: dict[str, Any] = {"load_solutions": False, "tee": False}
        if hint and _warm_start_capable(opt):
            for v, value in hint.items():
                xs[v].set_value(
                    round(value) if f.variables[v].integer else value, skip_validation=True
                )
            kwargs["warmstart"] = True
        solver_options: dict[str, Any] = {}
        gap, seed, threads = _GAP_SEED_THREADS.get(name, (None, None, None))
        if gap:
            solver_options[gap] = options.relative_gap
        if seed:
            solver_options[seed] = options.seed
        if threads and options.threads > 0:
            solver_options[threads] = options.threads
        if "highs" in name:
            solver_options["mip_abs_gap"] = 1e-9
        if solver_options:
            kwargs["options"] = solver_options
        kwargs["timelimit"] = max(options.time_limit - (time.monotonic() - start) - handover, 0.01)
        results = opt.solve(m, **kwargs)
        tc = results.solver.termination_condition
        status = _status_table(TC).get(tc, SolverStatus.ERROR)
        values = None
        if status in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE) and len(results.solution) > 0:
            for var in xs:
                var.set_value(None, skip_validation=True)
            m.solutions.load_from(results)
            values = tuple(0.0 if var.value is None else float(var.value) for var in xs)
        bound = None
        upper = results.problem.upper_bound
        if upper is not None and math.isfinite(float(upper)):
            bound = float(upper) + BOUND_MARGIN * max(1.0, abs(float(upper)))
        return outcome(status, values, bound, time.monotonic() - start, f"{name}: {tc}")


@functools.cache
def _status_table(tc: Any) -> dict[Any, SolverStatus]:
    """Pyomo termination condition -> shared status; anything else is ERROR. Limits are
    FEASIBLE with a solution and NO_SOLUTION without (backends.outcome)."""
    return {
        tc.optimal: SolverStatus.OPTIMAL,
        tc.globallyOptimal: SolverStatus.OPTIMAL,
        tc.locallyOptimal: SolverStatus.OPTIMAL,
        tc.infeasible: SolverStatus.INFEASIBLE,
        tc.infeasibleOrUnbounded: SolverStatus.INFEASIBLE,  # every variable is bounded
        tc.maxTimeLimit: SolverStatus.FEASIBLE,
        tc.maxIterations: SolverStatus.FEASIBLE,
        tc.maxEvaluations: SolverStatus.FEASIBLE,
        tc.userInterrupt: SolverStatus.FEASIBLE,
        tc.minFunctionValue: SolverStatus.FEASIBLE,
        tc.minStepLength: SolverStatus.FEASIBLE,
    }


def _warm_start_capable(opt: Any) -> bool:
    capable = getattr(opt, "warm_start_capable", None)
    if capable is not None:
        try:
            return bool(capable())
        except Exception:
            return False
    return "warmstart" in inspect.signature(opt.solve).parameters
