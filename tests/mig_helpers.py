"""A valid wire request with MIG layouts and slice jobs, shared by the MIG tests."""

from __future__ import annotations

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from tests.factories import A100_80GB, make_request


def small_job(req: pb.SolveRequest, name: str, *, memory: float = 8.0) -> pb.Job:
    """A one-GPU job that may run on slices, measured whole and on a 3g.40gb instance."""
    j = req.jobs.add(
        name=name, tenant="eval", min_gpus=1, max_gpus=1, allowed_gpu_types=[A100_80GB]
    )
    j.slices.allow = True
    j.profile.points.add(
        gpu_type=A100_80GB, num_gpus=1, tensor_parallel=1, pipeline_parallel=1,
        sm_clock_mhz=1410, samples_per_second=100.0, watts=300.0, memory_per_gpu_gib=memory,
    )  # fmt: skip
    return j


def make_mig_request() -> pb.SolveRequest:
    """``make_request()`` plus GPU 5 of ``a100-1`` partitioned as 3g.40gb@0 (running ``small``)
    and 1g.10gb@4 (free), and a waiting slice job ``tiny``."""
    req = make_request()
    node = next(n for n in req.cluster.nodes if n.name == "a100-1")
    node.mig_layouts.add(
        gpu_index=5,
        instances=[
            pb.MigInstance(profile="3g.40gb", start=0, job="small"),
            pb.MigInstance(profile="1g.10gb", start=4),
        ],
    )
    small = small_job(req, "small")
    small.current_allocation.CopyFrom(
        pb.Allocation(
            gpu_type=A100_80GB, data_parallel=1, tensor_parallel=1, pipeline_parallel=1,
            sm_clock_mhz=1410, placement=[pb.GpuSlice(node="a100-1", gpu_indices=[5])],
            mig_instance=pb.MigInstance(profile="3g.40gb", start=0),
        )
    )  # fmt: skip
    tiny = small_job(req, "tiny", memory=4.0)
    tiny.slices.largest_profile = "2g.20gb"
    return req
