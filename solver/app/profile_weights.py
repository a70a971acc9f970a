"""The [weights] table of an operator profile: the numeric weights and the energy basis.

Apart from ``solver.app.profile`` (which re-exports both names) to keep that module's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import energy_basis_to_proto
from solver.app.limits import parse_energy_basis
from solver.domain import EnergyBasis

WEIGHT_KEYS = (
    "throughput",
    "energy",
    "migration",
    "locality",
    "deadline",
    "fairness",
    "completion",
    "node_preference",
)
"""The numeric weights (sweeps and the simulator's overrides name them)."""
ENERGY_BASIS_KEY = "energy_basis"
TABLE_KEYS = (*WEIGHT_KEYS, ENERGY_BASIS_KEY)
"""Every key of [weights]."""


@dataclass(frozen=True)
class ProfileWeights:
    """Weights the profile sets; None: not in the file."""

    throughput: float | None = None
    energy: float | None = None
    migration: float | None = None
    locality: float | None = None
    deadline: float | None = None
    fairness: float | None = None
    completion: float | None = None
    node_preference: float | None = None
    energy_basis: EnergyBasis | None = None
    """``energy_basis = "waste"``: what the energy weight charges (docs/objective.md)."""


def read_energy_basis(table: dict[str, Any], bad: Callable[[str, str], None]) -> EnergyBasis | None:
    """The [weights] table's energy_basis, taken out of `table` (the rest are numbers); None
    when absent or wrong (reported through `bad`, naming the key)."""
    if ENERGY_BASIS_KEY not in table:
        return None
    value = table.pop(ENERGY_BASIS_KEY)
    key = f"weights.{ENERGY_BASIS_KEY}"
    if not isinstance(value, str):
        kind = f"a {type(value).__name__} ({value!r})"
        bad(key, f'must be a string ("draw" or "waste"), got {kind}')
        return None
    try:
        return parse_energy_basis(value)
    except ValueError as e:
        bad(key, str(e))
        return None


def apply_energy_basis(request: pb.SolveRequest, basis: EnergyBasis | None) -> None:
    """Set the request's energy basis from the profile unless the request sets one."""
    if basis is not None and request.weights.energy_basis == pb.ENERGY_BASIS_UNSPECIFIED:
        request.weights.energy_basis = energy_basis_to_proto(basis)


def format_energy_basis(basis: EnergyBasis | None) -> str:
    """The TOML line of the effective energy basis (marked when it is the default)."""
    effective = basis or EnergyBasis.DRAW
    return f'{ENERGY_BASIS_KEY} = "{effective.name.lower()}"' + (
        "  # default" if basis is None else ""
    )
