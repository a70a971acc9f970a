"""The objective's weights as plain typed data (docs/objective.md); ``solver.domain``
re-exports them, apart to keep that module's size."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class EnergyBasis(enum.Enum):
    """What the energy term charges a running configuration (docs/objective.md, "Energy basis")."""

    DRAW = "DRAW"
    """Its power draw: running itself costs energy (the default, as before)."""
    WASTE = "WASTE"
    """The draw above the job's most efficient configuration at the same throughput:
    ``watts - samples_per_second * e*_j``, zero where the job runs most efficiently."""


@dataclass(frozen=True)
class ObjectiveWeights:
    """Operator weights; docs/objective.md defines each term."""

    throughput: float = 1.0
    energy: float = 0.1
    migration: float = 0.05
    locality: float = 0.01
    deadline: float = 0.5
    fairness: float = 1.0
    """Weight of the fairness mode's value F (docs/objective.md); unused by WEIGHTED_SUM."""
    completion: float = 0.0
    """Weight of the completion priority C (docs/objective.md, "Completion priority"); 0: off."""
    energy_basis: EnergyBasis = EnergyBasis.DRAW
    """What the energy weight multiplies: each configuration's draw, or its waste."""
