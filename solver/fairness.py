"""A request's fairness policy as plain data (re-exported by ``solver.domain``):
docs/objective.md, "Fairness", defines each mode."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FairnessMode(enum.Enum):
    """What the fairness term F of the objective measures (docs/objective.md, "Fairness")."""

    WEIGHTED_SUM = "WEIGHTED_SUM"
    """No fairness term: the weighted sum of throughput, energy, migration, locality, deadlines."""
    MAX_MIN = "MAX_MIN"
    """The least weighted cumulative normalized service over entities (Gavel's max-min)."""
    PROPORTIONAL = "PROPORTIONAL"
    """Sum of weighted logs of cumulative normalized service (proportional fairness)."""
    DRF = "DRF"
    """The least cumulative dominant share over weighted entitlement (Dominant Resource
    Fairness over GPU types and watts)."""
    FINISH_TIME = "FINISH_TIME"
    """Minus the largest weighted finish-time fairness rho (Themis)."""


LEAST_ROW_MODES = frozenset({FairnessMode.MAX_MIN, FairnessMode.DRF, FairnessMode.FINISH_TIME})
"""Modes whose F is the least entity's row (plus ``Fairness.mean_weight`` times the mean)."""


class FairnessScope(enum.Enum):
    """Whose service F compares: each job's, or each tenant queue's (its jobs together)."""

    JOB = "JOB"
    TENANT = "TENANT"


DEFAULT_FAIRNESS_HORIZON_SECONDS = 300.0
"""How long a plan's service counts when the request sets no horizon: a scheduling round."""


@dataclass(frozen=True)
class Fairness:
    """The request's fairness policy: mode, scope, and how long this plan runs."""

    mode: FairnessMode = FairnessMode.WEIGHTED_SUM
    scope: FairnessScope = FairnessScope.JOB
    horizon_seconds: float = DEFAULT_FAIRNESS_HORIZON_SECONDS
    """Seconds the plan's rates count for before the next plan: converts this plan's rates
    into service comparable with the attained service."""
    equal_share_gpus: float | None = None
    """GPUs of an equal share of the cluster (available GPUs over jobs that can run); None:
    computed from the problem. Set for a part of a larger problem (decomposition, LNS), so
    that its normalized rates are the whole problem's."""
    mean_weight: float = 0.0
    """Least-row modes (max-min, DRF, finish-time): F is the least row plus this times the
    entities' mean row, so that every entity's service counts, not only the worst's (a linear
    step towards leximin); 0: the least row alone."""

    @property
    def active(self) -> bool:
        return self.mode is not FairnessMode.WEIGHTED_SUM
