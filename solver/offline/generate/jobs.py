"""The jobs of an instance: profile jobs (measured throughput) and model jobs (a public
architecture for the analytic model), their GPU ranges and the shapes they could be running in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import model_spec_to_proto
from solver.domain import GpuType, ModelSpec, Shape
from solver.offline.generate.cluster import NETWORK_GBPS, _Cluster
from solver.offline.generate.data import MeasuredWorkload, Philly
from solver.offline.generate.spec import InstanceSpec
from solver.perfmodel import throughput
from solver.perfmodel.catalog import load_architectures

BYTES_PER_PARAMETER = 16
"""Training state per parameter with Adam: weights, gradients and two moments (ZeRO, 2020)."""
STATE_MEMORY_SHARE = 0.5
"""Model jobs are sized so that their training state fills at most this share of GPU memory."""
ELASTIC_SCALE_DOWN = 4
"""An elastic job accepts down to max_gpus // 4 GPUs (a generator choice)."""


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
            est = throughput.estimate(
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
