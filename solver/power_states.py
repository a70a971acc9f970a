"""Node power states as plain typed data (docs/power-states.md): Slurm's power saving.

A node is up or suspended. The operator's `PowerSaving` policy says which nodes may be
suspended and when (SuspendExcNodes, SuspendTime), how long a resume takes (ResumeTimeout) and
what a suspended node draws; a plan lists the nodes it suspends and resumes (`PowerAction`).
The rules a plan's actions must keep are here, in one place, for the solver and the checker.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class NodePowerState(enum.Enum):
    UP = "UP"
    SUSPENDED = "SUSPENDED"


@dataclass(frozen=True)
class NodePower:
    """A node's power state in the snapshot."""

    state: NodePowerState = NodePowerState.UP
    idle_seconds: float = 0.0
    """How long it has held no job."""
    base_watts: float = 0.0
    """Its draw when up beside its GPUs (CPU, memory, fans, NICs)."""


@dataclass(frozen=True)
class PowerSaving:
    """The operator's power-saving policy (disabled by default)."""

    enabled: bool = False
    exclude_nodes: frozenset[str] = field(default_factory=frozenset)
    suspend_after_seconds: float = 0.0
    resume_seconds: float = 0.0
    suspended_node_watts: float = 0.0
    spare_nodes_per_type: int = 0
    price_node_floor: bool = False
    """Whether the energy term charges each busy node it may suspend its floor (base power and
    its free GPUs' idle power): solver.scoring.node_floor. Opt-in: it saved no energy on the
    simulated scenarios (docs/evaluation.md)."""


class PowerActionKind(enum.Enum):
    SUSPEND = "SUSPEND"
    RESUME = "RESUME"


@dataclass(frozen=True)
class PowerAction:
    """One node's power-state change in a plan, and why."""

    node: str
    kind: PowerActionKind
    reason: str = ""


def may_suspend(policy: PowerSaving, name: str, power: NodePower) -> bool:
    """Whether the policy lets an up node with no job be suspended now."""
    return (
        policy.enabled
        and power.state is NodePowerState.UP
        and name not in policy.exclude_nodes
        and power.idle_seconds >= policy.suspend_after_seconds
    )


__all__ = [
    "NodePower",
    "NodePowerState",
    "PowerAction",
    "PowerActionKind",
    "PowerSaving",
    "may_suspend",
]
