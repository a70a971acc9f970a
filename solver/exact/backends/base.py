"""What every exact backend shares: its options, its outcome and one status enum.

Kept apart from the registry (``solver.exact.backends``), which imports the backends lazily:
the backends import this module, never the registry.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from solver.exact.milp import Formulation


class SolverStatus(enum.Enum):
    OPTIMAL = "OPTIMAL"
    """Proven optimal (within ExactOptions.relative_gap)."""
    FEASIBLE = "FEASIBLE"
    """A solution, not proven optimal (time or gap limit)."""
    INFEASIBLE = "INFEASIBLE"
    """Proven to have no solution."""
    NO_SOLUTION = "NO_SOLUTION"
    """Stopped (time limit) before finding any solution."""
    ERROR = "ERROR"
    """The solver failed, or its answer could not be read."""


@dataclass(frozen=True)
class ExactOptions:
    time_limit: float = 10.0
    """Wall-clock seconds for the whole backend call, translation included."""
    relative_gap: float = 0.0
    """Stop once the proven relative gap is at most this."""
    seed: int = 0
    threads: int = 1
    time_budget: float | None = None
    """The request's whole time budget, in seconds. A backend with a machine-independent work
    limit (CP-SAT's deterministic time) derives it from this, so that the same request and seed
    give the same result however loaded the machine is; None: no such limit."""
    solver_name: str = ""
    """Pyomo SolverFactory name; empty: appsi_highs. Other backends ignore it."""
    stop: Callable[[], bool] | None = field(default=None, compare=False)
    """Polled while solving (HiGHS's interrupt callbacks): True stops the solve as at a time
    limit. Set when the caller cancels; not sent to worker processes."""


@dataclass(frozen=True)
class ExactOutcome:
    status: SolverStatus
    values: tuple[float, ...] | None
    """The solver's values of the formulation's variables, by index: present exactly when the
    status is OPTIMAL or FEASIBLE."""
    best_bound: float | None
    """Proven upper bound on the formulation's optimum, tolerances included; None unproven."""
    wall_seconds: float
    detail: str = ""


def outcome(
    status: SolverStatus,
    values: tuple[float, ...] | None,
    best_bound: float | None,
    wall_seconds: float,
    detail: str = "",
) -> ExactOutcome:
    """An ExactOutcome whose fields agree, whatever the solver said: a solution status without
    values is NO_SOLUTION (after a limit) or ERROR (a claimed optimum), values come only with a
    solution, and an infeasible or failed model has no bound."""
    if status in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE) and values is None:
        if status is SolverStatus.OPTIMAL:
            detail = (
                f"{detail}; optimal without a solution" if detail else "optimal without a solution"
            )
            status = SolverStatus.ERROR
        else:
            status = SolverStatus.NO_SOLUTION
    if status not in (SolverStatus.OPTIMAL, SolverStatus.FEASIBLE):
        values = None
    if status in (SolverStatus.INFEASIBLE, SolverStatus.ERROR):
        best_bound = None
    return ExactOutcome(status, values, best_bound, wall_seconds, detail)


DEFAULT_OPTIONS = ExactOptions()


class ExactBackend(Protocol):
    name: str
    """For notes and logs, e.g. "CP-SAT", "HiGHS", "Pyomo/appsi_highs"."""

    def solve(
        self,
        formulation: Formulation,
        *,
        hint: Mapping[int, float] | None = None,
        options: ExactOptions = DEFAULT_OPTIONS,
    ) -> ExactOutcome:
        """Solve within options.time_limit (translation included); never raises for a
        solver failure (status ERROR with the reason in detail)."""
        ...
