"""The hand-checkable instances (``instances/tiny-*.json``): one node each, an optimum plain by
hand (instances/README.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import gpu_type_to_proto, model_spec_to_proto
from solver.domain import GpuType
from solver.offline.generate.cluster import NETWORK_GBPS
from solver.offline.generate.data import gavel_workloads
from solver.offline.generate.jobs import profile_points
from solver.perfmodel.catalog import load_architectures, load_gpu_catalog


def _tiny_request(
    catalog: Mapping[str, GpuType], gpu_type: str, jobs: Sequence[pb.Job]
) -> pb.SolveRequest:
    request = pb.SolveRequest()
    request.cluster.gpu_types.append(gpu_type_to_proto(catalog[gpu_type]))
    request.cluster.nodes.append(
        pb.Node(
            name=f"{gpu_type.lower()}-000",
            gpu_type=gpu_type,
            gpu_count=8,
            rack="rack-00",
            network_bandwidth_gbps=NETWORK_GBPS[gpu_type],
        )
    )
    request.jobs.extend(jobs)
    request.options.time_budget.FromSeconds(5)
    return request


def _tiny_profile_job(
    catalog: Mapping[str, GpuType], label: str, num_gpus: int, weight: float, tenant: str
) -> pb.Job:
    """A rigid job with Gavel's V100 measurement of one network and batch size."""
    (w,) = [w for w in gavel_workloads(["V100-16GB"]) if w.label == label]
    points = profile_points(w, num_gpus, num_gpus, catalog)
    if len(points) != 1:
        raise ValueError(f"{label} has no monotone measurement at {num_gpus} GPUs")
    job = pb.Job(name=label.removeprefix("gavel-"), tenant=tenant, weight=weight)
    job.profile.points.extend(points)
    job.min_gpus = job.max_gpus = num_gpus
    return job


def tiny_instances() -> dict[str, pb.SolveRequest]:
    """Three one-node instances whose optimum is plain by hand (instances/README.md)."""
    catalog = load_gpu_catalog()
    v100 = "V100-16GB"
    one_node = _tiny_request(
        catalog,
        v100,
        [
            _tiny_profile_job(catalog, "gavel-resnet-50-bs64", 4, 2.0, "team-a"),
            _tiny_profile_job(catalog, "gavel-transformer-bs64", 4, 2.0, "team-b"),
            _tiny_profile_job(catalog, "gavel-lm-bs20", 8, 1.0, "team-c"),
        ],
    )

    a100 = "A100-80GB"
    big = pb.Job(name="gpt3-1.3b", tenant="team-a", weight=1.0, min_gpus=8, max_gpus=8)
    big.model.CopyFrom(model_spec_to_proto(load_architectures()["gpt3-1.3b"]))
    power = _tiny_request(catalog, a100, [big])
    power.cluster.power_budget_watts = 0.6 * 8 * catalog[a100].tdp_watts

    running = _tiny_profile_job(catalog, "gavel-resnet-50-bs64", 4, 1.0, "team-a")
    running.current_allocation.CopyFrom(
        pb.Allocation(
            gpu_type=v100,
            data_parallel=4,
            tensor_parallel=1,
            pipeline_parallel=1,
            sm_clock_mhz=catalog[v100].max_clock_mhz,
            placement=[pb.GpuSlice(node=f"{v100.lower()}-000", gpu_indices=[4, 5, 6, 7])],
        )
    )
    waiting = _tiny_profile_job(catalog, "gavel-transformer-bs64", 4, 1.0, "team-b")
    migration = _tiny_request(catalog, v100, [running, waiting])
    return {"tiny-1node": one_node, "tiny-power": power, "tiny-migration": migration}
