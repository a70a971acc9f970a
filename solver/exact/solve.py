"""The full formulation on one exact backend, its values turned into a scored plan once.

Backends only translate and solve (``solver.exact.backends``); reading their values back into a
plan and scoring it is the same for all of them, so it lives here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from solver.domain import Backend, Plan
from solver.exact.backends import (
    DEFAULT_OPTIONS,
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    get_backend,
)
from solver.exact.formulation import Formulation, extract


@dataclass(frozen=True)
class ExactResult:
    """A backend's outcome with its solution as a plan."""

    backend: str
    """The backend's name, e.g. "CP-SAT", "HiGHS", "Pyomo/appsi_highs"."""
    status: SolverStatus
    plan: Plan | None
    """The solution as a plan scored by solver.scoring.objective; None without a solution."""
    best_bound: float | None
    wall_seconds: float
    detail: str
    values: tuple[float, ...] | None
    """The solver's values by variable index (kept also when they could not be read as a
    plan: status ERROR)."""


def plan_of(formulation: Formulation, outcome: ExactOutcome, backend: str) -> ExactResult:
    """The outcome's values as a plan; values that do not read as a plan make it an ERROR."""
    plan = None
    status, detail = outcome.status, outcome.detail
    if outcome.values is not None:
        try:
            plan = extract(formulation, outcome.values)
        except ValueError as e:
            status, detail = SolverStatus.ERROR, f"{backend} solution unreadable: {e}"
    return ExactResult(
        backend,
        status,
        plan,
        outcome.best_bound if plan is not None or status is SolverStatus.NO_SOLUTION else None,
        outcome.wall_seconds,
        detail,
        outcome.values,
    )


def solve_full(
    formulation: Formulation,
    which: Backend,
    *,
    hint: Mapping[int, float] | None = None,
    options: ExactOptions = DEFAULT_OPTIONS,
) -> ExactResult:
    """Solve the formulation on the exact backend `which` (CPSAT, HIGHS, PYOMO)."""
    backend = get_backend(which)
    outcome = backend.solve(formulation, hint=hint, options=options)
    return plan_of(formulation, outcome, backend.name)
