"""Helpers of the validation and input-limit tests (tests/test_validation_*.py,
tests/test_input_limits_*.py): paths of make_request()'s fields, mutations that set or extend
a field given by its path, and a well-formed plan for make_request()."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from tests.factories import A100_80GB

Mutation = Callable[[pb.SolveRequest], object]
NAN = math.nan
INF = math.inf

P0 = "cluster.gpu_types[0]"
N = "cluster.nodes"
CA = "jobs[2].current_allocation"
BP = "jobs[1].profile.points"


def _set(path: str, value: object) -> Callable[[Any], None]:
    """Sets a field given by its path, e.g. ``jobs[1].profile.points[0].watts``."""

    def mutate(msg: Any) -> None:
        obj = msg
        parts = path.replace("[", ".").replace("]", "").split(".")
        for part in parts[:-1]:
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        last = parts[-1]
        if last.isdigit():
            obj[int(last)] = value
        else:
            setattr(obj, last, value)

    return mutate


def _extend(path: str, values: list[Any]) -> Callable[[Any], None]:
    """Appends values to a repeated field given by its path."""

    def mutate(msg: Any) -> None:
        obj = msg
        for part in path.replace("[", ".").replace("]", "").split("."):
            obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
        obj.extend(values)

    return mutate


def make_plan() -> pb.Plan:
    """A well-formed plan for make_request(): llm on a100-1, bert queued, resnet stays."""
    return pb.Plan(
        assignments=[
            pb.JobAssignment(
                job="llm",
                state=pb.JOB_STATE_RUNNING,
                gpu_type=A100_80GB,
                num_gpus=2,
                data_parallel=2,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=1410,
                placement=[pb.GpuSlice(node="a100-1", gpu_indices=[0, 1])],
            ),
            pb.JobAssignment(
                job="bert",
                state=pb.JOB_STATE_QUEUED,
                queue_reason=pb.QUEUE_REASON_INSUFFICIENT_RESOURCES,
            ),
            pb.JobAssignment(
                job="resnet",
                state=pb.JOB_STATE_RUNNING,
                gpu_type=A100_80GB,
                data_parallel=4,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=1410,
                placement=[pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3])],
            ),
        ]
    )
