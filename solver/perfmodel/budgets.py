"""Power-budget arithmetic that every solver path shares: what is left of a budget once every
installed GPU draws its idle power, and what a configuration draws above that.

Every GPU draws at least its idle power whether a job runs on it or not (unavailable ones too:
they are installed), so a budget's room for jobs is the budget less the idle draw of its GPUs,
and a running configuration costs its watts less the idle power of the GPUs it uses. The
checker (solver.scoring.checker) re-derives these on its own, on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from solver.domain import Cluster, Config


def idle_watts(cluster: Cluster) -> float:
    """Idle draw of every installed GPU of the cluster."""
    cached: float | None = cluster.__dict__.get("_idle_watts")
    if cached is None:
        # Node by node, in order: the MILP's rows are floored in milliwatts, so the summation
        # order is part of the model.
        types = cluster.gpu_types
        cached = sum(n.gpu_count * types[n.gpu_type].idle_watts for n in cluster.nodes)
        object.__setattr__(cluster, "_idle_watts", cached)
    return cached


def rack_idle_watts(cluster: Cluster) -> Mapping[str, float]:
    """Idle draw of every installed GPU, per rack."""
    cached: dict[str, float] | None = cluster.__dict__.get("_rack_idle_watts")
    if cached is None:
        cached = {}
        for n in cluster.nodes:
            idle = n.gpu_count * cluster.gpu_types[n.gpu_type].idle_watts
            cached[n.rack] = cached.get(n.rack, 0.0) + idle
        object.__setattr__(cluster, "_rack_idle_watts", cached)
    return cached


def power_room(cluster: Cluster) -> float | None:
    """Watts the cluster budget leaves for jobs above idle; None without a budget."""
    budget = cluster.power_budget_watts
    return None if budget is None else budget - idle_watts(cluster)


def rack_power_room(cluster: Cluster) -> dict[str, float]:
    """Watts each rack budget leaves for jobs above idle (racks with a budget only)."""
    idle = rack_idle_watts(cluster)
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
    "idle_watts",
    "partitioned_gpu_watts",
    "power_room",
    "rack_idle_watts",
    "rack_power_room",
]
