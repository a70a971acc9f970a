"""The parts of the full model (``solver.exact.milp``): its variables, constraints and objective
groups as objects, and its variables and rows as blocks of arrays, named on demand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from solver.exact.rows import FloatArray, IntArray, VarArray

Term = tuple[int, int]
"""(variable index, integer coefficient)."""

Keys = Callable[[], list[str]]
"""The text between the brackets of each name of a block, made on demand."""

KindArray = npt.NDArray[np.int8]


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


def item_names(kinds: tuple[str, ...], kind: KindArray | None, keys: Keys) -> list[str]:
    """``kind[key]`` per item; a kind "" names the item by its key alone."""
    if kind is None:
        k = kinds[0]
        return [f"{k}[{key}]" for key in keys()] if k else keys()
    return [
        f"{kinds[c]}[{key}]" if kinds[c] else key
        for c, key in zip(kind.tolist(), keys(), strict=True)
    ]


@dataclass(frozen=True, slots=True)
class VarBlock:
    """Variables start .. start + size - 1, of one or several kinds (``kind``: code per
    variable into ``kinds``, None: all of ``kinds[0]``)."""

    start: int
    kinds: tuple[str, ...]
    kind: KindArray | None
    lb: FloatArray
    ub: FloatArray
    integer: bool
    keys: Keys

    def names(self) -> list[str]:
        return item_names(self.kinds, self.kind, self.keys)


@dataclass(frozen=True, slots=True)
class RowBlock:
    """A family's rows in CSR form; ``enforce`` is -1 where a row always holds."""

    family: str
    kinds: tuple[str, ...]
    kind: KindArray | None
    indptr: IntArray
    indices: VarArray
    coefs: IntArray
    lo: FloatArray
    hi: FloatArray
    enforce: IntArray | None
    keys: Keys

    def names(self) -> list[str]:
        return item_names(self.kinds, self.kind, self.keys)


def split_name(name: str) -> tuple[str, str]:
    """``kind[key]`` as (kind, key); a name without brackets as ("", name)."""
    kind, sep, rest = name.partition("[")
    if sep and rest.endswith("]"):
        return kind, rest[:-1]
    return "", name


def keys_subset(keys: Keys, keep: IntArray) -> Keys:
    def subset() -> list[str]:
        every = keys()
        return [every[i] for i in keep.tolist()]

    return subset


def tagged_name(name: str, side: str) -> str:
    return name[:-1] + f",{side}]" if name.endswith("]") else f"{name}[{side}]"
