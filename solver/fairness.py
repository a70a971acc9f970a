"""A request's fairness policy as plain data (re-exported by ``solver.domain``):
docs/objective.md, "Fairness", defines each mode."""

from __future__ import annotations

import enum
from collections.abc import Mapping
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
    """The least dominant share (an entity's largest share of one resource: a GPU type's
    GPUs, the budget's watts) over its weighted fair share, at most 1 (Dominant Resource
    Fairness, memoryless)."""
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


def fair_entitlements(demand: Mapping[str, float], weight: Mapping[str, float]) -> dict[str, float]:
    """Weighted max-min fair shares of one resource (capacity 1) among tenants demanding
    `demand` (shares of it): progressive filling, so a tenant asking less than its weighted
    share gets what it asks and the rest is shared by the others in proportion to weight."""
    out: dict[str, float] = {}
    left, active = 1.0, dict(demand)
    while active and left > 1e-12:
        total = sum(weight.get(t, 1.0) for t in active)
        level = left / total
        capped = {t: d for t, d in active.items() if d <= level * weight.get(t, 1.0)}
        if not capped:
            for t in active:
                out[t] = level * weight.get(t, 1.0)
            return out
        for t, d in capped.items():
            out[t] = d
            left -= d
            del active[t]
    for t in active:
        out[t] = 0.0
    return out
