"""What a job's configurations depend on in a cluster: per GPU type, its nodes, racks and clocks.

Kept apart from the enumeration (solver.perfmodel.configs) so that the vectorised model
(solver.perfmodel.grid) and the enumeration share these helpers without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from solver.domain import Cluster, GpuType, Job

CLOCK_FRACTIONS = (1.0, 0.9, 0.8, 0.7)
"""Clocks offered per GPU type, as fractions of its highest clock (snapped to a supported one).

Below about 70 % of the top clock both throughput and energy per sample get worse on the
Zeus curves (docs/performance-model.md), so lower clocks are never worth offering.
"""

MAX_PIPELINE_PARALLEL = 16


@dataclass(frozen=True)
class TypeFacts:
    """What the configurations of one GPU type depend on in this cluster."""

    gpu: GpuType
    gpus_per_node: int
    """Largest node of the type: bounds the tensor-parallel group."""
    network_bandwidth_gbps: float
    """Slowest node of the type: a configuration's throughput must hold on any node."""
    node_capacities: tuple[int, ...]
    """Available GPUs per node, descending."""
    rack_capacities: tuple[int, ...]
    """Available GPUs per rack, descending."""
    clocks_mhz: tuple[int, ...]
    """Offered clocks, descending."""


def offered_clocks(gpu: GpuType) -> tuple[int, ...]:
    """The supported clocks nearest to each of CLOCK_FRACTIONS of the top clock."""
    top = gpu.max_clock_mhz
    chosen = {
        min(gpu.sm_clocks_mhz, key=lambda f: (abs(f - frac * top), -f)) for frac in CLOCK_FRACTIONS
    }
    return tuple(sorted(chosen, reverse=True))


def type_facts(cluster: Cluster) -> dict[str, TypeFacts]:
    facts: dict[str, TypeFacts] = {}
    for name, gpu in cluster.gpu_types.items():
        nodes = [n for n in cluster.nodes if n.gpu_type == name]
        if not nodes:
            continue
        racks: dict[str, int] = {}
        for n in nodes:
            racks[n.rack] = racks.get(n.rack, 0) + n.available_gpus
        facts[name] = TypeFacts(
            gpu=gpu,
            gpus_per_node=max(n.gpu_count for n in nodes),
            network_bandwidth_gbps=min(n.network_bandwidth_gbps for n in nodes),
            node_capacities=tuple(sorted((n.available_gpus for n in nodes), reverse=True)),
            rack_capacities=tuple(sorted(racks.values(), reverse=True)),
            clocks_mhz=offered_clocks(gpu),
        )
    return facts


def min_nodes(num_gpus: int, tensor_parallel: int, node_capacities: Iterable[int]) -> int | None:
    """Fewest nodes holding num_gpus in whole tensor groups; None if the type can't hold it."""
    need = num_gpus
    for count, cap in enumerate(node_capacities, start=1):
        need -= (cap // tensor_parallel) * tensor_parallel
        if need <= 0:
            return count
    return None


def min_racks(num_gpus: int, rack_capacities: Iterable[int]) -> int:
    need = num_gpus
    count = 0
    for cap in rack_capacities:
        count += 1
        need -= cap
        if need <= 0:
            break
    return max(count, 1)


def gpu_counts(job: Job) -> list[int]:
    """GPU counts offered: powers of two within the job's limits, and the limits themselves."""
    counts = {job.min_gpus, job.max_gpus}
    p = 1
    while p <= job.max_gpus:
        if p >= job.min_gpus:
            counts.add(p)
        p *= 2
    return sorted(counts)


def divisors(n: int, limit: int) -> list[int]:
    """Divisors of n up to limit, ascending."""
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]
