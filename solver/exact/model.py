"""The full model's data: variables, linear constraints (some indicators) and the objective.

A ``Formulation`` is backend-neutral: ``solver.exact.backends`` translates it for CP-SAT, HiGHS
and Pyomo, and ``solver.exact.constraints`` fills it, one function per constraint family.
Constraint coefficients and finite row bounds are integers, so CP-SAT takes the rows as they
are and MILP solvers check them exactly once variables are rounded.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from solver.domain import Node, Problem
from solver.model.configs import ConfigSet

INF = math.inf

Term = tuple[int, int]
"""(variable index, integer coefficient)."""


@dataclass(frozen=True, slots=True)
class Variable:
    name: str
    """``kind[key]``, e.g. ``y[job,3]`` or ``x[job,node]``: readable in exported models."""
    lb: float
    ub: float
    integer: bool = True

    @property
    def binary(self) -> bool:
        return self.integer and self.lb >= 0 and self.ub <= 1


@dataclass(frozen=True, slots=True)
class Constraint:
    """``lo <= sum(coef * var) <= hi``; with ``enforce``, only when that binary is 1."""

    family: str
    """The constraint family (``add_*`` function without ``add_``) that made it."""
    name: str
    """``kind[key]``, unique in the formulation, e.g. ``gang_size[job]``."""
    terms: tuple[Term, ...]
    lo: float
    """-inf or an integer."""
    hi: float
    """+inf or an integer."""
    enforce: int | None = None
    """Index of a binary variable: the constraint holds when it is 1 (an indicator)."""


@dataclass(frozen=True, slots=True)
class ObjectiveGroup:
    """Binary variables of which at most ``max_active`` are 1 in some optimal solution.

    Lets a backend that rounds the objective (CP-SAT) bound the total rounding error tightly.
    """

    variables: tuple[int, ...]
    max_active: int


@dataclass
class Formulation:
    """The model and its index maps (job names, node and rack names, configuration indices)."""

    problem: Problem
    configs: ConfigSet
    variables: list[Variable] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    objective: list[tuple[int, float]] = field(default_factory=list)
    """Maximised: sum(coef * var) + offset."""
    offset: float = 0.0
    """Constant part of the objective (queued values, migration charges)."""
    objective_groups: list[ObjectiveGroup] = field(default_factory=list)

    y: dict[tuple[str, int], int] = field(default_factory=dict)
    """y[j, i]: job j runs in its configuration i."""
    x: dict[tuple[str, str], int] = field(default_factory=dict)
    """x[j, n]: GPUs of node n given to job j."""
    z: dict[tuple[str, str], int] = field(default_factory=dict)
    """z[j, n]: job j uses node n (only with a locality weight)."""
    r: dict[tuple[str, str], int] = field(default_factory=dict)
    """r[j, k]: job j uses rack k (only with a locality weight)."""
    keep: dict[str, int] = field(default_factory=dict)
    """keep[j]: running job j stays on its GPUs in its shape."""
    tp: dict[tuple[str, int], int] = field(default_factory=dict)
    """tp[j, t]: job j runs with tensor degree t (t > 1 only)."""
    q: dict[tuple[str, str], int] = field(default_factory=dict)
    """q[j, n]: tensor-parallel groups of job j on node n."""
    w: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """w[j, k, i]: GPUs of job j in rack k when it runs in configuration i (rack budgets)."""
    candidates: dict[str, list[Node]] = field(default_factory=dict)
    """Nodes each job may use: of a type one of its configurations runs on."""

    # ------------------------------------------------------------ building

    def add_var(self, name: str, lb: float, ub: float, integer: bool = True) -> int:
        self.variables.append(Variable(name, lb, ub, integer))
        return len(self.variables) - 1

    def add_row(
        self,
        family: str,
        name: str,
        terms: Sequence[Term],
        lo: float = -INF,
        hi: float = INF,
        enforce: int | None = None,
    ) -> None:
        for bound in (lo, hi):
            if math.isfinite(bound) and bound != int(bound):
                raise ValueError(f"{name}: row bounds must be integers, got {bound}")
        if not terms:  # 0 within [lo, hi], or else the request can't be met
            if lo <= 0 <= hi:
                return
            if enforce is not None:
                self.constraints.append(Constraint(family, name, ((enforce, 1),), -INF, 0))
            else:
                self.add_infeasible(family, name)
            return
        self.constraints.append(Constraint(family, name, tuple(terms), lo, hi, enforce))

    def add_infeasible(self, family: str, name: str) -> None:
        """A contradiction (a binary fixed to 1 that a row holds at 0): the request can't be met.

        Written as an ordinary variable and row so that every backend and file format takes it.
        """
        v = self.add_var(f"infeasible[{name}]", 1, 1)
        self.constraints.append(Constraint(family, f"contradiction[{name}]", ((v, 1),), -INF, 0))

    def jobs_with_configs(self) -> list[str]:
        return [j.name for j in self.problem.jobs if self.configs.by_job[j.name]]

    # ------------------------------------------------------------ reading

    @property
    def num_variables(self) -> int:
        return len(self.variables)

    def bounds_of(self, terms: Sequence[Term]) -> tuple[float, float]:
        """Smallest and largest value of sum(coef * var) over the variables' bounds."""
        lo = hi = 0.0
        for v, c in terms:
            var = self.variables[v]
            if c > 0:
                lo += c * var.lb
                hi += c * var.ub
            else:
                lo += c * var.ub
                hi += c * var.lb
        return lo, hi

    def linear_rows(self) -> Iterator[tuple[Constraint, str, tuple[Term, ...], float, float]]:
        """Every constraint as plain linear rows, indicators rewritten with big-M.

        Yields (constraint, row name, terms, lo, hi). ``enforce = b`` and ``lo <= e <= hi``
        become ``e + (U - hi) b <= U`` and ``e - (lo - L) b >= L``, where [L, U] is the range
        of ``e`` over the variable bounds: the tightest big-M that the bounds allow. A side
        the bounds already imply gives no row.
        """
        for c in self.constraints:
            if c.enforce is None:
                yield c, c.name, c.terms, c.lo, c.hi
                continue
            low, high = self.bounds_of(c.terms)
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"{c.name}: an indicator needs bounded variables for big-M")
            if c.hi < high:
                m = math.ceil(high - c.hi)  # integer coefficients; = U - hi on integer bounds
                yield c, _tag(c.name, "ub"), _merge(c.terms, c.enforce, m), -INF, c.hi + m
            if c.lo > low:
                m = math.ceil(c.lo - low)
                yield c, _tag(c.name, "lb"), _merge(c.terms, c.enforce, -m), c.lo - m, INF

    def rounding_slack(self, scale: float) -> float:
        """Largest total error, in objective units, of the objective rounded to 1/scale steps.

        Per group: its largest coefficient error times the number of its variables that can
        be 1; any other variable: its error times its largest magnitude.
        """
        error = {v: abs(round(c * scale) - c * scale) for v, c in self.objective}
        grouped: set[int] = set()
        slack = 0.0
        for g in self.objective_groups:
            worst = max((error.get(v, 0.0) for v in g.variables), default=0.0)
            slack += worst * g.max_active
            grouped.update(g.variables)
        for v, e in error.items():
            if v not in grouped:
                var = self.variables[v]
                slack += e * max(abs(var.lb), abs(var.ub))
        return slack / scale


def _tag(name: str, side: str) -> str:
    return name[:-1] + f",{side}]" if name.endswith("]") else f"{name}[{side}]"


def _merge(terms: tuple[Term, ...], var: int, coef: int) -> tuple[Term, ...]:
    out = dict(terms)
    out[var] = out.get(var, 0) + coef
    return tuple((v, c) for v, c in out.items() if c)
