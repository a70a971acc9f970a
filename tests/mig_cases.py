"""Small hand-built MIG snapshots whose right answer is known (tests/test_mig_solve*.py)."""

from __future__ import annotations

import dataclasses

from solver.domain import (
    Allocation,
    Backend,
    Cluster,
    GpuSlice,
    Job,
    Node,
    ObjectiveWeights,
    Problem,
    ProfilePoint,
    Shape,
    SolveOptions,
    ThroughputProfile,
)
from solver.mig import GpuLayout, MigInstance, SliceRequest
from solver.perfmodel.mig_catalog import load_mig_catalog
from tests.factories import A100

T = "A100-80GB"
GPU = dataclasses.replace(A100, name=T)
GEOMETRY = load_mig_catalog()[T]
ONE_G = "1g.10gb"


def small(
    name: str,
    *,
    measured: float | None = 40.0,
    memory: float = 8.0,
    current: Allocation | None = None,
    preemptible: bool = True,
    slices: SliceRequest | None = SliceRequest(),  # noqa: B008 (frozen)
) -> Job:
    """A one-GPU job that may run on slices: 100 samples/s and 300 W on a whole GPU; with
    `measured`, that many samples/s and 40 W above idle measured on a 1g.10gb instance (small
    jobs use a whole GPU poorly)."""
    points = [ProfilePoint(T, 1, 1, 1, 1410, 100.0, 300.0, memory)]
    if measured is not None:
        points.append(ProfilePoint(T, 1, 1, 1, 1410, measured, 40.0, memory, mig_profile=ONE_G))
    return Job(name, "t", 1.0, ThroughputProfile(tuple(points)), 1, 1, frozenset(),
               current=current, preemptible=preemptible, slices=slices)  # fmt: skip


def on_instance(node: str, gpu: int, profile: str, start: int, clock: int = 1410) -> Allocation:
    return Allocation(
        Shape(T, 1, 1, 1), clock, (GpuSlice(node, (gpu,)),), MigInstance(profile, start)
    )


def large(name: str = "large") -> Job:
    """A two-GPU job (no slices): 180 samples/s on two GPUs, nothing on one."""
    points = (ProfilePoint(T, 2, 1, 1, 1410, 180.0, 600.0, 10.0),)
    return Job(name, "t", 1.0, ThroughputProfile(points), 2, 2, frozenset())


def problem(
    *jobs: Job,
    gpus: int = 1,
    layouts: tuple[GpuLayout, ...] = (),
    power: float | None = None,
    backend: Backend = Backend.HEURISTIC,
) -> Problem:
    """One node `n0` of `gpus` A100-80GB GPUs (rack r0) with these MIG layouts."""
    node = Node("n0", T, gpus, frozenset(), "r0", 100.0, layouts)
    cluster = Cluster({T: GPU}, (node,), power, mig={T: GEOMETRY})
    options = SolveOptions(time_budget_seconds=2.0, backend=backend, threads=1)
    return Problem(cluster, tuple(jobs), ObjectiveWeights(), options)
