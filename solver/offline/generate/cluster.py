"""The cluster of an instance: node mixes, nodes by kind in racks, unavailable GPUs, and the
allocator that places the running jobs (``_Cluster``)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import GpuType
from solver.offline.generate.data import pai_node_kinds
from solver.offline.generate.spec import InstanceSpec, NodeKind

# Node network bandwidth (Gbit/s) typical for each GPU generation: that of the largest AWS EC2
# instance with these GPUs. P100 had no EC2 instance and takes its V100-16GB contemporary's.
NETWORK_GBPS: Mapping[str, float] = {
    "K80": 25.0,  # p2.16xlarge
    "P100-16GB": 25.0,  # assumed as p3.16xlarge
    "V100-16GB": 25.0,  # p3.16xlarge
    "V100-32GB": 100.0,  # p3dn.24xlarge
    "T4": 50.0,  # g4dn.12xlarge
    "A10": 100.0,  # g5.48xlarge (A10G)
    "L40S": 400.0,  # g6e.48xlarge
    "A100-40GB": 400.0,  # p4d.24xlarge
    "A100-80GB": 400.0,  # p4de.24xlarge
    "H100-80GB": 3200.0,  # p5.48xlarge
    "H200": 3200.0,  # p5e.48xlarge
}


MODERN_KINDS = (
    NodeKind("A100-80GB", 8, 1.0),
    NodeKind("H100-80GB", 8, 1.0),
    NodeKind("H200", 8, 1.0),
    NodeKind("L40S", 8, 1.0),
)


def hybrid_node_kinds() -> tuple[NodeKind, ...]:
    """PAI's 8-GPU V100 servers next to current A100/H100 ones, a quarter of the nodes each."""
    v100 = [NodeKind(k.gpu_type, k.gpus_per_node, 1.0) for k in pai_node_kinds()]
    return (
        *[k for k in v100 if k.gpus_per_node == 8],
        NodeKind("A100-80GB", 8, 1.0),
        NodeKind("H100-80GB", 8, 1.0),
    )


HETERO_POWER_KINDS = (
    NodeKind("V100-16GB", 8, 1.0),
    NodeKind("P100-16GB", 4, 1.0),
    NodeKind("K80", 4, 1.0),
    NodeKind("T4", 4, 1.0),
    NodeKind("A10", 4, 1.0),
)
"""Five GPU generations, datacenter to consumer-grade dies, a fifth of the nodes each (a
generator choice). V100-16GB, P100-16GB and K80 because Gavel measured all three, so one
workload's measured speed differs by type (and by a different ratio per workload); T4 because
Pollux measured it on 4-GPU nodes, so its packed placements are the measured ones; A10 (GA102,
the die of the consumer RTX 30-series) has no public throughput measurement and runs model jobs
only. V100 servers hold 8 GPUs (as AWS p3.16xlarge), the others 4."""


MIXES: Mapping[str, Callable[[], tuple[NodeKind, ...]]] = {
    "hetero-power": lambda: HETERO_POWER_KINDS,
    "hybrid": hybrid_node_kinds,
    "pai": pai_node_kinds,
    "modern": lambda: MODERN_KINDS,
}


def node_counts(kinds: Sequence[NodeKind], num_nodes: int) -> list[int]:
    """Split num_nodes by the kinds' shares (largest remainder, ties to the earlier kind)."""
    total = sum(k.share for k in kinds)
    exact = [num_nodes * k.share / total for k in kinds]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(kinds)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: num_nodes - sum(counts)]:
        counts[i] += 1
    return counts


@dataclass
class _Cluster:
    nodes: list[pb.Node]
    free: dict[str, list[int]]
    """Available, not yet allocated GPU indices of each node."""

    def __post_init__(self) -> None:
        self._by_type: dict[str, list[pb.Node]] = defaultdict(list)
        for n in self.nodes:
            self._by_type[n.gpu_type].append(n)
        self._pool = {
            t: sum(n.gpu_count - len(n.unavailable_gpu_indices) for n in ns)
            for t, ns in self._by_type.items()
        }
        self._free_count = {
            t: sum(len(self.free[n.name]) for n in ns) for t, ns in self._by_type.items()
        }

    def pool(self, gpu_type: str) -> int:
        """Available GPUs of a type (before current allocations)."""
        return self._pool.get(gpu_type, 0)

    def max_gpus_per_node(self, gpu_type: str) -> int:
        return max(n.gpu_count for n in self._by_type[gpu_type])

    def types(self) -> list[str]:
        return sorted(self._by_type)

    def free_of(self, gpu_type: str) -> int:
        return self._free_count.get(gpu_type, 0)

    def place(self, gpu_type: str, count: int, tp: int) -> list[pb.GpuSlice] | None:
        """Take ``count`` free GPUs of a type, a multiple of ``tp`` on each node; None if none fit.

        One node if any can hold all (best fit), else the nodes with the most free GPUs first.
        """
        nodes = [n.name for n in self._by_type[gpu_type]]
        usable = {n: len(self.free[n]) // tp * tp for n in nodes}
        whole = [n for n in nodes if usable[n] >= count]
        if whole:
            chosen = [min(whole, key=lambda n: (usable[n], n))]
        else:
            chosen = sorted(nodes, key=lambda n: (-usable[n], n))
        taken: list[pb.GpuSlice] = []
        left = count
        for n in chosen:
            if left == 0:
                break
            k = min(usable[n], left)
            if k:
                taken.append(pb.GpuSlice(node=n, gpu_indices=self.free[n][:k]))
                left -= k
        if left:
            return None
        for s in taken:
            self.free[s.node] = self.free[s.node][len(s.gpu_indices) :]
        self._free_count[gpu_type] -= count
        return sorted(taken, key=lambda s: s.node)


def build_instance_cluster(
    spec: InstanceSpec, catalog: Mapping[str, GpuType], rng: np.random.Generator
) -> _Cluster:
    nodes: list[pb.Node] = []
    rack = 0
    for kind, count in zip(
        spec.node_kinds, node_counts(spec.node_kinds, spec.num_nodes), strict=True
    ):
        if kind.gpu_type not in catalog:
            raise ValueError(f"GPU type {kind.gpu_type!r} is not in the catalog")
        if kind.gpu_type not in NETWORK_GBPS:
            raise ValueError(f"no network bandwidth chosen for {kind.gpu_type!r}")
        slug = kind.gpu_type.lower()
        for i in range(count):
            if i and i % kind.nodes_per_rack == 0:
                rack += 1
            name = f"{slug}-{i:03d}"
            nodes.append(
                pb.Node(
                    name=name,
                    gpu_type=kind.gpu_type,
                    gpu_count=kind.gpus_per_node,
                    rack=f"rack-{rack:02d}",
                    network_bandwidth_gbps=NETWORK_GBPS[kind.gpu_type],
                )
            )
        if count:
            rack += 1
    total = sum(n.gpu_count for n in nodes)
    offsets = np.cumsum([0] + [n.gpu_count for n in nodes])
    down = rng.choice(total, size=round(spec.unavailable_share * total), replace=False)
    for g in sorted(int(x) for x in down):
        i = int(np.searchsorted(offsets, g, side="right")) - 1
        nodes[i].unavailable_gpu_indices.append(g - int(offsets[i]))
    free = {
        n.name: [i for i in range(n.gpu_count) if i not in set(n.unavailable_gpu_indices)]
        for n in nodes
    }
    return _Cluster(nodes, free)
