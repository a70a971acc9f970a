"""Slice jobs of an instance (docs/mig.md): small one-GPU training jobs that may run on a MIG
instance of a GPU type with a MIG geometry, the evaluation, fine-tuning and debugging jobs that
make up most of a shared cluster's job count."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import model_spec_to_proto
from solver.domain import GpuType
from solver.offline.generate.cluster import _Cluster
from solver.offline.generate.spec import SpecError
from solver.perfmodel.catalog import load_architectures
from solver.perfmodel.mig_catalog import load_mig_catalog

SLICE_ARCHITECTURES = ("bert-large", "gpt3-1.3b", "gpt2-xl")
"""Architectures of ``models/architectures.json`` small enough for one GPU: their training
state (16 bytes a parameter) is 5.1, 19.4 and 22.4 GiB, so they fit 1g, 2g and 3g instances
of an 80 GB GPU at micro-batch 1 (the memory model says which exactly)."""


def mig_types(cluster: _Cluster) -> list[str]:
    """The cluster's GPU types with a MIG geometry in the catalog."""
    geometry = load_mig_catalog()
    return [t for t in cluster.types() if t in geometry]


def fill_slice_job(
    rng: np.random.Generator,
    running_share: float,
    cluster: _Cluster,
    catalog: Mapping[str, GpuType],
    job: pb.Job,
) -> float:
    """Fill a slice job: one GPU of a MIG type, slices allowed, some running on a whole GPU
    (where the plan may partition it). Returns its reference rate (peak-FLOPs bound)."""
    types = mig_types(cluster)
    if not types:
        raise SpecError(
            "slice_share",
            f"slice jobs need a GPU type with a MIG geometry (models/mig_profiles.json); the "
            f"cluster's types {cluster.types()} have none",
        )
    name = SLICE_ARCHITECTURES[int(rng.integers(len(SLICE_ARCHITECTURES)))]
    arch = load_architectures()[name]
    job.name = f"{job.name}-{name}-slice"
    job.model.CopyFrom(model_spec_to_proto(arch))
    job.min_gpus = job.max_gpus = 1
    if types != cluster.types():
        job.allowed_gpu_types.extend(types)
    job.slices.allow = True
    if rng.random() < running_share:
        free = [t for t in types if cluster.free_of(t) >= 1]
        if free:
            t = free[int(rng.integers(len(free)))]
            placement = cluster.place(t, 1, 1)
            if placement is not None:
                job.current_allocation.CopyFrom(
                    pb.Allocation(
                        gpu_type=t,
                        data_parallel=1,
                        tensor_parallel=1,
                        pipeline_parallel=1,
                        sm_clock_mhz=catalog[t].max_clock_mhz,
                        placement=placement,
                    )
                )
    best = max(catalog[t].peak_tflops for t in types)
    return best * 1e12 / (6 * arch.parameters * arch.sequence_length)
