"""GPU types under the names sites give them, for benchmarks of snapshots no test was written for.

``kubernetes``: the product names NVIDIA's GPU feature discovery labels nodes with
(``nvidia.com/gpu.product``); ``own``: names no catalog knows, each MIG-capable type bringing its
catalog geometry on the wire (``GpuType.mig``). The figures stay the catalog's, so a plan can
only change where the name is what the solver reads (the efficiency's family, the geometry).
"""

from __future__ import annotations

from collections.abc import Mapping

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert_mig import geometry_to_proto
from solver.perfmodel.mig_catalog import load_mig_catalog

MODES = ("catalog", "kubernetes", "own")
KUBERNETES = {
    "K80": "Tesla-K80",
    "P100-16GB": "Tesla-P100-PCIE-16GB",
    "V100-16GB": "Tesla-V100-SXM2-16GB",
    "V100-32GB": "Tesla-V100-SXM2-32GB",
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "H100-80GB": "NVIDIA-H100-80GB-HBM3",
    "H200": "NVIDIA-H200",
    "L40S": "NVIDIA-L40S",
    "A10": "NVIDIA-A10",
    "T4": "Tesla-T4",
}


def rename_gpu_types(request: pb.SolveRequest, names: Mapping[str, str]) -> None:
    """Every GPU type of the request renamed wherever a type is named (types, nodes, quotas,
    jobs' allowed types, profile points, current allocations); names not in ``names`` stay."""

    def new(name: str) -> str:
        return names.get(name, name)

    for t in request.cluster.gpu_types:
        t.name = new(t.name)
    for n in request.cluster.nodes:
        n.gpu_type = new(n.gpu_type)
    for q in request.cluster.queues:
        for quota in q.quotas:
            quota.resource = new(quota.resource)
    for j in request.jobs:
        allowed = [new(x) for x in j.allowed_gpu_types]
        del j.allowed_gpu_types[:]
        j.allowed_gpu_types.extend(allowed)
        for point in j.profile.points:
            point.gpu_type = new(point.gpu_type)
        if j.HasField("current_allocation"):
            j.current_allocation.gpu_type = new(j.current_allocation.gpu_type)


def as_sites_name(request: pb.SolveRequest, mode: str) -> None:
    """The request's GPU types under ``mode``'s names (``MODES``)."""
    if mode == "catalog":
        return
    if mode == "kubernetes":
        types = request.cluster.gpu_types
        names = {t.name: KUBERNETES.get(t.name, f"NVIDIA-{t.name}") for t in types}
    elif mode == "own":
        catalog = load_mig_catalog()
        names = {}
        for i, t in enumerate(request.cluster.gpu_types):
            if t.name in catalog:
                t.mig.CopyFrom(geometry_to_proto(catalog[t.name]))
            names[t.name] = f"site-gpu-{i}"
    else:
        raise ValueError(f"unknown naming {mode!r} (one of {', '.join(MODES)})")
    rename_gpu_types(request, names)
