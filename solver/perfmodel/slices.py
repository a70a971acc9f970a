"""Configurations of slice jobs: one job on one MIG instance, its throughput and power.

The rule (docs/mig.md, "Performance of a slice"): an instance of profile p has the share

    s(p) = min(SM slices of p / the GPU's, memory slices of p / the GPU's)

of its GPU, and a job on it trains at s(p) times its one-GPU rate at the same clock, with the
instance's memory as the limit on its micro-batch; it draws s(p) times the one-GPU power above
idle (the GPU's idle power is drawn once, whatever its instances do). The smaller share is
taken because the analytic model does not split a step into SM-bound and bandwidth-bound time:
an instance has its share of the SMs and, with its memory slices, its share of the L2 cache
and memory bandwidth, and is as fast as the scarcer of the two allows, never more; the power
follows the work done (the same energy per sample as the whole GPU). A point measured on an
instance of the profile (``ProfilePoint.mig_profile``) wins over the scaled estimate; its
watts are already above idle, and it is used only between its measured clocks.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

from solver.domain import (
    Config,
    GpuType,
    Job,
    ModelSpec,
    ProfilePoint,
    Shape,
    ThroughputProfile,
)
from solver.mig import MigGeometry, MigProfile
from solver.perfmodel import throughput
from solver.perfmodel.enumeration import profile_operating_points
from solver.perfmodel.facts import TypeFacts

_Point = tuple[int, float, float, float]
"""(clock, samples/s, watts above idle, memory) of one instance."""


def slice_share(geometry: MigGeometry, profile: str) -> float:
    """The instance's share of its GPU: the smaller of its SM and memory shares."""
    return min(geometry.compute_share(profile), geometry.memory_share(profile))


def slice_profiles(job: Job, geometry: MigGeometry) -> list[MigProfile]:
    """The profiles the job may get on this type (its bounds), and the one it runs on now."""
    if job.slices is None:
        return []
    out = [p for p in geometry.plannable() if job.slices.allows(geometry, p.name)]
    cur = job.current.mig if job.current is not None else None
    if (
        cur is not None
        and job.current is not None
        and job.current.shape.gpu_type == geometry.gpu_type
        and cur.profile in geometry.profiles
        and all(p.name != cur.profile for p in out)
    ):
        out.append(geometry.profiles[cur.profile])
    return out


@functools.lru_cache(maxsize=65536)
def _model_point(
    spec: ModelSpec, gpu: GpuType, clock: int, facts: tuple[int, float], check: bool
) -> throughput.Estimate | None:
    """The one-GPU estimate with `gpu`'s memory (an instance's) as the limit."""
    return throughput.estimate(
        spec,
        gpu,
        Shape(gpu.name, 1, 1, 1),
        clock,
        gpus_per_node=facts[0],
        network_bandwidth_gbps=facts[1],
        check_memory=check,
    )


def _scaled(points: Sequence[_Point], share: float, idle: float) -> list[_Point]:
    """Whole-GPU points (watts of the GPU) as an instance's (watts above idle)."""
    return [(c, s * share, max(w - idle, 0.0) * share, m) for c, s, w, m in points]


def _profile_points(
    job: Job, f: TypeFacts, geometry: MigGeometry, p: MigProfile
) -> tuple[list[_Point], bool]:
    """Operating points of a profiled job on the instance, and whether they were measured."""
    assert isinstance(job.workload, ThroughputProfile)
    gpu = f.gpu
    mine = [q for q in job.workload.points if q.gpu_type == gpu.name and q.mig_profile == p.name]
    if mine:
        lo = min(q.sm_clock_mhz for q in mine)
        hi = max(q.sm_clock_mhz for q in mine)
        clocks = [c for c in f.clocks_mhz if lo <= c <= hi]
        return list(profile_operating_points(mine, gpu, clocks)), True
    whole: list[ProfilePoint] = [
        q
        for q in job.workload.points
        if q.gpu_type == gpu.name and not q.mig_profile and q.num_gpus == 1
    ]
    if not whole:
        return [], False
    points = profile_operating_points(whole, gpu, f.clocks_mhz)
    return _scaled(points, slice_share(geometry, p.name), gpu.idle_watts), False


def _model_points(
    spec: ModelSpec, f: TypeFacts, geometry: MigGeometry, p: MigProfile, check: bool
) -> list[_Point]:
    share = slice_share(geometry, p.name)
    key = (f.gpu, f.clocks_mhz, f.gpus_per_node, f.network_bandwidth_gbps)
    return list(_instance_points(spec, key, p.memory_gib, share, check))


@functools.lru_cache(maxsize=4096)
def _instance_points(
    spec: ModelSpec,
    key: tuple[GpuType, tuple[int, ...], int, float],
    memory_gib: float,
    share: float,
    check: bool,
) -> tuple[_Point, ...]:
    """An instance's points for a model (cached: many jobs train one architecture)."""
    whole, clocks, gpus_per_node, bandwidth = key
    gpu = dataclasses.replace(whole, memory_gib=memory_gib)
    out: list[_Point] = []
    for clock in clocks:
        est = _model_point(spec, gpu, clock, (gpus_per_node, bandwidth), check)
        if est is not None:
            out.append((clock, est.samples_per_second, est.watts, est.memory_per_gpu_gib))
    return tuple(_scaled(out, share, whole.idle_watts))


_Row = tuple[str, int, float, float, float, bool, bool, str]
"""One slice configuration without its job: (GPU type, clock, samples/s, watts, memory,
measured, kept only, profile)."""


def slice_configs(
    job: Job, facts: Mapping[str, TypeFacts], geometries: Mapping[str, MigGeometry]
) -> list[Config]:
    """The job's configurations on one instance of each profile it may use, on every GPU
    type it allows that has a MIG geometry, at the type's offered clocks (a measured profile:
    its measured clock range). Its running instance is always offered, even where its memory
    is over the profile's (`kept_only`: it demonstrably runs there)."""
    return _configs(job, _rows(job, facts, geometries))


def _rows(
    job: Job, facts: Mapping[str, TypeFacts], geometries: Mapping[str, MigGeometry]
) -> list[_Row]:
    if job.slices is None or job.min_gpus > 1 or job.max_gpus < 1:
        return []
    cur = job.current.mig if job.current is not None else None
    out: list[_Row] = []
    for name, geometry in geometries.items():
        f = facts.get(name)
        if f is None or not job.allows(name):
            continue
        for p in slice_profiles(job, geometry):
            running = cur is not None and cur.profile == p.name
            measured = False
            if isinstance(job.workload, ModelSpec):
                points = _model_points(job.workload, f, geometry, p, check=not running)
            else:
                points, measured = _profile_points(job, f, geometry, p)
            for clock, sps, watts, memory in points:
                over = memory > p.memory_gib
                if sps <= 0 or (over and not running):
                    continue
                out.append((name, clock, sps, watts, memory, measured, over, p.name))
    return out


def _configs(job: Job, rows: Sequence[_Row]) -> list[Config]:
    shapes = {name: Shape(name, 1, 1, 1) for name in {r[0] for r in rows}}
    return [
        Config(job.name, shapes[name], clock, sps, watts, memory, 1, 1, measured, over, profile)
        for name, clock, sps, watts, memory, measured, over, profile in rows
    ]


def build_slice_configs(
    jobs: Sequence[Job], facts: Mapping[str, TypeFacts], geometries: Mapping[str, MigGeometry]
) -> dict[str, tuple[Config, ...]]:
    """Every slice job's slice configurations (jobs without slices: none)."""
    if not geometries:
        return {}
    out: dict[str, tuple[Config, ...]] = {}
    # Jobs of one architecture, slice bounds and GPU types, on no instance now, have the same
    # rows: 500 slice jobs of a few architectures made 9,000 lookups of the same points.
    same: dict[tuple[object, ...], list[_Row]] = {}
    for job in jobs:
        if job.slices is None:
            continue
        if job.current is not None and job.current.mig is not None:
            rows = _rows(job, facts, geometries)
        else:
            key = (job.workload, job.slices, job.min_gpus, job.max_gpus, job.allowed_gpu_types)
            if key not in same:
                same[key] = _rows(job, facts, geometries)
            rows = same[key]
        if rows:
            out[job.name] = tuple(_configs(job, rows))
    return out
