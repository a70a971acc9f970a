"""The workload mix: how a trace job becomes what the policies see (docs/simulation.md).

A trace's ``workload`` is one of three things:

- an architecture of ``models/architectures.json`` (e.g. ``llama2-7b``): the job carries that
  ``ModelSpec`` and the analytic model predicts it;
- a measured workload (e.g. ``gavel-resnet-50-bs64``, ``pollux-bert-lbs6``: a network at one batch
  size, ``MeasuredWorkload.label``) measured on the cluster's GPU types: the job carries its
  measured points as a ``ThroughputProfile``;
- a class of the mix (``philly``): a seeded draw of one of the above that runs on exactly the
  job's GPU count (a measured workload with ``profile_share``, else an architecture).

The measured workloads and the job-shape rules are the instance generator's
(``solver.offline.generate``): Gavel's and Pollux's measurements, ``profile_points``,
``model_parallel_degree``. A job runs at its requested count if some GPU type of the cluster
has that many GPUs and either a measurement at that count, or a split data x tensor x pipeline
(tensor and pipeline powers of two, tensor within a node, pipeline at most 8, as the truth model
tries them) that the performance model accepts, memory included, and whose model-parallel
degree holds the training state in half the memory (``model_parallel_degree``).

GPU range for policies that resize: ``min_gpus = max(n // 4, smallest model-parallel degree,
1)`` and ``max_gpus = min(2 n, largest pool of a type it runs on)`` for a model job (the
generator's ``ELASTIC_SCALE_DOWN`` of 4, and twice the request); for a measured job the measured
counts nearest inside these bounds, so the range holds measured points only. Draws use a
generator seeded with (mix seed, CRC-32 of the job id): a job's workload does not depend on the
other jobs or their order.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.domain import GpuType, ModelSpec, ProfilePoint, Shape, ThroughputProfile
from solver.offline.generate.data import MeasuredWorkload, gavel_workloads, pollux_workloads
from solver.offline.generate.jobs import (
    ELASTIC_SCALE_DOWN,
    MODEL_ARCHITECTURES,
    model_parallel_degree,
    profile_points,
)
from solver.perfmodel import throughput
from solver.perfmodel.catalog import load_architectures
from solver.perfmodel.configs import TypeFacts, type_facts
from solver.simulate.core import SimJob, SimulationError, TraceJob
from solver.simulate.slicing import draw_fraction

PIPELINE_DEGREES = (1, 2, 4, 8)
"""Pipeline degrees a job may use to run at its requested count (those the truth model tries)."""


@dataclass(frozen=True)
class WorkloadClass:
    """A workload name that stands for a draw: with probability ``profile_share`` a workload
    measured at the job's GPU count (where there is one), else one of ``architectures`` that
    runs on that count (a measured one if none does)."""

    architectures: tuple[str, ...] = MODEL_ARCHITECTURES
    profile_share: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.profile_share <= 1.0:
            raise ValueError(f"profile_share {self.profile_share} not in [0, 1]")
        if not self.architectures:
            raise ValueError("a workload class needs at least one architecture")


def _default_classes() -> dict[str, WorkloadClass]:
    """``philly``: the generator's choice, half measured profiles, the six model architectures
    of ``MODEL_ARCHITECTURES``."""
    return {"philly": WorkloadClass()}


@dataclass(frozen=True)
class _View:
    """What the mix needs of a cluster: per type its facts and pool, and what was measured."""

    facts: Mapping[str, TypeFacts]
    pools: Mapping[str, int]
    measured: Mapping[str, MeasuredWorkload]


@dataclass(frozen=True)
class WorkloadMix:
    """Seeded rules that turn trace jobs into ``SimJob``s (module docstring)."""

    seed: int = 0
    classes: Mapping[str, WorkloadClass] = field(default_factory=_default_classes)
    scale_down: int = ELASTIC_SCALE_DOWN
    scale_up: int = 2
    gavel_steps: bool = False
    """Gavel's measured workloads in steps/s (Gavel's unit: its max-sum-throughput LP sums
    steps/s) instead of samples/s; only the unit of "samples" changes, not a job's speed."""
    _views: dict[bytes, _View] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        catalog = load_architectures()
        for name, cls in self.classes.items():
            if name in catalog:
                raise ValueError(f"class {name!r} has the name of an architecture")
            unknown = [a for a in cls.architectures if a not in catalog]
            if unknown:
                raise ValueError(f"class {name!r}: unknown architectures {unknown}")
        if self.scale_down < 1 or self.scale_up < 1:
            raise ValueError("scale_down and scale_up must be >= 1")

    # ------------------------------------------------------------ names

    def known(self, cluster: pb.ClusterSnapshot) -> set[str]:
        """Every workload name a trace may use on this cluster."""
        return {*self.classes, *load_architectures(), *self._view(cluster).measured}

    def problem(self, job: TraceJob, cluster: pb.ClusterSnapshot) -> tuple[str, str] | None:
        """(column, message) if ``job`` cannot be realized on ``cluster``, else None."""
        view = self._view(cluster)
        name, n = job.workload, job.num_gpus
        archs = load_architectures()
        if name in self.classes:
            if not _measured_at(view, n) and not self.runnable(
                self.classes[name].architectures, n, cluster
            ):
                return "num_gpus", f"no workload of class {name!r} runs on {n} GPUs of one type"
        elif name in archs:
            if not _types(view, archs[name], n):
                return "num_gpus", f"{name} cannot run on {n} GPUs of any type of the cluster"
        elif name in view.measured:
            if name not in _measured_at(view, n):
                return "num_gpus", f"{name} was not measured on {n} GPUs of a type of the cluster"
        else:
            return "workload", (
                f"unknown workload {name!r}: not a class of the mix ({', '.join(self.classes)}), "
                "an architecture of models/architectures.json or a workload measured on the "
                "cluster's GPU types"
            )
        return None

    def runnable(self, names: Sequence[str], n: int, cluster: pb.ClusterSnapshot) -> list[str]:
        """The architectures of ``names`` that run on exactly ``n`` GPUs of one type."""
        archs = load_architectures()
        view = self._view(cluster)
        return [a for a in names if _types(view, archs[a], n)]

    # ------------------------------------------------------------ realizing jobs

    def realize(self, job: TraceJob, cluster: pb.ClusterSnapshot) -> SimJob:
        """The job as the policies see it; deterministic in the seed and the job id.

        Raises SimulationError if the job cannot run (``problem``)."""
        found = self.problem(job, cluster)
        if found is not None:
            raise SimulationError([f"{job.job_id}:{found[0]}: {found[1]}"])
        view = self._view(cluster)
        name = job.workload
        archs = load_architectures()
        if name in self.classes:
            name = self._draw(self.classes[name], job, view)
        if name in archs:
            sim = self._model_job(job, name, archs[name], view)
        else:
            sim = self._measured_job(job, view.measured[name], view)
        if not job.slices:
            return sim
        source, fraction = draw_fraction(self.seed, job.job_id)  # a one-GPU job (the trace's)
        return replace(
            sim,
            min_gpus=1,
            max_gpus=1,
            slices=True,
            gpu_fraction=fraction,
            fraction_source=source,
        )

    def realize_all(self, jobs: Sequence[TraceJob], cluster: pb.ClusterSnapshot) -> list[SimJob]:
        """Every job realized, or one SimulationError listing every job that cannot run."""
        problems = [
            f"{j.job_id}:{p[0]}: {p[1]}"
            for j in jobs
            if (p := self.problem(j, cluster)) is not None
        ]
        if problems:
            raise SimulationError(problems)
        return [self.realize(j, cluster) for j in jobs]

    def _draw(self, cls: WorkloadClass, job: TraceJob, view: _View) -> str:
        rng = np.random.default_rng([self.seed, zlib.crc32(job.job_id.encode())])
        measured = _measured_at(view, job.num_gpus)
        archs = load_architectures()
        runnable = [a for a in cls.architectures if _types(view, archs[a], job.num_gpus)]
        if measured and (rng.random() < cls.profile_share or not runnable):
            networks = sorted({(w.source, w.network) for w in measured.values()})
            source, network = networks[int(rng.integers(len(networks)))]
            labels = sorted(
                k for k, w in measured.items() if (w.source, w.network) == (source, network)
            )
            return labels[int(rng.integers(len(labels)))]
        return runnable[int(rng.integers(len(runnable)))]

    def _model_job(self, job: TraceJob, name: str, arch: ModelSpec, view: _View) -> SimJob:
        n = job.num_gpus
        types = _types(view, arch, n)
        degree = min(model_parallel_degree(arch, view.facts[t].gpu) for t in types)
        lo = min(n, max(1, n // self.scale_down, degree))
        hi = max(n, min(self.scale_up * n, max(view.pools[t] for t in types)))
        return SimJob(
            trace=job,
            workload=arch,
            workload_name=name,
            min_gpus=lo,
            max_gpus=hi,
            parameters=arch.parameters,
        )

    def _measured_job(self, job: TraceJob, w: MeasuredWorkload, view: _View) -> SimJob:
        n = job.num_gpus
        counts = sorted({p.num_gpus for p in w.points if p.num_gpus <= view.pools[p.gpu_type]})
        lo = min(c for c in counts if c >= min(n, max(1, n // self.scale_down)))
        hi = max(c for c in counts if c <= max(n, self.scale_up * n))
        gpus = {t: f.gpu for t, f in view.facts.items()}
        points = tuple(
            ProfilePoint(
                gpu_type=p.gpu_type,
                num_gpus=p.num_gpus,
                tensor_parallel=p.tensor_parallel,
                pipeline_parallel=p.pipeline_parallel,
                sm_clock_mhz=p.sm_clock_mhz,
                samples_per_second=p.samples_per_second,
                watts=p.watts,
                memory_per_gpu_gib=p.memory_per_gpu_gib,
            )
            for p in profile_points(w, lo, hi, gpus)
            if p.num_gpus <= view.pools[p.gpu_type]
        )
        return SimJob(
            trace=job,
            workload=ThroughputProfile(points),
            workload_name=w.label,
            min_gpus=lo,
            max_gpus=hi,
            parameters=w.parameters,
            measured=True,
        )

    def _view(self, cluster: pb.ClusterSnapshot) -> _View:
        key = cluster.SerializeToString(deterministic=True)
        view = self._views.get(key)
        if view is None:
            view = _make_view(cluster, self.gavel_steps)
            self._views.clear()  # one cluster at a time is the common case
            self._views[key] = view
        return view


def _make_view(cluster: pb.ClusterSnapshot, gavel_steps: bool = False) -> _View:
    domain = problem_from_proto(pb.SolveRequest(cluster=cluster), Limits()).cluster
    facts = type_facts(domain)
    pools = {t: sum(f.node_capacities) for t, f in facts.items()}
    types = sorted(facts)
    workloads = gavel_workloads(types, per_step=gavel_steps)
    if "T4" in facts:
        workloads += pollux_workloads(facts["T4"].gpus_per_node, sorted({1, 2, 4, 8, 16, 32, 64}))
    measured = {}
    for w in workloads:
        points = tuple(
            p for p in w.points if p.gpu_type in pools and p.num_gpus <= pools[p.gpu_type]
        )
        if points:
            measured[w.label] = w
    return _View(facts, pools, measured)


def _measured_at(view: _View, n: int) -> dict[str, MeasuredWorkload]:
    """Measured workloads with a point at exactly ``n`` GPUs of a type of the cluster."""
    return {
        label: w
        for label, w in view.measured.items()
        if any(p.num_gpus == n and n <= view.pools[p.gpu_type] for p in w.points)
    }


def _types(view: _View, arch: ModelSpec, n: int) -> list[str]:
    """GPU types of the cluster on which ``arch`` runs on exactly ``n`` GPUs."""
    return [
        t
        for t, f in sorted(view.facts.items())
        if n <= view.pools[t] and runs(arch, f.gpu, n, f.gpus_per_node, f.network_bandwidth_gbps)
    ]


@functools.cache
def runs(arch: ModelSpec, gpu: GpuType, n: int, gpus_per_node: int, network_gbps: float) -> bool:
    """Whether ``arch`` can train on ``n`` GPUs of ``gpu`` (module docstring)."""
    if model_parallel_degree(arch, gpu) > n:
        return False
    tp = 1
    while tp <= min(n, gpus_per_node):
        for pp in PIPELINE_DEGREES:
            if n % (tp * pp) == 0:
                shape = Shape(gpu.name, n // (tp * pp), tp, pp)
                if (
                    throughput.estimate(
                        arch,
                        gpu,
                        shape,
                        gpu.max_clock_mhz,
                        gpus_per_node=gpus_per_node,
                        network_bandwidth_gbps=network_gbps,
                    )
                    is not None
                ):
                    return True
        tp *= 2
    return False
