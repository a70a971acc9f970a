"""Each job's configurations: shapes x SM clocks with predicted performance, Pareto-filtered.

A configuration fixes everything about a job except where its GPUs are, so its throughput,
power and memory are constants and the models over them stay linear. Measured profiles
override the analytic model; the model fills in only what was not measured.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from solver.domain import (
    Cluster,
    Config,
    GpuType,
    Job,
    ModelSpec,
    Problem,
    ProfilePoint,
    Shape,
    ThroughputProfile,
)
from solver.model import perf

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


@dataclass(frozen=True)
class ConfigSet:
    """The configurations of every job of a problem."""

    by_job: Mapping[str, tuple[Config, ...]]
    best_samples_per_second: Mapping[str, float]
    """Best throughput of the job on an empty cluster: the denominator of u_j."""
    num_enumerated: int
    """Configurations before Pareto filtering."""

    @property
    def num_configurations(self) -> int:
        return sum(len(c) for c in self.by_job.values())


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


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _make_config(
    job: Job,
    facts: TypeFacts,
    shape: Shape,
    clock: int,
    sps: float,
    watts: float,
    memory: float,
    measured: bool,
    kept_only: bool = False,
) -> Config | None:
    nodes = min_nodes(shape.num_gpus, shape.tensor_parallel, facts.node_capacities)
    if nodes is None or sps <= 0:
        return None
    return Config(
        job=job.name,
        shape=shape,
        sm_clock_mhz=clock,
        samples_per_second=sps,
        watts=watts,
        memory_per_gpu_gib=memory,
        min_nodes=nodes,
        min_racks=min_racks(shape.num_gpus, facts.rack_capacities),
        measured=measured,
        kept_only=kept_only,
    )


def _model_configs(job: Job, spec: ModelSpec, facts: TypeFacts) -> list[Config]:
    """Analytic configurations: per GPU count and tensor degree, the best pipeline degree."""
    out: list[Config] = []
    gpu = facts.gpu
    top = gpu.max_clock_mhz
    current = job.current.shape if job.current is not None else None
    for n in gpu_counts(job):
        for tp in _divisors(n, facts.gpus_per_node):
            shapes: set[Shape] = set()
            best: tuple[float, Shape] | None = None
            for pp in _divisors(n // tp, MAX_PIPELINE_PARALLEL):
                shape = Shape(gpu.name, n // (tp * pp), tp, pp)
                est = _estimate(spec, facts, shape, top)
                if est is not None and (best is None or est.samples_per_second > best[0]):
                    best = (est.samples_per_second, shape)
            if best is not None:
                shapes.add(best[1])
            if (
                current is not None
                and current.gpu_type == gpu.name
                and current.num_gpus == n
                and current.tensor_parallel == tp
            ):
                shapes.add(current)
            for shape in shapes:
                for clock in facts.clocks_mhz:
                    est = _estimate(spec, facts, shape, clock, check_memory=shape != current)
                    if est is None:
                        continue
                    cfg = _make_config(
                        job,
                        facts,
                        shape,
                        clock,
                        est.samples_per_second,
                        est.watts,
                        est.memory_per_gpu_gib,
                        measured=False,
                        kept_only=est.memory_per_gpu_gib > facts.gpu.memory_gib,
                    )
                    if cfg is not None:
                        out.append(cfg)
    return out


def _estimate(
    spec: ModelSpec, facts: TypeFacts, shape: Shape, clock: int, check_memory: bool = True
) -> perf.Estimate | None:
    """The model's estimate; a job's running shape is estimated even where the memory model
    rejects it, since it demonstrably runs (the checker accepts it where it stays)."""
    return _cached_estimate(
        spec,
        facts.gpu,
        shape,
        clock,
        facts.gpus_per_node,
        facts.network_bandwidth_gbps,
        check_memory,
    )


@functools.lru_cache(maxsize=65536)
def _cached_estimate(
    spec: ModelSpec,
    gpu: GpuType,
    shape: Shape,
    clock: int,
    gpus_per_node: int,
    network: float,
    check_memory: bool,
) -> perf.Estimate | None:
    """Jobs of one architecture on one cluster share every estimate: compute each once."""
    return perf.estimate(
        spec,
        gpu,
        shape,
        clock,
        gpus_per_node=gpus_per_node,
        network_bandwidth_gbps=network,
        check_memory=check_memory,
    )


def profile_operating_points(
    points: Iterable[ProfilePoint],
    gpu: GpuType,
    clocks: Iterable[int],
) -> list[tuple[int, float, float, float]]:
    """(clock, samples/s, watts, memory) of one shape at the offered and measured clocks.

    Between measured clocks: linear interpolation. A shape measured at one clock only is
    carried to lower clocks with the fitted clock model; nothing is extrapolated upward.
    """
    pts = sorted(points, key=lambda p: p.sm_clock_mhz)
    measured = [(p.sm_clock_mhz, p.samples_per_second, p.watts) for p in pts]
    memory = max(p.memory_per_gpu_gib for p in pts)
    lo, hi = measured[0][0], measured[-1][0]
    out: dict[int, tuple[float, float]] = {c: (s, w) for c, s, w in measured}
    for clock in clocks:
        if clock in out or clock > hi:
            continue
        if clock >= lo and len(measured) > 1:
            out[clock] = perf.interpolate_clock(measured, clock)
        elif clock < lo:
            c0, s0, w0 = measured[0]
            out[clock] = perf.rescale_clock(s0, w0, pts[0].num_gpus, gpu, c0, clock)
    return [(c, s, w, memory) for c, (s, w) in sorted(out.items(), reverse=True)]


def _profile_configs(
    job: Job, profile: ThroughputProfile, facts: Mapping[str, TypeFacts]
) -> list[Config]:
    groups: dict[Shape, list[ProfilePoint]] = {}
    for p in profile.points:
        if p.gpu_type not in facts or not job.allows(p.gpu_type):
            continue
        if not job.min_gpus <= p.num_gpus <= job.max_gpus:
            continue
        dp = p.num_gpus // (p.tensor_parallel * p.pipeline_parallel)
        groups.setdefault(Shape(p.gpu_type, dp, p.tensor_parallel, p.pipeline_parallel), []).append(
            p
        )
    out: list[Config] = []
    for shape, pts in groups.items():
        f = facts[shape.gpu_type]
        if shape.tensor_parallel > f.gpus_per_node:
            continue
        for clock, sps, watts, memory in profile_operating_points(pts, f.gpu, f.clocks_mhz):
            if memory > f.gpu.memory_gib:
                continue
            cfg = _make_config(job, f, shape, clock, sps, watts, memory, measured=True)
            if cfg is not None:
                out.append(cfg)
    return out


def enumerate_configs(job: Job, facts: Mapping[str, TypeFacts]) -> list[Config]:
    """Every configuration of the job that fits, before Pareto filtering."""
    if isinstance(job.workload, ThroughputProfile):
        return _profile_configs(job, job.workload, facts)
    out: list[Config] = []
    for name, f in facts.items():
        if job.allows(name):
            out.extend(_model_configs(job, job.workload, f))
    return out


_Traits = tuple[int, int, float, float, int]
"""What dominance compares: GPUs, tensor degree, samples/s, watts, minimum nodes."""


def _traits(c: Config) -> _Traits:
    return (c.num_gpus, c.tensor_parallel, c.samples_per_second, c.watts, c.min_nodes)


def _dominates(a: _Traits, b: _Traits) -> bool:
    return (
        a[0] <= b[0]
        and a[3] <= b[3]
        and a[2] >= b[2]
        and a[4] <= b[4]
        and b[1] % a[1] == 0
        and a[:4] != b[:4]
    )


def dominates(a: Config, b: Config) -> bool:
    """a is at least as good as b in every respect that the objective or placement sees.

    Same GPU type; no more GPUs, a tensor degree dividing b's (so a fits wherever b fits),
    no less throughput, no more power and no more nodes at least.
    """
    return a.gpu_type == b.gpu_type and _dominates(_traits(a), _traits(b))


def pareto_filter(configs: list[Config], keep: Shape | None = None) -> list[Config]:
    """Drop dominated configurations; those of the shape `keep` (the running one) stay."""
    ordered = sorted(configs, key=lambda c: (-c.samples_per_second, c.watts, c.num_gpus))
    kept: list[Config] = []
    rivals_of_type: dict[str, list[_Traits]] = {}  # only a configuration of its type dominates
    for c in ordered:
        rivals = rivals_of_type.setdefault(c.gpu_type, [])
        traits = _traits(c)
        if c.shape == keep or not any(_dominates(k, traits) for k in rivals):
            kept.append(c)
            rivals.append(traits)
    unique: dict[tuple[Shape, int], Config] = {}
    for c in kept:
        unique.setdefault((c.shape, c.sm_clock_mhz), c)
    return sorted(
        unique.values(),
        key=lambda c: (
            c.gpu_type,
            c.num_gpus,
            c.shape.tensor_parallel,
            c.shape.pipeline_parallel,
            -c.sm_clock_mhz,
        ),
    )


def build_config_set(problem: Problem, facts: Mapping[str, TypeFacts] | None = None) -> ConfigSet:
    """Every job's Pareto-filtered configurations; `facts` of a larger cluster when the problem
    is a part of it (decomposition), so that its configurations are the global ones."""
    facts = facts if facts is not None else type_facts(problem.cluster)
    by_job: dict[str, tuple[Config, ...]] = {}
    best: dict[str, float] = {}
    enumerated = 0
    for job in problem.jobs:
        configs = enumerate_configs(job, facts)
        enumerated += len(configs)
        keep = job.current.shape if job.current is not None else None
        by_job[job.name] = tuple(pareto_filter(configs, keep))
        best[job.name] = max((c.samples_per_second for c in configs), default=0.0)
    return ConfigSet(by_job=by_job, best_samples_per_second=best, num_enumerated=enumerated)


def resolve_config(
    problem: Problem,
    job: Job,
    shape: Shape,
    sm_clock_mhz: int,
    facts: Mapping[str, TypeFacts] | None = None,
) -> Config | None:
    """The configuration of a given shape and clock, unfiltered; None where it can't run.

    Used to score plans made elsewhere (EvaluatePlan), whose shapes may have been pruned.
    Pass the cluster's `facts` when resolving many jobs, to compute them once.
    """
    facts = facts if facts is not None else type_facts(problem.cluster)
    f = facts.get(shape.gpu_type)
    if f is None or sm_clock_mhz not in f.gpu.sm_clocks_mhz:
        return None
    if isinstance(job.workload, ThroughputProfile):
        pts = [
            p
            for p in job.workload.points
            if (p.gpu_type, p.num_gpus, p.tensor_parallel, p.pipeline_parallel)
            == (shape.gpu_type, shape.num_gpus, shape.tensor_parallel, shape.pipeline_parallel)
        ]
        if not pts:
            return None
        for clock, sps, watts, memory in profile_operating_points(pts, f.gpu, [sm_clock_mhz]):
            if clock == sm_clock_mhz:
                return _make_config(job, f, shape, clock, sps, watts, memory, measured=True)
        return None
    running = job.current is not None and job.current.shape == shape
    est = _estimate(job.workload, f, shape, sm_clock_mhz, check_memory=not running)
    if est is None:
        return None
    return _make_config(
        job,
        f,
        shape,
        sm_clock_mhz,
        est.samples_per_second,
        est.watts,
        est.memory_per_gpu_gib,
        measured=False,
        kept_only=est.memory_per_gpu_gib > f.gpu.memory_gib,
    )
