"""How the power margin and the GPU power limits are sized (docs/objective.md, "Power margin").

Apart from ``solver.perfmodel.guard`` because the settings read it and the client install,
which has no numpy, reads the settings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GuardParams:
    """How the margin and the limits are sized (``SolverSettings.power_guard``)."""

    z: float = 2.5
    """Standard deviations of the planned draw kept below the budget (2.5: a one-sided normal
    tail of 0.6 %); 0 turns the margin off (the budget alone binds)."""
    model_uncertainty: float = 0.15
    """Relative standard deviation of a model-only power prediction."""
    measured_uncertainty: float = 0.05
    """... of a measured profile's watts."""
    observed_uncertainty: float = 0.03
    """... of a job whose current allocation carries its observed watts."""
    limit_z: float = 2.0
    """A job's power limit sits this many of its standard deviations above its mean draw."""
