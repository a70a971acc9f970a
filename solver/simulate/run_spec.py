"""One simulation of ``dsfro simulate`` as plain data: what a worker process (or a Ray task)
needs to run it, and what its kept result is known by (solver.simulate.journal)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from solver.client.connection import Connection
from solver.core.settings import SolverSettings


@dataclass(frozen=True)
class RunSpec:
    """One simulation, picklable for a worker process."""

    scenario: str | None
    """A default scenario's name, or None for the files below."""
    trace: str | None
    cluster: str | None
    power: str | None
    policy: str
    seed: int
    out: str
    overrides: dict[str, Any]
    server: str | None = None
    settings: SolverSettings = field(default_factory=SolverSettings)
    """DSFRO's solver settings (the profile's [tuning] table, DSFRO_TUNING_*)."""
    fairness_mean_weight: float = 0.0
    """The profile's [fairness] mean_weight, for DSFRO's least-row fairness variants."""
    energy_horizon_s: float = 0.0
    """Pad the run's energy with idle power to this long after the first submission (0: to its
    own span; a comparison pads every run to the longest)."""
    label: str = ""
    """The run's name in files and tables when not the policy's (DSFRO at an energy weight)."""
    connection: Connection | None = None
    """TLS and the token's source for `server` (the token itself is read where the run runs)."""


__all__ = ["RunSpec"]
