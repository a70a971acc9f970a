"""The objective's weights and its terms as plain typed data (docs/objective.md); ``solver.domain``
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
    node_preference: float = 0.05
    """Weight of the node preferences P (docs/objective.md, "Node preferences"): at most this
    per job, as migration's weight, so a preference never outweighs running."""


@dataclass(frozen=True)
class ObjectiveBreakdown:
    total: float
    throughput: float
    energy: float
    migration: float
    locality: float
    deadline: float
    fairness: float = 0.0
    """The fairness mode's value F, before its weight (0 under WEIGHTED_SUM)."""
    aging: float = 0.0
    """A: the queued jobs' aging, sum of min(1, age in whole 300 s steps / 3600 s), charged at
    the energy weight (docs/objective.md, "Aging")."""
    completion: float = 0.0
    """C: sum of weight x completion priority x u_j (docs/objective.md)."""
    node_preference: float = 0.0
    """P: per job, its GPUs on nodes it would rather not use, each by how much, over its
    max_gpus (solver.preferences; docs/objective.md, "Node preferences")."""
