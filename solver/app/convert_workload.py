"""A job's workload (its model, or its measured throughput profile) between the wire and the
domain. A request may carry 500,000 profile points, so they are read field by field."""

from __future__ import annotations

import dataclasses

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import ModelSpec, ProfilePoint, ThroughputProfile, Workload

_MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelSpec))


def workload_from_proto(j: pb.Job) -> Workload:
    if j.WhichOneof("workload") == "model":
        return ModelSpec(**{name: getattr(j.model, name) for name in _MODEL_FIELDS})
    return ThroughputProfile(points=tuple(profile_point_from_proto(p) for p in j.profile.points))


def profile_point_from_proto(p: pb.ProfilePoint) -> ProfilePoint:
    """By position, not by name: looking the names up took a third of the points' conversion
    (tests/test_convert.py checks that each position is the field of that name)."""
    return ProfilePoint(
        p.gpu_type,
        p.num_gpus,
        p.tensor_parallel,
        p.pipeline_parallel,
        p.sm_clock_mhz,
        p.samples_per_second,
        p.watts,
        p.memory_per_gpu_gib,
        p.mig_profile,
    )


def model_spec_to_proto(m: ModelSpec) -> pb.ModelSpec:
    return pb.ModelSpec(**dataclasses.asdict(m))


def workload_to_proto(job: pb.Job, workload: Workload) -> None:
    """Set the job's model or measured profile (its ``workload`` oneof)."""
    if isinstance(workload, ModelSpec):
        job.model.CopyFrom(model_spec_to_proto(workload))
    else:
        job.profile.CopyFrom(
            pb.ThroughputProfile(
                points=[pb.ProfilePoint(**dataclasses.asdict(p)) for p in workload.points]
            )
        )
