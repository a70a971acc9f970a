"""Power-budget arithmetic that every solver path shares: what is left of a budget once every
node draws its floor, and what a configuration draws above that.

A node draws a floor whether a job runs on it or not: up, its base power (``Node.base_watts``)
and every GPU's idle power (unavailable ones too: they are installed); suspended, the power
saving policy's ``suspended_node_watts`` instead. So a budget's room for jobs is the budget
less the floor of its nodes, a running configuration costs its watts less the idle power of
the GPUs it uses, and waking a suspended node costs the difference of its floors
(``resume_watts``). The checker (solver.scoring.checker) re-derives these on its own, on
purpose.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from solver.domain import Cluster, Config, JobAssignment, Node, busy_nodes
from solver.power_states import NodePowerState


def up_floor_watts(cluster: Cluster, node: Node) -> float:
    """What `node` draws up with no job: its base power and its GPUs' idle power."""
    return node.power.base_watts + node.gpu_count * cluster.gpu_types[node.gpu_type].idle_watts


def node_floor_watts(cluster: Cluster, node: Node) -> float:
    """What `node` draws with no job, in its power state of the snapshot."""
    if node.power.state is NodePowerState.SUSPENDED:
        return cluster.power_saving.suspended_node_watts
    return up_floor_watts(cluster, node)


def resume_watts(cluster: Cluster, node: Node) -> float:
    """What waking suspended `node` adds to the cluster's floor."""
    return up_floor_watts(cluster, node) - node_floor_watts(cluster, node)


def woken_watts(cluster: Cluster, assignments: Iterable[JobAssignment]) -> float:
    """What the plan adds to the floor by running jobs on suspended nodes (each woken once)."""
    asleep = {n.name: n for n in cluster.nodes if n.power.state is NodePowerState.SUSPENDED}
    if not asleep:
        return 0.0
    used = busy_nodes(assignments) & asleep.keys()
    return sum(resume_watts(cluster, asleep[name]) for name in sorted(used))


def floor_watts(cluster: Cluster) -> float:
    """Floor of every node of the cluster."""
    cached: float | None = cluster.__dict__.get("_floor_watts")
    if cached is None:
        # Correctly rounded (math.fsum): the MILP's rows are floored in milliwatts, so a last
        # bit of the sum is part of the model, and sum() rounds otherwise from Python 3.12 on.
        cached = math.fsum(node_floor_watts(cluster, n) for n in cluster.nodes)
        object.__setattr__(cluster, "_floor_watts", cached)
    return cached


def rack_floor_watts(cluster: Cluster) -> Mapping[str, float]:
    """Floor of every node, per rack."""
    cached: dict[str, float] | None = cluster.__dict__.get("_rack_floor_watts")
    if cached is None:
        per_rack: dict[str, list[float]] = {}
        for n in cluster.nodes:
            per_rack.setdefault(n.rack, []).append(node_floor_watts(cluster, n))
        cached = {rack: math.fsum(floors) for rack, floors in per_rack.items()}  # as above
        object.__setattr__(cluster, "_rack_floor_watts", cached)
    return cached


def power_room(cluster: Cluster) -> float | None:
    """Watts the cluster budget leaves for jobs above the floor; None without a budget."""
    budget = cluster.power_budget_watts
    return None if budget is None else budget - floor_watts(cluster)


def rack_power_room(cluster: Cluster) -> dict[str, float]:
    """Watts each rack budget leaves for jobs above the floor (racks with a budget only)."""
    idle = rack_floor_watts(cluster)
    return {r: b - idle.get(r, 0.0) for r, b in cluster.rack_power_budgets_watts.items()}


def extra_watts(cluster: Cluster, config: Config) -> float:
    """What `config` draws above the idle power of its GPUs (a slice configuration's watts
    are already above idle: its GPU's idle power is drawn once, whatever its instances run)."""
    if config.mig_profile:
        return config.watts
    return config.watts - cluster.gpu_types[config.gpu_type].idle_watts * config.num_gpus


def extra_watts_per_gpu(cluster: Cluster, config: Config) -> float:
    """The same per GPU (racks get a job's draw in proportion to its GPUs there)."""
    if config.mig_profile:
        return config.watts
    return config.watts / config.num_gpus - cluster.gpu_types[config.gpu_type].idle_watts


def partitioned_gpu_watts(cluster: Cluster, gpu_type: str, slices: Iterable[Config]) -> float:
    """What a GPU in MIG mode draws: its idle power once, and each instance's job above it
    (the jobs of one GPU share its SM clock: solver.search.slices picks one per GPU)."""
    return cluster.gpu_types[gpu_type].idle_watts + sum(c.watts for c in slices)


__all__ = [
    "extra_watts",
    "extra_watts_per_gpu",
    "floor_watts",
    "node_floor_watts",
    "partitioned_gpu_watts",
    "power_room",
    "rack_floor_watts",
    "rack_power_room",
    "resume_watts",
    "up_floor_watts",
    "woken_watts",
]
