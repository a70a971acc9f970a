"""The full model's data: variables, linear constraints (some indicators) and the objective.

A ``Formulation`` is backend-neutral: ``solver.exact.backends`` translates it for CP-SAT, HiGHS
and Pyomo, and ``solver.exact.constraints`` fills it, one function per constraint family.
Constraint coefficients and finite row bounds are integers, so CP-SAT takes the rows as they
are and MILP solvers check them exactly once variables are rounded.

Everything is stored as numpy arrays appended in blocks (a family's variables, a family's rows
in CSR form), so that a model of a million variables is built and handed to a solver in bulk.
Names (``y[job,3]``, ``gang_size[job]``) are made only when asked for: by exports, Pyomo, tests.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from solver.domain import Node, Problem
from solver.exact.index import Indices, LazyMap, candidates, index_map
from solver.exact.layout import Layout, layout_of
from solver.exact.milp_parts import (
    Constraint,
    Keys,
    KindArray,
    ObjectiveGroup,
    RowBlock,
    Term,
    VarBlock,
    Variable,
    item_names,
    keys_subset,
    split_name,
    tagged_name,
)
from solver.exact.rows import (
    NO_ENFORCE,
    PLAIN,
    FloatArray,
    IntArray,
    Rows,
    big_m,
    floats,
    gather,
    ints,
    var_ints,
)
from solver.perfmodel.configs import ConfigSet

INF = math.inf

_EMPTY = np.zeros(0, dtype=np.int64)


class Formulation:
    """The model, its layout (the problem as arrays) and its index maps."""

    def __init__(self, problem: Problem, configs: ConfigSet) -> None:
        self.problem = problem
        self.configs = configs
        self.layout: Layout = layout_of(problem, configs)
        self.index = Indices()
        self.var_blocks: list[VarBlock] = []
        self.row_blocks: list[RowBlock] = []
        self.offset = 0.0
        """Constant part of the objective (queued values, migration charges)."""
        self.num_variables = 0
        self.num_constraints = 0
        self.contradictions = 0
        """Rows that can't hold (add_infeasible): the request can't be met."""
        self._objective: list[tuple[IntArray, FloatArray]] = []
        self._groups: list[tuple[IntArray, IntArray, IntArray]] = []
        self._cache: dict[str, Any] = {}

    # ------------------------------------------------------------ building

    def add_vars(
        self,
        kinds: str | tuple[str, ...],
        lb: npt.ArrayLike,
        ub: npt.ArrayLike,
        keys: Keys,
        *,
        kind: npt.ArrayLike | None = None,
        integer: bool = True,
    ) -> IntArray:
        """Append variables (bounds broadcast to ``kind``'s or the bounds' length); returns
        their indices."""
        kinds = (kinds,) if isinstance(kinds, str) else kinds
        codes = None if kind is None else np.asarray(kind, dtype=np.int8)
        n = max(np.size(lb), np.size(ub), 0 if codes is None else codes.size)
        low = np.broadcast_to(floats(lb), (n,))
        high = np.broadcast_to(floats(ub), (n,))
        block = VarBlock(self.num_variables, kinds, codes, low, high, integer, keys)
        self.var_blocks.append(block)
        self.num_variables += n
        self._cache.clear()
        return ints(np.arange(block.start, self.num_variables))

    def add_rows(
        self,
        family: str,
        kinds: str | tuple[str, ...],
        indptr: IntArray,
        indices: npt.NDArray[np.integer[Any]],
        coefs: IntArray,
        lo: npt.ArrayLike,
        hi: npt.ArrayLike,
        keys: Keys,
        *,
        kind: npt.ArrayLike | None = None,
        enforce: IntArray | None = None,
    ) -> None:
        """Append rows in CSR form. Bounds must be integers or infinite. A row without terms
        is dropped when 0 is within its bounds; else it forces its indicator to 0, or, without
        one, makes the model infeasible (add_infeasible)."""
        kinds = (kinds,) if isinstance(kinds, str) else kinds
        n = indptr.size - 1
        low = np.broadcast_to(floats(lo), (n,))
        high = np.broadcast_to(floats(hi), (n,))
        codes = None if kind is None else np.asarray(kind, dtype=np.int8)
        for bound in (low, high):
            finite = np.where(np.isfinite(bound), bound, 0.0)
            bad = np.flatnonzero(finite != np.floor(finite))
            if bad.size:
                name = item_names(kinds, codes, keys)[bad[0]]
                raise ValueError(f"{name}: row bounds must be integers, got {bound[bad[0]]}")
        empty = indptr[1:] == indptr[:-1]
        if empty.any():
            self._empty_rows(family, kinds, codes, keys, empty, low, high, enforce)
            keep = np.flatnonzero(~empty)
            indptr, positions = gather(indptr, keep)
            indices, coefs = indices[positions], coefs[positions]
            low, high = low[keep], high[keep]
            enforce = None if enforce is None else enforce[keep]
            codes = None if codes is None else codes[keep]
            keys = keys_subset(keys, keep)
            n = keep.size
        if n == 0:
            return
        block = RowBlock(
            family,
            kinds,
            codes,
            ints(indptr),
            var_ints(indices),
            ints(coefs),
            low,
            high,
            None if enforce is None else ints(enforce),
            keys,
        )
        self.row_blocks.append(block)
        self.num_constraints += n
        self._cache.clear()

    def _empty_rows(
        self,
        family: str,
        kinds: tuple[str, ...],
        codes: KindArray | None,
        keys: Keys,
        empty: npt.NDArray[np.bool_],
        low: FloatArray,
        high: FloatArray,
        enforce: IntArray | None,
    ) -> None:
        names = item_names(kinds, codes, keys)
        for r in np.flatnonzero(empty & ((low > 0) | (high < 0))).tolist():
            b = NO_ENFORCE if enforce is None else int(enforce[r])
            if b != NO_ENFORCE:  # the indicator must be 0
                self.add_row(family, names[r], [(b, 1)], hi=0)
            else:
                self.add_infeasible(family, names[r])

    def add_var(self, name: str, lb: float, ub: float, integer: bool = True) -> int:
        kind, key = split_name(name)
        return int(self.add_vars(kind, [lb], [ub], lambda: [key], integer=integer)[0])

    def add_row(
        self,
        family: str,
        name: str,
        terms: Sequence[Term],
        lo: float = -INF,
        hi: float = INF,
        enforce: int | None = None,
    ) -> None:
        kind, key = split_name(name)
        self.add_rows(
            family,
            kind,
            ints([0, len(terms)]),
            ints([v for v, _ in terms]),
            ints([c for _, c in terms]),
            lo,
            hi,
            lambda: [key],
            enforce=None if enforce is None else ints([enforce]),
        )

    def add_infeasible(self, family: str, name: str) -> None:
        """A contradiction (a binary fixed to 1 that a row holds at 0): the request can't be met.

        Written as an ordinary variable and row so that every backend and file format takes it.
        """
        v = self.add_var(f"infeasible[{name}]", 1, 1)
        self.add_row(family, f"contradiction[{name}]", [(v, 1)], hi=0)
        self.contradictions += 1

    def add_objective(self, variables: IntArray, coefs: FloatArray) -> None:
        """Add ``coefs * variables`` to the objective (maximised)."""
        self._objective.append((ints(variables), floats(coefs)))
        self._cache.clear()

    def add_objective_groups(
        self, indptr: IntArray, indices: IntArray, max_active: IntArray
    ) -> None:
        """Groups of variables in CSR form (ObjectiveGroup)."""
        self._groups.append((ints(indptr), ints(indices), ints(max_active)))

    def jobs_with_configs(self) -> list[str]:
        return [j.name for j in self.problem.jobs if self.configs.by_job.get(j.name)]

    # ------------------------------------------------------------ reading: arrays

    def _cached(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def bounds(self) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
        """Lower and upper bounds and integrality of every variable."""

        def make() -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
            blocks = self.var_blocks
            if not blocks:
                return floats(_EMPTY), floats(_EMPTY), np.zeros(0, dtype=bool)
            return (
                floats(np.concatenate([b.lb for b in blocks])),
                floats(np.concatenate([b.ub for b in blocks])),
                np.concatenate([np.full(b.lb.size, b.integer) for b in blocks]),
            )

        result: tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]] = self._cached("bounds", make)
        return result

    def row_blocks_as_rows(self) -> list[Rows]:
        """Each block of constraints as Rows (its arrays, not copies; ``source`` = constraint
        index)."""

        def make() -> list[Rows]:
            parts = []
            first = 0
            for b in self.row_blocks:
                n = b.lo.size
                enforce = np.full(n, NO_ENFORCE, np.int64) if b.enforce is None else b.enforce
                source = np.arange(first, first + n, dtype=np.int64)
                side = np.full(n, PLAIN, dtype=np.int8)
                parts.append(Rows(b.indptr, b.indices, b.coefs, b.lo, b.hi, enforce, source, side))
                first += n
            return parts

        result: list[Rows] = self._cached("row_parts", make)
        return result

    def rows(self) -> Rows:
        """Every constraint, in order (``source`` = constraint index)."""
        result: Rows = self._cached("rows", lambda: Rows.concat(self.row_blocks_as_rows()))
        return result

    def linear_blocks(self) -> list[Rows]:
        """Every constraint as plain linear rows, block by block, indicators rewritten with
        big-M (``solver.exact.rows.big_m``: the tightest M the variable bounds allow). A block
        without indicators is its own arrays: loading it copies nothing."""

        def make() -> list[Rows]:
            lb, ub, _ = self.bounds()
            return [big_m(r, lb, ub, self.row_names) for r in self.row_blocks_as_rows()]

        result: list[Rows] = self._cached("linear_blocks", make)
        return result

    def linear(self) -> Rows:
        """linear_blocks() as one set of rows."""
        result: Rows = self._cached("linear", lambda: Rows.concat(self.linear_blocks()))
        return result

    def objective_arrays(self) -> tuple[IntArray, FloatArray]:
        """(variables, coefficients) of the objective, in the order they were added."""

        def make() -> tuple[IntArray, FloatArray]:
            if not self._objective:
                return _EMPTY, floats(_EMPTY)
            return (
                ints(np.concatenate([v for v, _ in self._objective])),
                floats(np.concatenate([c for _, c in self._objective])),
            )

        result: tuple[IntArray, FloatArray] = self._cached("objective", make)
        return result

    def objective_vector(self) -> FloatArray:
        """The objective's coefficient of every variable."""
        v, c = self.objective_arrays()
        return floats(np.bincount(v, weights=c, minlength=self.num_variables))

    # ------------------------------------------------------------ reading: names and objects

    def variable_names(self) -> list[str]:
        result: list[str] = self._cached(
            "var_names", lambda: [n for b in self.var_blocks for n in b.names()]
        )
        return result

    def row_names(self) -> list[str]:
        result: list[str] = self._cached(
            "row_names", lambda: [n for b in self.row_blocks for n in b.names()]
        )
        return result

    @property
    def variables(self) -> list[Variable]:
        """Every variable as an object (made on demand: for exports, Pyomo and tests)."""

        def make() -> list[Variable]:
            lb, ub, integer = self.bounds()
            return [
                Variable(n, lo, hi, i)
                for n, lo, hi, i in zip(
                    self.variable_names(), lb.tolist(), ub.tolist(), integer.tolist(), strict=True
                )
            ]

        result: list[Variable] = self._cached("variables", make)
        return result

    @property
    def constraints(self) -> list[Constraint]:
        """Every constraint as an object (made on demand)."""

        def make() -> list[Constraint]:
            rows = self.rows()
            families = [b.family for b in self.row_blocks for _ in range(b.lo.size)]
            return [
                Constraint(
                    families[i],
                    name,
                    rows.terms(i),
                    float(rows.lo[i]),
                    float(rows.hi[i]),
                    None if rows.enforce[i] == NO_ENFORCE else int(rows.enforce[i]),
                )
                for i, name in enumerate(self.row_names())
            ]

        result: list[Constraint] = self._cached("constraints", make)
        return result

    def linear_rows(self) -> Iterator[tuple[Constraint, str, tuple[Term, ...], float, float]]:
        """The big-M rows one at a time: (constraint, row name, terms, lo, hi)."""
        rows = self.linear()
        constraints = self.constraints
        for i in range(rows.num_rows):
            c = constraints[int(rows.source[i])]
            side = int(rows.side[i])
            name = c.name if side == PLAIN else tagged_name(c.name, "ub" if side == 1 else "lb")
            yield c, name, rows.terms(i), float(rows.lo[i]), float(rows.hi[i])

    @property
    def objective(self) -> list[tuple[int, float]]:
        """Maximised: sum(coef * var) + offset."""
        v, c = self.objective_arrays()
        return list(zip(v.tolist(), c.tolist(), strict=True))

    @property
    def group_arrays(self) -> list[tuple[IntArray, IntArray, IntArray]]:
        """Objective groups in CSR form: (indptr, variables, max_active per group)."""
        return self._groups

    @property
    def objective_groups(self) -> list[ObjectiveGroup]:
        return [
            ObjectiveGroup(tuple(indices[indptr[g] : indptr[g + 1]].tolist()), int(k))
            for indptr, indices, active in self._groups
            for g, k in enumerate(active.tolist())
        ]

    # ------------------------------------------------------------ index maps

    def _map(self, kind: str) -> Mapping[Any, int]:
        result: Mapping[Any, int] = self._cached(
            "map_" + kind, lambda: LazyMap(lambda: index_map(self.layout, self.index, kind))
        )
        return result

    @property
    def y(self) -> Mapping[tuple[str, int], int]:
        """y[j, i]: job j runs in its configuration i."""
        return self._map("y")

    @property
    def x(self) -> Mapping[tuple[str, str], int]:
        """x[j, n]: GPUs of node n given to job j."""
        return self._map("x")

    @property
    def z(self) -> Mapping[tuple[str, str], int]:
        """z[j, n]: job j uses node n (only with a locality weight)."""
        return self._map("z")

    @property
    def r(self) -> Mapping[tuple[str, str], int]:
        """r[j, k]: job j uses rack k (only with a locality weight)."""
        return self._map("r")

    @property
    def keep(self) -> Mapping[str, int]:
        """keep[j]: running job j stays on its GPUs in its shape."""
        return self._map("keep")

    @property
    def tp(self) -> Mapping[tuple[str, int], int]:
        """tp[j, t]: job j runs with tensor degree t (t > 1 only)."""
        return self._map("tp")

    @property
    def q(self) -> Mapping[tuple[str, str], int]:
        """q[j, n]: tensor-parallel groups of job j on node n."""
        return self._map("q")

    @property
    def w(self) -> Mapping[tuple[str, str, int], int]:
        """w[j, k, i]: GPUs of job j in rack k when it runs in configuration i (rack budgets)."""
        return self._map("w")

    @property
    def candidates(self) -> Mapping[str, list[Node]]:
        """Nodes each job may use: of a type one of its configurations runs on."""
        result: Mapping[str, list[Node]] = self._cached(
            "candidates", lambda: candidates(self.layout, self.index)
        )
        return result
