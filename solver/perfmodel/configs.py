"""Each job's configurations: shapes x SM clocks with predicted performance, Pareto-filtered.

A configuration fixes everything about a job except where its GPUs are, so its throughput,
power and memory are constants and the models over them stay linear. Measured profiles
override the analytic model; the model fills in only what was not measured.

Enumeration is the first step of every solve, so it is built for speed: the analytic model is
evaluated for many shapes and clocks at once and kept per architecture and GPU type
(solver.perfmodel.enumeration, solver.perfmodel.grid), jobs alike share one enumeration, and the
Pareto filter runs over all jobs in array operations (solver.perfmodel.pareto). The result is the
one the per-point model (solver.perfmodel.throughput.estimate) gives; tests/test_configs.py
compares them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from solver.domain import Config, GpuType, Job, ModelSpec, Problem, Shape, ThroughputProfile
from solver.perfmodel import bulk, throughput
from solver.perfmodel.enumeration import Enumerator, Row, profile_operating_points
from solver.perfmodel.facts import (
    CLOCK_FRACTIONS,
    MAX_PIPELINE_PARALLEL,
    TypeFacts,
    gpu_counts,
    min_nodes,
    min_racks,
    offered_clocks,
    type_facts,
)
from solver.perfmodel.pareto import pareto_rows
from solver.perfmodel.slices import build_slice_configs

__all__ = [
    "CLOCK_FRACTIONS",
    "MAX_PIPELINE_PARALLEL",
    "ConfigSet",
    "TypeFacts",
    "build_config_set",
    "dominates",
    "enumerate_configs",
    "gpu_counts",
    "least_joules",
    "min_nodes",
    "min_racks",
    "offered_clocks",
    "pareto_filter",
    "profile_operating_points",
    "resolve_config",
    "type_facts",
]


@dataclass(frozen=True)
class ConfigSet:
    """The configurations of every job of a problem."""

    by_job: Mapping[str, tuple[Config, ...]]
    best_samples_per_second: Mapping[str, float]
    """Best throughput of the job on an empty cluster: the denominator of u_j."""
    num_enumerated: int
    """Configurations before Pareto filtering."""
    slices: Mapping[str, tuple[Config, ...]] = field(default_factory=dict)
    """Slice jobs' configurations on one MIG instance (solver.perfmodel.slices), apart from
    `by_job`: only the MIG step places them; their best throughput counts in
    `best_samples_per_second`."""
    least_joules_per_sample: Mapping[str, float] = field(default_factory=dict)
    """e*_j: the least watts per sample/s over the job's whole-GPU configurations on an empty
    cluster (its most efficient way to run), what the WASTE energy basis charges against
    (docs/objective.md); 0 (the draw basis) for a job without one."""

    def least_joules(self, job: str) -> float:
        """e*_j of `job` (0.0 when it has none)."""
        return self.least_joules_per_sample.get(job, 0.0)

    @property
    def num_configurations(self) -> int:
        return sum(len(c) for c in self.by_job.values())

    def __reduce__(self) -> tuple[Callable[..., ConfigSet], tuple[Any, ...]]:
        """Pickled as columns (solver.perfmodel.bulk): decomposed solves send every part's
        configurations to the caller, where one object each would be slow to unpickle."""
        columns = bulk.to_columns(self.by_job)
        best = dict(self.best_samples_per_second)
        least = dict(self.least_joules_per_sample)
        return _unpickle, (columns, best, self.num_enumerated, dict(self.slices), least)


def _unpickle(
    columns: bulk.Columns,
    best: dict[str, float],
    enumerated: int,
    slices: dict[str, tuple[Config, ...]] | None = None,
    least: dict[str, float] | None = None,
) -> ConfigSet:
    return ConfigSet(bulk.from_columns(columns), best, enumerated, slices or {}, least or {})


def least_joules(rows: Sequence[Row]) -> float:
    """e*_j over a job's rows: the least watts / samples per second, 0.0 when none runs."""
    return min((r[3] / r[2] for r in rows if r[2] > 0), default=0.0)


def enumerate_configs(job: Job, facts: Mapping[str, TypeFacts]) -> list[Config]:
    """Every configuration of the job that fits, before Pareto filtering."""
    return [Config(job.name, *row) for row in Enumerator(facts).rows(job)]


def dominates(a: Config, b: Config) -> bool:
    """a is at least as good as b in every respect that the objective or placement sees.

    Same GPU type; no more GPUs, a tensor degree dividing b's (so a fits wherever b fits),
    no less throughput, no more power and no more nodes at least. (pareto_filter applies
    this rule to all pairs at once.)
    """
    return (
        a.gpu_type == b.gpu_type
        and a.num_gpus <= b.num_gpus
        and a.watts <= b.watts
        and a.samples_per_second >= b.samples_per_second
        and a.min_nodes <= b.min_nodes
        and b.tensor_parallel % a.tensor_parallel == 0
        and (a.num_gpus, a.tensor_parallel, a.samples_per_second, a.watts)
        != (b.num_gpus, b.tensor_parallel, b.samples_per_second, b.watts)
    )


def _row(c: Config) -> Row:
    return (
        c.shape,
        c.sm_clock_mhz,
        c.samples_per_second,
        c.watts,
        c.memory_per_gpu_gib,
        c.min_nodes,
        c.min_racks,
        c.measured,
        c.kept_only,
    )


def pareto_filter(configs: Sequence[Config], keep: Shape | None = None) -> list[Config]:
    """Drop dominated configurations; those of the shape `keep` (the running one) stay."""
    (stay,) = pareto_rows([[_row(c) for c in configs]], [keep])
    return [configs[i] for i in stay]


def build_config_set(problem: Problem, facts: Mapping[str, TypeFacts] | None = None) -> ConfigSet:
    """Every job's Pareto-filtered configurations; `facts` of a larger cluster when the problem
    is a part of it (decomposition), so that its configurations are the global ones.

    Jobs alike in everything the enumeration reads (workload, GPU limits, allowed types,
    running shape) share one enumeration and filter, each with configurations of its own."""
    with bulk.collector_paused():  # (see solver.perfmodel.bulk)
        facts = facts if facts is not None else type_facts(problem.cluster)
        built = _build(problem, facts)
        slices = build_slice_configs(problem.jobs, facts, problem.cluster.mig)
        if not slices:
            return built
        best = with_slices(built.best_samples_per_second, slices)
        return ConfigSet(
            built.by_job, best, built.num_enumerated, slices, built.least_joules_per_sample
        )


def best_rates(problem: Problem, facts: Mapping[str, TypeFacts] | None = None) -> dict[str, float]:
    """Each job's best throughput, ``ConfigSet.best_samples_per_second`` without building the
    configurations (no filter, no Config): what ranks jobs before the solve builds them."""
    with bulk.collector_paused():
        facts = facts if facts is not None else type_facts(problem.cluster)
        _, group_of, groups = _enumerated(problem, facts)
        tops = [max((r[2] for r in rows), default=0.0) for rows in groups]
        best = {job.name: tops[i] for job, i in zip(problem.jobs, group_of, strict=True)}
        return with_slices(best, build_slice_configs(problem.jobs, facts, problem.cluster.mig))


def with_slices(
    best: Mapping[str, float], slices: Mapping[str, Sequence[Config]]
) -> dict[str, float]:
    """Each job's best throughput on whole GPUs or, where faster, on one of its MIG slices."""
    out = dict(best)
    for name, configs in slices.items():
        out[name] = max(out[name], max(c.samples_per_second for c in configs))
    return out


def _enumerated(
    problem: Problem, facts: Mapping[str, TypeFacts]
) -> tuple[list[Job], list[int], list[list[Row]]]:
    """The first job of each group of jobs alike, each job's group, and each group's rows."""
    first: dict[Hashable, int] = {}  # key -> index of its group
    alike: list[Job] = []  # the first job of each group
    group_of: list[int] = []
    allowed: dict[frozenset[str], tuple[str, ...]] = {}
    for job in problem.jobs:
        types = allowed.get(job.allowed_gpu_types)
        if types is None:
            types = allowed[job.allowed_gpu_types] = tuple(n for n in facts if job.allows(n))
        keep = job.current.shape if job.current is not None else None
        key = (job.workload, job.min_gpus, job.max_gpus, types, keep)
        index = first.get(key)
        if index is None:
            index = first[key] = len(alike)
            alike.append(job)
        group_of.append(index)
    enumerator = Enumerator(facts)
    enumerator.prepare(alike)
    return alike, group_of, [enumerator.rows(job) for job in alike]


def _build(problem: Problem, facts: Mapping[str, TypeFacts]) -> ConfigSet:
    alike, group_of, groups = _enumerated(problem, facts)
    keeps = [job.current.shape if job.current is not None else None for job in alike]

    stays = pareto_rows(groups, keeps)
    kept = [[rows[i] for i in stay] for rows, stay in zip(groups, stays, strict=True)]
    tops = [max((r[2] for r in rows), default=0.0) for rows in groups]
    leasts = [least_joules(rows) for rows in groups]
    by_job: dict[str, tuple[Config, ...]] = {}
    best: dict[str, float] = {}
    least: dict[str, float] = {}
    enumerated = 0
    for job, index in zip(problem.jobs, group_of, strict=True):
        by_job[job.name] = tuple([Config(job.name, *row) for row in kept[index]])
        best[job.name] = tops[index]
        least[job.name] = leasts[index]
        enumerated += len(groups[index])
    return ConfigSet(by_job, best, enumerated, least_joules_per_sample=least)


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
    check_memory: bool,
) -> throughput.Estimate | None:
    """throughput.estimate, computed once per point (jobs of one architecture share every one)."""
    return throughput.estimate(
        spec,
        gpu,
        shape,
        clock,
        gpus_per_node=gpus_per_node,
        network_bandwidth_gbps=network,
        check_memory=check_memory,
    )


def resolve_config(
    problem: Problem,
    job: Job,
    shape: Shape,
    sm_clock_mhz: int,
    facts: Mapping[str, TypeFacts] | None = None,
) -> Config | None:
    """The configuration of a given shape and clock, unfiltered; None where it can't run.

    Used to score plans made elsewhere (EvaluatePlan), whose shapes may have been pruned.
    Pass the cluster's `facts` when resolving many jobs, to compute them once. The point
    model (throughput.estimate) gives the same figures as enumeration's batches.
    """
    facts = facts if facts is not None else type_facts(problem.cluster)
    f = facts.get(shape.gpu_type)
    if f is None or sm_clock_mhz not in f.gpu.sm_clocks_mhz:
        return None
    if isinstance(job.workload, ThroughputProfile):
        pts = [
            p
            for p in job.workload.points
            if not p.mig_profile
            and (p.gpu_type, p.num_gpus, p.tensor_parallel, p.pipeline_parallel)
            == (shape.gpu_type, shape.num_gpus, shape.tensor_parallel, shape.pipeline_parallel)
        ]
        if not pts:
            return None
        for clock, sps, watts, memory in profile_operating_points(pts, f.gpu, [sm_clock_mhz]):
            if clock == sm_clock_mhz:
                return _make_config(job, f, shape, clock, sps, watts, memory, measured=True)
        return None
    running = job.current is not None and job.current.shape == shape
    est = _estimate(
        job.workload,
        f.gpu,
        shape,
        sm_clock_mhz,
        f.gpus_per_node,
        f.network_bandwidth_gbps,
        not running,
    )
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
