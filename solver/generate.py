"""Benchmark instance generator: seeded, realistic ``SolveRequest`` snapshots from public data.

Clusters follow the Alibaba PAI 2020 machine spec (``data/alibaba``) or a mix of current 8-GPU
servers; GPU figures come from the catalog (``models/gpus.json``). Job sizes, durations and
tenants are drawn from the Philly trace (``data/philly``). A share of the jobs carry measured
throughput profiles (Gavel on K80/P100/V100, Pollux on T4); the others carry a public
transformer architecture for the analytic model. ``instances/README.md`` states every
assumption. The JSON form of the request is the instance file format::

    python -m solver.generate --nodes 128 --jobs 256 --seed 1 --out instances/medium.json
    python -m solver.generate --tiny instances
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

import numpy as np
from google.protobuf import json_format

from solver import perf
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.catalog import load_architectures, load_gpu_catalog
from solver.convert import gpu_type_to_proto, model_spec_to_proto
from solver.domain import GpuType, ModelSpec, Shape

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

BYTES_PER_PARAMETER = 16
"""Training state per parameter with Adam: weights, gradients and two moments (ZeRO, 2020)."""
STATE_MEMORY_SHARE = 0.5
"""Model jobs are sized so that their training state fills at most this share of GPU memory."""
DEADLINE_TIGHTNESS = (0.1, 0.6)
"""Remaining samples = U(lo, hi) x reference rate x time to deadline (a generator choice)."""
ELASTIC_SCALE_DOWN = 4
"""An elastic job accepts down to max_gpus // 4 GPUs (a generator choice)."""

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

# ---------------------------------------------------------------- spec


@dataclass(frozen=True)
class NodeKind:
    """One kind of server: its GPU type, GPUs per server, relative share of the nodes."""

    gpu_type: str
    gpus_per_node: int
    share: float
    nodes_per_rack: int = 8


@dataclass(frozen=True)
class InstanceSpec:
    """Everything that determines an instance; the same spec always gives the same bytes."""

    name: str
    """A label for the instance (not written into the request)."""
    num_nodes: int
    num_jobs: int
    node_kinds: tuple[NodeKind, ...]
    seed: int = 0
    profile_share: float = 0.5
    """Share of jobs with a measured ThroughputProfile; the rest get a ModelSpec."""
    running_share: float = 0.3
    """Share of jobs that try to get a current allocation (if their GPUs are free)."""
    non_preemptible_share: float = 0.1
    """Share of the running jobs that may not be moved (at least one if any runs)."""
    deadline_share: float = 0.2
    rigid_share: float = 0.5
    """Share of jobs with min_gpus == max_gpus."""
    restricted_share: float = 0.25
    """Share of model jobs whose allowed GPU types are a strict subset of the cluster's."""
    unavailable_share: float = 0.01
    """Share of all GPUs marked unavailable."""
    power_budget_fraction: float | None = None
    """Cluster GPU power budget as a fraction of all GPUs at TDP; None: no budget."""
    time_budget_seconds: float = 10.0
    philly_view: str = "snapshot"
    """How GPU counts are weighted: "snapshot" (by job duration: the jobs present at one
    moment) or "arrivals" (by job count: the jobs as submitted)."""

    def __post_init__(self) -> None:
        if self.num_nodes < 1 or self.num_jobs < 0:
            raise ValueError("num_nodes must be >= 1 and num_jobs >= 0")
        if not self.node_kinds or any(k.share < 0 or k.gpus_per_node < 1 for k in self.node_kinds):
            raise ValueError("node_kinds must be non-empty with shares >= 0 and GPUs >= 1")
        for share in (
            self.profile_share,
            self.running_share,
            self.non_preemptible_share,
            self.deadline_share,
            self.rigid_share,
            self.restricted_share,
            self.unavailable_share,
        ):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"share {share} not in [0, 1]")
        if self.philly_view not in ("snapshot", "arrivals"):
            raise ValueError("philly_view must be 'snapshot' or 'arrivals'")
        if self.power_budget_fraction is not None and not 0 < self.power_budget_fraction <= 1:
            raise ValueError("power_budget_fraction must be in (0, 1]")


PAI_TYPES: Mapping[str, str] = {
    "P100": "P100-16GB",
    "T4": "T4",
    "V100": "V100-16GB",
    "V100M32": "V100-32GB",
}
"""Alibaba PAI GPU type -> catalog name (MISC and CPU machines are left out)."""


@cache
def pai_node_kinds() -> tuple[NodeKind, ...]:
    """Node kinds in the proportions of PAI's 1,897 machines, with their GPUs per machine."""
    counts: Counter[str] = Counter()
    gpus: dict[str, Counter[int]] = defaultdict(Counter)
    with (DATA_DIR / "alibaba" / "pai2020_machine_spec.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            t = row["gpu_type"]
            if t in PAI_TYPES:
                counts[t] += 1
                gpus[t][int(row["cap_gpu"])] += 1
    kinds = []
    for t in sorted(counts, key=lambda t: PAI_TYPES[t]):
        per_node = gpus[t].most_common(1)[0][0]
        kinds.append(NodeKind(PAI_TYPES[t], per_node, float(counts[t]), 8 if per_node >= 8 else 16))
    return tuple(kinds)


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


MIXES: Mapping[str, Callable[[], tuple[NodeKind, ...]]] = {
    "hybrid": hybrid_node_kinds,
    "pai": pai_node_kinds,
    "modern": lambda: MODERN_KINDS,
}

# ---------------------------------------------------------------- workloads


MODEL_ARCHITECTURES = (
    "bert-large",
    "gpt3-1.3b",
    "gpt3-2.7b",
    "gpt3-6.7b",
    "llama2-7b",
    "llama2-13b",
)
"""Architectures of ``models/architectures.json`` that model jobs draw from."""


def architectures() -> list[tuple[str, ModelSpec]]:
    """The model jobs' architectures (name, spec), in MODEL_ARCHITECTURES order."""
    catalog = load_architectures()
    return [(name, catalog[name]) for name in MODEL_ARCHITECTURES]


# Parameters of the measured networks, for memory_per_gpu_gib (see instances/README.md).
GAVEL_PARAMETERS: Mapping[str, float] = {
    "ResNet-18": 11_173_962,  # CIFAR-10 ResNet-18 (kuangliu/pytorch-cifar), as Gavel trains
    "ResNet-50": 25_557_032,  # torchvision resnet50
    "Transformer": 65e6,  # Vaswani et al. 2017, base model (upper bound: Multi30k vocabulary)
    "LM": 13_987_678,  # computed: 2-layer LSTM 200/200, untied, WikiText-2 vocabulary 33,278
    "Recommendation": 8_063_708,  # computed: autoencoder 20,108 items -> 200 -> 20,108
}
POLLUX_PARAMETERS: Mapping[str, float] = {
    "bert": 110e6,  # BERT-base (Devlin et al. 2019), fine-tuned on SQuAD
    "cifar10": 11_173_962,  # ResNet-18 (kuangliu/pytorch-cifar)
    "imagenet": 25_557_032,  # torchvision resnet50
    "ncf": 1_602_657,  # computed: NeuMF, factors 32, 3 MLP layers, ml-1m 6,040 x 3,706
    "yolov3": 61.9e6,  # YOLOv3 (Darknet-53), 80-class head; the VOC head is slightly smaller
}
GAVEL_TYPES: Mapping[str, tuple[str, ...]] = {
    "k80": ("K80",),
    "p100": ("P100-16GB",),
    "v100": ("V100-16GB", "V100-32GB"),
}
"""Gavel's GPU names -> catalog types its measurements stand for."""


@dataclass(frozen=True)
class MeasuredPoint:
    gpu_type: str
    num_gpus: int
    samples_per_second: float


@dataclass(frozen=True)
class MeasuredWorkload:
    """One network at one batch size, with its measured points on catalog GPU types."""

    source: str
    network: str
    batch: str
    parameters: float
    points: tuple[MeasuredPoint, ...]

    @property
    def label(self) -> str:
        return f"{self.source}-{self.network.lower()}-{self.batch}"


def monotone(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """Keep the (num_gpus, samples/s) points that beat every point with fewer GPUs.

    Zero entries (runs that did not complete) and points slower than a smaller GPU count of
    the same type and batch size (measurement noise; no scheduler would pick them) are dropped.
    """
    kept: list[tuple[int, float]] = []
    for n, sps in sorted(points):
        if sps > 0 and (not kept or sps > kept[-1][1]):
            kept.append((n, sps))
    return kept


@cache
def _gavel_rows() -> tuple[tuple[str, str, int, int, float], ...]:
    rows = []
    with (DATA_DIR / "gavel" / "isolated_throughputs.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            if r["consolidated"] == "1" and r["model"] in GAVEL_PARAMETERS:
                rows.append(
                    (
                        r["gpu_type"],
                        r["model"],
                        int(r["batch_size"]),
                        int(r["num_gpus"]),
                        float(r["steps_per_sec"]),
                    )
                )
    return tuple(rows)


def gavel_workloads(types: Sequence[str]) -> list[MeasuredWorkload]:
    """Gavel's consolidated isolated runs on catalog types: samples/s = steps/s x batch."""
    series: dict[tuple[str, int, str], list[tuple[int, float]]] = defaultdict(list)
    for gavel_type, model, batch, n, steps in _gavel_rows():
        series[(model, batch, gavel_type)].append((n, steps * batch))
    out = []
    for model, batch in sorted({(m, b) for m, b, _ in series}):
        points: list[MeasuredPoint] = []
        for gavel_type, targets in GAVEL_TYPES.items():
            for n, sps in monotone(series.get((model, batch, gavel_type), [])):
                points.extend(MeasuredPoint(t, n, sps) for t in targets if t in types)
        if points:
            out.append(
                MeasuredWorkload(
                    "gavel", model, f"bs{batch}", GAVEL_PARAMETERS[model], tuple(points)
                )
            )
    return out


def packed_placement(num_gpus: int, gpus_per_node: int) -> str:
    """Pollux's id of ``num_gpus`` packed on nodes of ``gpus_per_node``: e.g. 8 on 4 -> "44"."""
    parts = [gpus_per_node] * (num_gpus // gpus_per_node)
    if num_gpus % gpus_per_node:
        parts.append(num_gpus % gpus_per_node)
    rotations = ["".join(map(str, parts[i:] + parts[:i])) for i in range(len(parts))]
    return min(rotations)


def pollux_workloads(gpus_per_node: int, counts: Sequence[int]) -> list[MeasuredWorkload]:
    """Pollux's T4 runs at packed placements: samples/s = local batch x GPUs / step time."""
    out = []
    for app in sorted(POLLUX_PARAMETERS):
        times: dict[tuple[str, int], float] = {}
        with (DATA_DIR / "pollux" / app / "placements.csv").open(newline="") as f:
            for r in csv.DictReader(f):
                times[(r["placement"], int(r["local_bsz"]))] = float(r["step_time"])
        for lbs in sorted({b for _, b in times}):
            raw = []
            for n in counts:
                key = (packed_placement(n, gpus_per_node), lbs)
                if key in times:
                    raw.append((n, lbs * n / times[key]))
            points = tuple(MeasuredPoint("T4", n, sps) for n, sps in monotone(raw))
            if points:
                out.append(
                    MeasuredWorkload("pollux", app, f"lbs{lbs}", POLLUX_PARAMETERS[app], points)
                )
    return out


# ---------------------------------------------------------------- Philly


@dataclass(frozen=True)
class Philly:
    """The Philly extracts: GPU-count histogram, duration quantiles per count, tenants."""

    jobs: Mapping[int, int]
    """Jobs that asked for each GPU count (the distribution over arrivals)."""
    job_seconds: Mapping[int, float]
    """Summed durations per GPU count (the distribution over a snapshot of present jobs)."""
    durations: Mapping[int, tuple[tuple[float, ...], tuple[float, ...]]]
    tenants: Mapping[str, int]

    def draw_num_gpus(self, rng: np.random.Generator, allowed: Sequence[int], view: str) -> int:
        """A GPU count of the trace, restricted to ``allowed``; ``view``: snapshot or arrivals."""
        weight = self.job_seconds if view == "snapshot" else self.jobs
        counts = sorted(n for n in set(allowed) if n in weight)
        if not counts:
            raise ValueError(f"no Philly GPU count among {sorted(set(allowed))}")
        w = np.array([weight[n] for n in counts], dtype=float)
        return counts[int(rng.choice(len(counts), p=w / w.sum()))]

    def draw_duration(self, rng: np.random.Generator, num_gpus: int) -> float:
        """A duration (s) of a job of ``num_gpus`` GPUs by inverse CDF of the quantiles."""
        q, v = self.durations[num_gpus]
        return float(np.interp(rng.random(), q, v))

    def draw_tenant(self, rng: np.random.Generator) -> str:
        names = sorted(self.tenants)
        weights = np.array([self.tenants[t] for t in names], dtype=float)
        return names[int(rng.choice(len(names), p=weights / weights.sum()))]


@cache
def load_philly() -> Philly:
    d = DATA_DIR / "philly"
    with (d / "num_gpus.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    quant: dict[int, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    with (d / "durations.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            qs, vs = quant[int(r["num_gpus"])]
            qs.append(float(r["quantile"]))
            vs.append(float(r["duration_s"]))
    with (d / "tenants.csv").open(newline="") as f:
        tenants = {r["cluster"]: int(r["jobs"]) for r in csv.DictReader(f)}
    return Philly(
        {int(r["num_gpus"]): int(r["jobs"]) for r in rows},
        {int(r["num_gpus"]): float(r["job_seconds"]) for r in rows},
        {n: (tuple(q), tuple(v)) for n, (q, v) in quant.items()},
        tenants,
    )


# ---------------------------------------------------------------- conversion helpers


def state_gib(parameters: float) -> float:
    """Training state (weights, gradients, Adam moments) of a model, in GiB."""
    return parameters * BYTES_PER_PARAMETER / 2**30


def model_parallel_degree(arch: ModelSpec, gpu: GpuType) -> int:
    """Fewest GPUs (a power of two) whose memory holds the state within STATE_MEMORY_SHARE."""
    m = 1
    while state_gib(arch.parameters) / m > STATE_MEMORY_SHARE * gpu.memory_gib:
        m *= 2
    return m


def running_shape(
    arch: ModelSpec, gpu: GpuType, num_gpus: int, degree: int, cluster: _Cluster
) -> Shape | None:
    """A shape a job of `num_gpus` could be running in: the fewest model-parallel GPUs (from
    `degree` up) whose split the performance model accepts (memory included), tensor groups
    filling as much of a node as they can; None if no split of that size fits."""
    gpus_per_node = cluster.max_gpus_per_node(gpu.name)
    network = NETWORK_GBPS[gpu.name]
    m = degree
    while m <= num_gpus:
        if num_gpus % m == 0:
            tp = 1
            while tp * 2 <= min(m, gpus_per_node):
                tp *= 2
            shape = Shape(gpu.name, num_gpus // m, tp, m // tp)
            est = perf.estimate(
                arch,
                gpu,
                shape,
                gpu.max_clock_mhz,
                gpus_per_node=gpus_per_node,
                network_bandwidth_gbps=network,
            )
            if est is not None:
                return shape
        m *= 2
    return None


def profile_points(
    w: MeasuredWorkload, lo: int, hi: int, catalog: Mapping[str, GpuType]
) -> list[pb.ProfilePoint]:
    """The workload's points with lo <= num_gpus <= hi, at the default (highest) clock."""
    mem = round(state_gib(w.parameters), 4)
    return [
        pb.ProfilePoint(
            gpu_type=p.gpu_type,
            num_gpus=p.num_gpus,
            tensor_parallel=1,
            pipeline_parallel=1,
            sm_clock_mhz=catalog[p.gpu_type].max_clock_mhz,
            samples_per_second=p.samples_per_second,
            watts=p.num_gpus * catalog[p.gpu_type].tdp_watts,
            memory_per_gpu_gib=mem,
        )
        for p in sorted(w.points, key=lambda p: (p.gpu_type, p.num_gpus))
        if lo <= p.num_gpus <= hi
    ]


def to_json(request: pb.SolveRequest) -> str:
    """The instance file text: canonical JSON with the proto's field names, indent 1."""
    return json_format.MessageToJson(request, preserving_proto_field_name=True, indent=1) + "\n"


# ---------------------------------------------------------------- cluster


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


def _build_cluster(
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


# ---------------------------------------------------------------- jobs


T = TypeVar("T")


def _pick(rng: np.random.Generator, items: Sequence[T]) -> T:
    return items[int(rng.integers(len(items)))]


def _min_gpus(rng: np.random.Generator, spec: InstanceSpec, n: int, floor: int) -> int:
    if rng.random() < spec.rigid_share:
        return n
    return min(n, max(floor, n // ELASTIC_SCALE_DOWN, 1))


def _profile_job(
    rng: np.random.Generator,
    spec: InstanceSpec,
    cluster: _Cluster,
    catalog: Mapping[str, GpuType],
    philly: Philly,
    workloads: Sequence[MeasuredWorkload],
    job: pb.Job,
) -> float:
    """Fill a profile job; returns its reference rate (best measured samples/s in range)."""
    networks = sorted({(w.source, w.network) for w in workloads})
    source, network = _pick(rng, networks)
    w = _pick(rng, [w for w in workloads if (w.source, w.network) == (source, network)])
    counts = [p.num_gpus for p in w.points if p.num_gpus <= cluster.pool(p.gpu_type)]
    n = philly.draw_num_gpus(rng, counts, spec.philly_view)
    lo = _min_gpus(rng, spec, n, min(counts))
    points = profile_points(w, lo, n, catalog)
    job.name = f"{job.name}-{w.label}"
    job.profile.points.extend(points)
    job.min_gpus, job.max_gpus = lo, n
    if rng.random() < spec.running_share:
        free = [p for p in points if p.num_gpus <= cluster.free_of(p.gpu_type)]
        if free:
            p = _pick(rng, free)
            placement = cluster.place(p.gpu_type, p.num_gpus, 1)
            if placement is not None:
                job.current_allocation.CopyFrom(
                    pb.Allocation(
                        gpu_type=p.gpu_type,
                        data_parallel=p.num_gpus,
                        tensor_parallel=1,
                        pipeline_parallel=1,
                        sm_clock_mhz=p.sm_clock_mhz,
                        placement=placement,
                    )
                )
    return max(p.samples_per_second for p in points)


def _model_job(
    rng: np.random.Generator,
    spec: InstanceSpec,
    cluster: _Cluster,
    catalog: Mapping[str, GpuType],
    philly: Philly,
    job: pb.Job,
) -> float:
    """Fill a model job; returns its reference rate (peak-FLOPs bound at max_gpus)."""
    types = cluster.types()
    allowed = types
    if len(types) > 1 and rng.random() < spec.restricted_share:
        k = int(rng.integers(1, len(types)))
        allowed = sorted(str(t) for t in rng.choice(types, size=k, replace=False))

    def fits(arch: ModelSpec, n: int, among: Sequence[str]) -> list[str]:
        """Types of ``among`` with enough GPUs (up to n) to hold the model's state."""
        return [
            t for t in among if model_parallel_degree(arch, catalog[t]) <= min(n, cluster.pool(t))
        ]

    for among in (allowed, types):
        pool = max(cluster.pool(t) for t in among)
        n = philly.draw_num_gpus(rng, [c for c in philly.jobs if c <= pool], spec.philly_view)
        archs = [a for a in architectures() if fits(a[1], n, among)]
        if archs:
            allowed = among
            break
    else:
        raise ValueError("no architecture fits the cluster")
    arch_name, arch = _pick(rng, archs)
    ok = fits(arch, n, allowed)
    degree = {t: model_parallel_degree(arch, catalog[t]) for t in ok}
    lo = _min_gpus(rng, spec, n, min(degree.values()))
    job.name = f"{job.name}-{arch_name}"
    job.model.CopyFrom(model_spec_to_proto(arch))
    job.min_gpus, job.max_gpus = lo, n
    if allowed != types:
        job.allowed_gpu_types.extend(allowed)
    if rng.random() < spec.running_share:
        options = []
        for t in ok:
            m = degree[t]
            c = m
            while c <= n:
                if c >= lo and c <= cluster.free_of(t):
                    options.append((t, c))
                c *= 2
        shapes = [
            shape
            for t, c in options
            if (shape := running_shape(arch, catalog[t], c, degree[t], cluster)) is not None
        ]
        if shapes:
            shape = _pick(rng, shapes)
            placement = cluster.place(shape.gpu_type, shape.num_gpus, shape.tensor_parallel)
            if placement is not None:
                job.current_allocation.CopyFrom(
                    pb.Allocation(
                        gpu_type=shape.gpu_type,
                        data_parallel=shape.data_parallel,
                        tensor_parallel=shape.tensor_parallel,
                        pipeline_parallel=shape.pipeline_parallel,
                        sm_clock_mhz=catalog[shape.gpu_type].max_clock_mhz,
                        placement=placement,
                    )
                )
    best = max(catalog[t].peak_tflops for t in ok)
    return n * best * 1e12 / (6 * arch.parameters * arch.sequence_length)


def generate(spec: InstanceSpec) -> pb.SolveRequest:
    """Build the instance that ``spec`` describes; deterministic in ``spec`` (seed included)."""
    rng = np.random.default_rng(spec.seed)
    catalog = load_gpu_catalog()
    philly = load_philly()
    cluster = _build_cluster(spec, catalog, rng)
    types = cluster.types()
    workloads = gavel_workloads(types)
    t4 = [k for k in spec.node_kinds if k.gpu_type == "T4"]
    if t4 and "T4" in types:
        workloads += pollux_workloads(t4[0].gpus_per_node, sorted(philly.jobs))
    workloads = [
        w for w in workloads if any(p.num_gpus <= cluster.pool(p.gpu_type) for p in w.points)
    ]
    num_profile = round(spec.profile_share * spec.num_jobs)
    if num_profile and not workloads:
        raise ValueError(f"no measured profile exists for the cluster's GPU types {types}")
    is_profile = rng.permutation(spec.num_jobs) < num_profile

    request = pb.SolveRequest()
    request.cluster.gpu_types.extend(gpu_type_to_proto(catalog[t]) for t in types)
    request.cluster.nodes.extend(cluster.nodes)
    if spec.power_budget_fraction is not None:
        full = sum(n.gpu_count * catalog[n.gpu_type].tdp_watts for n in cluster.nodes)
        request.cluster.power_budget_watts = round(spec.power_budget_fraction * full, 1)
    for i in range(spec.num_jobs):
        job = request.jobs.add()
        job.name = f"j{i:04d}"
        job.tenant = f"vc-{philly.draw_tenant(rng)}"
        job.weight = float(rng.integers(1, 5))
        if is_profile[i]:
            rate = _profile_job(rng, spec, cluster, catalog, philly, workloads, job)
        else:
            rate = _model_job(rng, spec, cluster, catalog, philly, job)
        if rng.random() < spec.deadline_share:
            seconds = max(1, round(philly.draw_duration(rng, job.max_gpus)))
            tightness = rng.uniform(*DEADLINE_TIGHTNESS)
            job.time_to_deadline.seconds = seconds
            job.remaining_samples = float(math.ceil(tightness * rate * seconds))
    running = [j for j in request.jobs if j.HasField("current_allocation")]
    if running and spec.non_preemptible_share > 0:
        k = max(1, round(spec.non_preemptible_share * len(running)))
        for i in sorted(int(x) for x in rng.choice(len(running), size=k, replace=False)):
            running[i].preemptible = False
    request.options.time_budget.FromNanoseconds(round(spec.time_budget_seconds * 1e9))
    request.options.seed = spec.seed
    return request


# ---------------------------------------------------------------- hand-checkable instances


def _tiny_request(
    catalog: Mapping[str, GpuType], gpu_type: str, jobs: Sequence[pb.Job]
) -> pb.SolveRequest:
    request = pb.SolveRequest()
    request.cluster.gpu_types.append(gpu_type_to_proto(catalog[gpu_type]))
    request.cluster.nodes.append(
        pb.Node(
            name=f"{gpu_type.lower()}-000",
            gpu_type=gpu_type,
            gpu_count=8,
            rack="rack-00",
            network_bandwidth_gbps=NETWORK_GBPS[gpu_type],
        )
    )
    request.jobs.extend(jobs)
    request.options.time_budget.FromSeconds(5)
    return request


def _tiny_profile_job(
    catalog: Mapping[str, GpuType], label: str, num_gpus: int, weight: float, tenant: str
) -> pb.Job:
    """A rigid job with Gavel's V100 measurement of one network and batch size."""
    (w,) = [w for w in gavel_workloads(["V100-16GB"]) if w.label == label]
    points = profile_points(w, num_gpus, num_gpus, catalog)
    if len(points) != 1:
        raise ValueError(f"{label} has no monotone measurement at {num_gpus} GPUs")
    job = pb.Job(name=label.removeprefix("gavel-"), tenant=tenant, weight=weight)
    job.profile.points.extend(points)
    job.min_gpus = job.max_gpus = num_gpus
    return job


def tiny_instances() -> dict[str, pb.SolveRequest]:
    """Three one-node instances whose optimum is plain by hand (instances/README.md)."""
    catalog = load_gpu_catalog()
    v100 = "V100-16GB"
    one_node = _tiny_request(
        catalog,
        v100,
        [
            _tiny_profile_job(catalog, "gavel-resnet-50-bs64", 4, 2.0, "team-a"),
            _tiny_profile_job(catalog, "gavel-transformer-bs64", 4, 2.0, "team-b"),
            _tiny_profile_job(catalog, "gavel-lm-bs20", 8, 1.0, "team-c"),
        ],
    )

    a100 = "A100-80GB"
    big = pb.Job(name="gpt3-1.3b", tenant="team-a", weight=1.0, min_gpus=8, max_gpus=8)
    big.model.CopyFrom(model_spec_to_proto(load_architectures()["gpt3-1.3b"]))
    power = _tiny_request(catalog, a100, [big])
    power.cluster.power_budget_watts = 0.6 * 8 * catalog[a100].tdp_watts

    running = _tiny_profile_job(catalog, "gavel-resnet-50-bs64", 4, 1.0, "team-a")
    running.current_allocation.CopyFrom(
        pb.Allocation(
            gpu_type=v100,
            data_parallel=4,
            tensor_parallel=1,
            pipeline_parallel=1,
            sm_clock_mhz=catalog[v100].max_clock_mhz,
            placement=[pb.GpuSlice(node=f"{v100.lower()}-000", gpu_indices=[4, 5, 6, 7])],
        )
    )
    waiting = _tiny_profile_job(catalog, "gavel-transformer-bs64", 4, 1.0, "team-b")
    migration = _tiny_request(catalog, v100, [running, waiting])
    return {"tiny-1node": one_node, "tiny-power": power, "tiny-migration": migration}


# ---------------------------------------------------------------- CLI


FAMILIES: dict[str, tuple[int, int, float]] = {
    "small": (16, 32, 2.0),
    "medium": (128, 256, 5.0),
    "large": (1024, 2048, 20.0),
    "xl": (8192, 16384, 60.0),
}
"""Benchmark families (docs/benchmarks.md): nodes (8 GPUs each in the hybrid mix), jobs, and
the time budget their targets are measured at."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dsfro generate", description=__doc__.split("\n")[0]
    )
    p.add_argument("--family", choices=list(FAMILIES), default=None,
                   help="a benchmark family: sets nodes, jobs and time budget unless given")
    p.add_argument("--nodes", type=int, default=None, help="number of nodes (default 16)")
    p.add_argument("--jobs", type=int, default=None, help="number of jobs (default 32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mix", choices=sorted(MIXES), default="hybrid", help="node types (hybrid)")
    p.add_argument("--profile-share", type=float, default=0.5)
    p.add_argument("--running-share", type=float, default=0.3)
    p.add_argument("--deadline-share", type=float, default=0.2)
    p.add_argument("--unavailable-share", type=float, default=0.01)
    p.add_argument("--power-budget-fraction", type=float, default=None)
    p.add_argument("--philly-view", choices=["snapshot", "arrivals"], default="snapshot")
    p.add_argument("--time-budget", type=float, default=None, help="seconds (default 10)")
    p.add_argument("--out", type=Path, default=None, help="output file (default stdout)")
    p.add_argument(
        "--tiny",
        type=Path,
        default=None,
        metavar="DIR",
        help="write the hand-checkable tiny-*.json instances into DIR instead",
    )
    return p


def spec_from_args(argv: Sequence[str]) -> InstanceSpec:
    """The InstanceSpec that a command line describes (shared by ``main`` and the tests)."""
    a = build_parser().parse_args(list(argv))
    nodes, jobs, budget = FAMILIES[a.family] if a.family else (16, 32, 10.0)
    if min(a.nodes or 1, a.jobs or 1) < 1 or (a.time_budget is not None and a.time_budget <= 0):
        raise SystemExit("dsfro generate: --nodes, --jobs and --time-budget must be positive")
    return InstanceSpec(
        name=a.out.stem if a.out is not None else (a.family or "instance"),
        num_nodes=a.nodes or nodes,
        num_jobs=a.jobs or jobs,
        node_kinds=MIXES[a.mix](),
        seed=a.seed,
        profile_share=a.profile_share,
        running_share=a.running_share,
        deadline_share=a.deadline_share,
        unavailable_share=a.unavailable_share,
        power_budget_fraction=a.power_budget_fraction,
        time_budget_seconds=a.time_budget or budget,
        philly_view=a.philly_view,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parsed = build_parser().parse_args(args)
    if parsed.tiny is not None:
        parsed.tiny.mkdir(parents=True, exist_ok=True)
        for name, request in tiny_instances().items():
            (parsed.tiny / f"{name}.json").write_text(to_json(request))
        return 0
    text = to_json(generate(spec_from_args(args)))
    if parsed.out is None:
        sys.stdout.write(text)
    else:
        parsed.out.parent.mkdir(parents=True, exist_ok=True)
        parsed.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
