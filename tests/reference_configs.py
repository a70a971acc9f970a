"""The configuration enumeration as it was before it was vectorised: one throughput.estimate
per point, one job at a time, the Pareto filter pair by pair. The reference that
tests/test_configs.py holds solver.perfmodel.configs to (the same configurations, in the same
order, with the same floats)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping

from solver.domain import (
    Config,
    GpuType,
    Job,
    ModelSpec,
    Problem,
    ProfilePoint,
    Shape,
    ThroughputProfile,
)
from solver.perfmodel import throughput
from solver.perfmodel.configs import ConfigSet
from solver.perfmodel.facts import (
    MAX_PIPELINE_PARALLEL,
    TypeFacts,
    divisors,
    gpu_counts,
    min_nodes,
    min_racks,
    type_facts,
)


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


@functools.lru_cache(maxsize=65536)
def _estimate(
    spec: ModelSpec,
    gpu: GpuType,
    shape: Shape,
    clock: int,
    gpus_per_node: int,
    network: float,
    check_memory: bool = True,
) -> throughput.Estimate | None:
    return throughput.estimate(
        spec,
        gpu,
        shape,
        clock,
        gpus_per_node=gpus_per_node,
        network_bandwidth_gbps=network,
        check_memory=check_memory,
    )


def _model_configs(job: Job, spec: ModelSpec, facts: TypeFacts) -> list[Config]:
    out: list[Config] = []
    gpu = facts.gpu
    top = gpu.max_clock_mhz
    g, net = facts.gpus_per_node, facts.network_bandwidth_gbps
    current = job.current.shape if job.current is not None else None
    for n in gpu_counts(job):
        for tp in divisors(n, facts.gpus_per_node):
            shapes: list[Shape] = []
            best: tuple[float, Shape] | None = None
            for pp in divisors(n // tp, MAX_PIPELINE_PARALLEL):
                shape = Shape(gpu.name, n // (tp * pp), tp, pp)
                est = _estimate(spec, gpu, shape, top, g, net)
                if est is not None and (best is None or est.samples_per_second > best[0]):
                    best = (est.samples_per_second, shape)
            if best is not None:
                shapes.append(best[1])
            if (
                current is not None
                and current.gpu_type == gpu.name
                and current.num_gpus == n
                and current.tensor_parallel == tp
                and current not in shapes
            ):
                shapes.append(current)
            for shape in shapes:
                for clock in facts.clocks_mhz:
                    est = _estimate(spec, gpu, shape, clock, g, net, shape != current)
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


def profile_operating_points(
    points: Iterable[ProfilePoint], gpu: GpuType, clocks: Iterable[int]
) -> list[tuple[int, float, float, float]]:
    pts = sorted(points, key=lambda p: p.sm_clock_mhz)
    measured = [(p.sm_clock_mhz, p.samples_per_second, p.watts) for p in pts]
    memory = max(p.memory_per_gpu_gib for p in pts)
    lo, hi = measured[0][0], measured[-1][0]
    out: dict[int, tuple[float, float]] = {c: (s, w) for c, s, w in measured}
    for clock in clocks:
        if clock in out or clock > hi:
            continue
        if clock >= lo and len(measured) > 1:
            out[clock] = throughput.interpolate_clock(measured, clock)
        elif clock < lo:
            c0, s0, w0 = measured[0]
            out[clock] = throughput.rescale_clock(s0, w0, pts[0].num_gpus, gpu, c0, clock)
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
    if isinstance(job.workload, ThroughputProfile):
        return _profile_configs(job, job.workload, facts)
    out: list[Config] = []
    for name, f in facts.items():
        if job.allows(name):
            out.extend(_model_configs(job, job.workload, f))
    return out


_Traits = tuple[int, int, float, float, int]


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


def pareto_filter(configs: list[Config], keep: Shape | None = None) -> list[Config]:
    ordered = sorted(configs, key=lambda c: (-c.samples_per_second, c.watts, c.num_gpus))
    kept: list[Config] = []
    rivals_of_type: dict[str, list[_Traits]] = {}
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
