"""Node power states between the wire and the domain (solver.power_states)."""

from __future__ import annotations

from collections.abc import Iterable

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.validation.common import duration_seconds
from solver.power_states import (
    NodePower,
    NodePowerState,
    PowerAction,
    PowerActionKind,
    PowerSaving,
)

_KINDS = {
    PowerActionKind.SUSPEND: pb.POWER_ACTION_KIND_SUSPEND,
    PowerActionKind.RESUME: pb.POWER_ACTION_KIND_RESUME,
}


def node_power_from_proto(n: pb.Node) -> NodePower:
    state = (
        NodePowerState.SUSPENDED
        if n.power_state == pb.NODE_POWER_STATE_SUSPENDED
        else NodePowerState.UP
    )
    idle = duration_seconds(n.idle_for) if n.HasField("idle_for") else 0.0
    base = n.base_watts if n.HasField("base_watts") else 0.0
    return NodePower(state, idle, base)


def power_saving_from_proto(c: pb.ClusterSnapshot) -> PowerSaving:
    if not c.HasField("power_saving"):
        return PowerSaving()
    p = c.power_saving
    return PowerSaving(
        enabled=p.enabled,
        exclude_nodes=frozenset(p.exclude_nodes),
        suspend_after_seconds=duration_seconds(p.suspend_after),
        resume_seconds=duration_seconds(p.resume_time),
        suspended_node_watts=p.suspended_node_watts,
        spare_nodes_per_type=p.spare_nodes_per_type,
        price_node_floor=p.price_node_floor,
    )


def actions_to_proto(actions: Iterable[PowerAction]) -> list[pb.NodePowerAction]:
    return [pb.NodePowerAction(node=a.node, kind=_KINDS[a.kind], reason=a.reason) for a in actions]


def actions_from_proto(plan: pb.Plan) -> tuple[PowerAction, ...]:
    """A caller's (validated) plan's power actions."""
    back = {v: k for k, v in _KINDS.items()}
    return tuple(PowerAction(a.node, back[a.kind], a.reason) for a in plan.power_actions)


def power_limits_from_proto(plan: pb.Plan) -> dict[str, float]:
    """The per-GPU power limits a (validated) plan sets, by job."""
    return {a.job: a.power_limit_watts for a in plan.assignments if a.HasField("power_limit_watts")}
