"""The configurations of one job, before Pareto filtering, fast enough for 16,384 jobs.

The analytic model is evaluated in batches (solver.perfmodel.grid) and kept per architecture and
GPU type (`ModelTable`, shared between solves); a measured profile's operating points are
computed once per measured shape. Rows are configurations without their job, so that jobs
alike share them; solver.perfmodel.configs turns them into `Config`s.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from solver.domain import GpuType, Job, ModelSpec, ProfilePoint, Shape, ThroughputProfile
from solver.perfmodel import throughput
from solver.perfmodel.catalog import models_dir
from solver.perfmodel.facts import (
    MAX_PIPELINE_PARALLEL,
    TypeFacts,
    divisors,
    gpu_counts,
    min_nodes,
    min_racks,
)
from solver.perfmodel.grid import estimate_grid

Row = tuple[Shape, int, float, float, float, int, int, bool, bool]
"""A configuration without its job: Config's other fields in order (shape, clock, samples/s,
watts, memory per GPU, min nodes, min racks, measured, kept_only)."""

_Point = tuple[int, float, float, float]
"""(clock, samples/s, watts, memory per GPU) of one shape."""


@dataclass(frozen=True)
class TypeModel:
    """What the analytic model reads of a GPU type's facts (not its nodes and racks)."""

    gpu: GpuType
    gpus_per_node: int
    network_bandwidth_gbps: float
    clocks_mhz: tuple[int, ...]


class ModelTable:
    """The analytic model of one architecture on one GPU type, filled in batches on demand.

    `best[n]`: per tensor degree (ascending), the pipeline degree of most throughput at the top
    clock, as a shape (None where no split fits); `points[shape, check_memory]`: the shape at
    every offered clock that has an estimate. Concurrent solves may fill a table at once: they
    write the same values.
    """

    def __init__(self, spec: ModelSpec, model: TypeModel) -> None:
        self.spec = spec
        self.model = model
        self.best: dict[int, tuple[tuple[int, Shape | None], ...]] = {}
        self.points: dict[tuple[Shape, bool], tuple[_Point, ...]] = {}

    def _grid(
        self, shapes: Sequence[Shape], clocks: Sequence[int], checks: Sequence[bool]
    ) -> tuple[list[bool], list[float], list[float], list[float]]:
        t = self.model
        est = estimate_grid(
            self.spec,
            t.gpu,
            np.array([s.data_parallel for s in shapes], dtype=np.int64),
            np.array([s.tensor_parallel for s in shapes], dtype=np.int64),
            np.array([s.pipeline_parallel for s in shapes], dtype=np.int64),
            np.array(clocks, dtype=np.int64),
            np.array(checks, dtype=np.bool_),
            gpus_per_node=t.gpus_per_node,
            network_bandwidth_gbps=t.network_bandwidth_gbps,
        )
        return (
            est.valid.tolist(),
            est.samples_per_second.tolist(),
            est.watts.tolist(),
            est.memory_per_gpu_gib.tolist(),
        )

    def add_counts(self, counts: Iterable[int]) -> None:
        """Choose the pipeline degree of every (GPU count, tensor degree) not chosen yet."""
        gpu, per_node = self.model.gpu, self.model.gpus_per_node
        todo = [n for n in counts if n not in self.best]
        if not todo:
            return
        groups = [
            (n, tp, divisors(n // tp, MAX_PIPELINE_PARALLEL))
            for n in todo
            for tp in divisors(n, per_node)
        ]
        shapes = [Shape(gpu.name, n // (tp * pp), tp, pp) for n, tp, pps in groups for pp in pps]
        top = gpu.max_clock_mhz
        valid, sps, _, _ = self._grid(shapes, [top] * len(shapes), [True] * len(shapes))
        chosen: dict[int, list[tuple[int, Shape | None]]] = {n: [] for n in todo}
        i = 0
        for n, tp, pps in groups:
            best: tuple[float, Shape] | None = None
            for k in range(i, i + len(pps)):  # the first of equal throughputs wins, as before
                if valid[k] and (best is None or sps[k] > best[0]):
                    best = (sps[k], shapes[k])
            i += len(pps)
            chosen[n].append((tp, None if best is None else best[1]))
        for n, per_tp in chosen.items():
            self.best[n] = tuple(per_tp)

    def add_points(self, wanted: Iterable[tuple[Shape, bool]]) -> None:
        """Estimate every (shape, check_memory) not estimated yet at the offered clocks."""
        todo = list(dict.fromkeys(w for w in wanted if w not in self.points))
        if not todo:
            return
        clocks = self.model.clocks_mhz
        shapes = [s for s, _ in todo for _ in clocks]
        checks = [c for _, c in todo for _ in clocks]
        valid, sps, watts, memory = self._grid(shapes, list(clocks) * len(todo), checks)
        for k, key in enumerate(todo):
            at = k * len(clocks)
            self.points[key] = tuple(
                (clock, sps[at + i], watts[at + i], memory[at + i])
                for i, clock in enumerate(clocks)
                if valid[at + i]
            )


@functools.lru_cache(maxsize=256)
def model_table(spec: ModelSpec, model: TypeModel, folder: Path) -> ModelTable:
    """One table per architecture, GPU type and models folder (whose constants it uses), kept
    between solves: the model's constants do not change within a process."""
    return ModelTable(spec, model)


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
    below: list[int] = []
    for clock in clocks:
        if clock in out or clock > hi:
            continue
        if clock >= lo and len(measured) > 1:
            out[clock] = throughput.interpolate_clock(measured, clock)
        elif clock < lo:
            below.append(clock)
    if below:
        c0, s0, w0 = measured[0]
        carried = throughput.rescale_clocks(s0, w0, pts[0].num_gpus, gpu, c0, below)
        out.update(zip(below, carried, strict=True))
    return [(c, s, w, memory) for c, (s, w) in sorted(out.items(), reverse=True)]


@functools.lru_cache(maxsize=4096)
def _operating_points(
    points: tuple[ProfilePoint, ...], gpu: GpuType, clocks: tuple[int, ...], folder: Path
) -> tuple[_Point, ...]:
    """profile_operating_points, kept between solves (per models folder, whose clock model
    carries a measured point to lower clocks): alike profiles recur in every part and solve."""
    return tuple(profile_operating_points(points, gpu, clocks))


class Enumerator:
    """Rows of jobs against one cluster's facts, sharing every result between alike jobs."""

    def __init__(self, facts: Mapping[str, TypeFacts]) -> None:
        self.facts = facts
        self.folder = models_dir()
        self._nodes: dict[tuple[str, int, int], int | None] = {}
        self._racks: dict[tuple[str, int], int] = {}
        self._tables: dict[tuple[ModelSpec, str], ModelTable] = {}
        self._model_rows: dict[tuple[ModelSpec, str, Shape, bool], list[Row]] = {}
        self._profile_rows: dict[tuple[ProfilePoint, ...], list[Row]] = {}

    def row(
        self,
        facts: TypeFacts,
        shape: Shape,
        point: _Point,
        measured: bool,
        kept_only: bool,
    ) -> Row | None:
        """The configuration's row, with its fewest nodes and racks; None where no node
        holds it or it does not train."""
        name, n, tp = shape.gpu_type, shape.num_gpus, shape.tensor_parallel
        key = (name, n, tp)
        if key not in self._nodes:
            self._nodes[key] = min_nodes(n, tp, facts.node_capacities)
        nodes = self._nodes[key]
        clock, sps, watts, memory = point
        if nodes is None or sps <= 0:
            return None
        racks = self._racks.get((name, n))
        if racks is None:
            racks = self._racks[name, n] = min_racks(n, facts.rack_capacities)
        return (shape, clock, sps, watts, memory, nodes, racks, measured, kept_only)

    def table(self, spec: ModelSpec, facts: TypeFacts) -> ModelTable:
        key = (spec, facts.gpu.name)
        table = self._tables.get(key)
        if table is None:
            model = TypeModel(
                facts.gpu, facts.gpus_per_node, facts.network_bandwidth_gbps, facts.clocks_mhz
            )
            table = self._tables[key] = model_table(spec, model, self.folder)
        return table

    def _wanted(self, job: Job, table: ModelTable, facts: TypeFacts) -> list[tuple[Shape, bool]]:
        """(shape, check_memory) of the job's analytic rows: per GPU count and tensor degree,
        the best pipeline degree; and the running shape, estimated even where the memory model
        rejects it, since it demonstrably runs (the checker accepts it where it stays)."""
        current = job.current.shape if job.current is not None else None
        wanted: list[tuple[Shape, bool]] = []
        for n in gpu_counts(job):
            for tp, best in table.best[n]:
                if best is not None:
                    wanted.append((best, best != current))
                if (
                    current is not None
                    and current != best
                    and current.gpu_type == facts.gpu.name
                    and current.num_gpus == n
                    and current.tensor_parallel == tp
                ):
                    wanted.append((current, False))
        return wanted

    def _model_jobs(self, jobs: Iterable[Job]) -> list[tuple[Job, ModelTable, TypeFacts]]:
        return [
            (job, self.table(job.workload, f), f)
            for job in jobs
            if isinstance(job.workload, ModelSpec)
            for name, f in self.facts.items()
            if job.allows(name)
        ]

    def prepare(self, jobs: Iterable[Job]) -> None:
        """Evaluate the model for all these jobs at once: one batch per table and step."""
        todo = self._model_jobs(jobs)
        counts: dict[ModelTable, set[int]] = {}
        for job, table, _ in todo:
            counts.setdefault(table, set()).update(gpu_counts(job))
        for table, ns in counts.items():
            table.add_counts(sorted(ns))
        wanted: dict[ModelTable, list[tuple[Shape, bool]]] = {}
        for job, table, f in todo:
            wanted.setdefault(table, []).extend(self._wanted(job, table, f))
        for table, points in wanted.items():
            table.add_points(points)

    def model_rows(self, job: Job, spec: ModelSpec, facts: TypeFacts) -> list[Row]:
        """The job's analytic rows on one GPU type (see `_wanted`)."""
        table = self.table(spec, facts)
        table.add_counts(gpu_counts(job))
        wanted = self._wanted(job, table, facts)
        out: list[Row] = []
        name = facts.gpu.name
        for shape, check in wanted:
            rows = self._model_rows.get((spec, name, shape, check))
            if rows is None:
                table.add_points(wanted)
                rows = self._model_rows[spec, name, shape, check] = self._shape_rows(
                    facts, shape, table.points[shape, check]
                )
            out.extend(rows)
        return out

    def _shape_rows(self, facts: TypeFacts, shape: Shape, points: Iterable[_Point]) -> list[Row]:
        rows: list[Row] = []
        for point in points:
            row = self.row(facts, shape, point, False, point[3] > facts.gpu.memory_gib)
            if row is not None:
                rows.append(row)
        return rows

    def profile_rows(self, job: Job, profile: ThroughputProfile) -> list[Row]:
        groups: dict[Shape, list[ProfilePoint]] = {}
        for p in profile.points:
            if p.mig_profile or p.gpu_type not in self.facts or not job.allows(p.gpu_type):
                continue  # (a MIG point measures a slice, not a whole GPU)
            if not job.min_gpus <= p.num_gpus <= job.max_gpus:
                continue
            dp = p.num_gpus // (p.tensor_parallel * p.pipeline_parallel)
            shape = Shape(p.gpu_type, dp, p.tensor_parallel, p.pipeline_parallel)
            groups.setdefault(shape, []).append(p)
        out: list[Row] = []
        for shape, pts in groups.items():
            key = tuple(pts)
            rows = self._profile_rows.get(key)
            if rows is None:
                rows = self._profile_rows[key] = self._measured_rows(shape, pts)
            out.extend(rows)
        return out

    def _measured_rows(self, shape: Shape, pts: Sequence[ProfilePoint]) -> list[Row]:
        f = self.facts[shape.gpu_type]
        if shape.tensor_parallel > f.gpus_per_node:
            return []
        rows: list[Row] = []
        for point in _operating_points(tuple(pts), f.gpu, f.clocks_mhz, self.folder):
            if point[3] > f.gpu.memory_gib:
                continue
            row = self.row(f, shape, point, True, False)
            if row is not None:
                rows.append(row)
        return rows

    def rows(self, job: Job) -> list[Row]:
        """Every configuration of the job that fits, before Pareto filtering."""
        if isinstance(job.workload, ThroughputProfile):
            return self.profile_rows(job, job.workload)
        out: list[Row] = []
        for name, f in self.facts.items():
            if job.allows(name):
                out.extend(self.model_rows(job, job.workload, f))
        return out
