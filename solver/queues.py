"""Tenant queues and their quotas as plain typed data (docs/fairness.md); re-exported by
``solver.domain``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

POWER = "power"
"""The resource of a quota on watts; every other quota resource is a GPU type."""
DEFAULT_QUEUE = "default"
"""The queue of jobs without a tenant, when the snapshot declares one of that name."""


@dataclass(frozen=True)
class Quota:
    """One resource of a tenant queue's quota, in Kueue's meaning (GPUs, or W for POWER)."""

    nominal: float
    borrowing_limit: float | None = None
    """How far above nominal the queue may go on its cohort's idle quota; None: no limit but
    the cohort's."""
    lending_limit: float | None = None
    """How much of nominal the queue lends to its cohort; None: all of it."""

    @property
    def guaranteed(self) -> float:
        """The part of nominal never lent: the cohort cannot use it, even idle."""
        if self.lending_limit is None:
            return 0.0
        return max(self.nominal - self.lending_limit, 0.0)


@dataclass(frozen=True)
class AttainedService:
    """Service received so far (fairness over rounds is judged on it)."""

    gpu_seconds: float = 0.0
    normalized_seconds: float = 0.0


@dataclass(frozen=True)
class TenantQueue:
    """A tenant's queue: Kueue's ClusterQueue, Volcano's queue, a Slurm account's GrpTRES.

    A GPU type the queue lists no quota for has nominal 0 (it may still borrow it within a
    cohort); watts without a POWER quota are not limited."""

    name: str
    cohort: str = ""
    weight: float = 1.0
    quotas: Mapping[str, Quota] = field(default_factory=dict)
    attained: AttainedService = AttainedService()

    def quota(self, resource: str) -> Quota | None:
        """The quota on `resource`: None when it is not limited (watts without a quota)."""
        q = self.quotas.get(resource)
        if q is None and resource != POWER:
            return Quota(0.0)
        return q
