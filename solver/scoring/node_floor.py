"""The node floor (docs/objective.md, "Node floor"): what a busy node draws besides its jobs.

A node that holds a job stays up: it draws its base power (CPU, memory, fans, NICs) and the
idle power of its GPUs no job uses. With power saving on, a node that holds no job is
suspended once idle long enough, so that floor is the price of keeping the node busy, and
packing the same work onto fewer nodes saves it. The energy term charges it for the nodes
power saving may suspend (not excluded, not held by work outside the snapshot), where the
policy prices it (``PowerSaving.price_node_floor``); on other nodes the floor is drawn whatever
the plan does, and a constant changes no decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from solver.domain import Cluster, JobAssignment, JobState, Node
from solver.power_states import NodePowerState


def floor_priced(cluster: Cluster, node: Node) -> bool:
    """Whether the energy term charges `node` its floor when the plan keeps it busy."""
    policy = cluster.power_saving
    return (
        policy.enabled
        and policy.price_node_floor
        and node.name not in policy.exclude_nodes
        and (not node.unavailable_gpu_indices or node.power.state is NodePowerState.SUSPENDED)
    )


def priced_floor_nodes(cluster: Cluster) -> Mapping[str, tuple[float, float]]:
    """Per priced node: its base watts and the idle watts of one of its GPUs."""
    cached: dict[str, tuple[float, float]] | None = cluster.__dict__.get("_floor_nodes")
    if cached is None:
        cached = {
            n.name: (n.power.base_watts, cluster.gpu_types[n.gpu_type].idle_watts)
            for n in cluster.nodes
            if floor_priced(cluster, n)
        }
        object.__setattr__(cluster, "_floor_nodes", cached)
    return cached


def node_floor_watts(cluster: Cluster, assignments: Iterable[JobAssignment]) -> float:
    """The floor of every priced node a running job of the plan uses: its base watts and the
    idle watts of its GPUs that no job (whole or on a MIG instance) uses. A used GPU's idle
    power is in its job's draw (or, partitioned, charged once by the energy term)."""
    priced = priced_floor_nodes(cluster)
    if not priced:
        return 0.0
    used: dict[str, set[int]] = {}
    for a in assignments:
        if a.state is not JobState.RUNNING or a.config is None:
            continue
        for s in a.placement:
            if s.gpu_indices and s.node in priced:
                used.setdefault(s.node, set()).update(s.gpu_indices)
    total = 0.0
    for name in sorted(used):
        base, idle = priced[name]
        total += base + idle * (cluster.node(name).gpu_count - len(used[name]))
    return total


__all__ = ["floor_priced", "node_floor_watts", "priced_floor_nodes"]
