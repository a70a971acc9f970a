"""Protobuf <-> domain conversion of MIG partitions (layouts, slice requests, instances).

Part of the edge (``solver.app.convert``); the geometry of each GPU type is the snapshot's own
(``GpuType.mig``) or the catalog's (``models/mig_profiles.json``, by name or by family and
memory), and only for snapshots that use MIG, so that everything else converts exactly as
before.
"""

from __future__ import annotations

from collections.abc import Iterable

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.mig import (
    GpuLayout,
    LayoutChange,
    MigGeometry,
    MigInstance,
    MigProfile,
    SliceRequest,
    k8s_resource,
    slurm_gres,
)
from solver.perfmodel.mig_catalog import catalog_type_for, geometry_for


def uses_mig(req: pb.SolveRequest) -> bool:
    """Whether the snapshot has a MIG layout or a job that may run on a slice."""
    return any(n.mig_layouts for n in req.cluster.nodes) or any(
        j.HasField("slices") and j.slices.allow for j in req.jobs
    )


def geometry_from_proto(name: str, m: pb.MigGeometry) -> MigGeometry:
    """A geometry the snapshot brings (``GpuType.mig``), starts sorted."""
    profiles = {
        p.name: MigProfile(
            p.name,
            p.compute_slices,
            p.memory_slices,
            p.memory_gib,
            p.max_count,
            tuple(sorted(set(p.starts))),
            p.media_extensions,
        )
        for p in m.profiles
    }
    return MigGeometry(name, m.compute_slices, m.memory_slices, profiles)


def profile_to_proto(p: MigProfile) -> pb.MigProfile:
    return pb.MigProfile(
        name=p.name,
        compute_slices=p.compute_slices,
        memory_slices=p.memory_slices,
        memory_gib=p.memory_gib,
        max_count=p.max_count,
        starts=p.starts,
        media_extensions=p.media_extensions,
    )


def geometry_to_proto(g: MigGeometry) -> pb.MigGeometry:
    """A geometry as a snapshot gives it (``GpuType.mig``)."""
    return pb.MigGeometry(
        compute_slices=g.compute_slices,
        memory_slices=g.memory_slices,
        profiles=[profile_to_proto(p) for p in g.profiles.values()],
    )


def type_geometry(t: pb.GpuType) -> MigGeometry | None:
    """A GPU type's MIG geometry: its own (``GpuType.mig``), else the catalog's
    (``solver.perfmodel.mig_catalog.geometry_for``); None when it has none."""
    if t.HasField("mig"):
        return geometry_from_proto(t.name, t.mig)
    return geometry_for(t.name, t.memory_gib)


def geometry_source(t: pb.GpuType) -> str:
    """Where a GPU type's geometry comes from: "snapshot", the catalog type that lends it, or ""
    (none)."""
    if t.HasField("mig"):
        return "snapshot"
    return catalog_type_for(t.name, t.memory_gib) or ""


def type_geometries(types: Iterable[pb.GpuType]) -> dict[str, MigGeometry]:
    """The geometry of each GPU type that has one, by name."""
    return {t.name: g for t in types if (g := type_geometry(t)) is not None}


def geometries(req: pb.SolveRequest) -> dict[str, MigGeometry]:
    """The geometry of each of the snapshot's GPU types that has one; {} without MIG."""
    if not uses_mig(req):
        return {}
    return type_geometries(req.cluster.gpu_types)


def instance_from_proto(m: pb.MigInstance) -> MigInstance:
    return MigInstance(profile=m.profile, start=m.start, job=m.job)


def instance_to_proto(m: MigInstance) -> pb.MigInstance:
    return pb.MigInstance(profile=m.profile, start=m.start, job=m.job)


def layout_from_proto(layout: pb.MigLayout) -> GpuLayout:
    return GpuLayout(
        gpu_index=layout.gpu_index,
        instances=tuple(instance_from_proto(m) for m in layout.instances),
    )


def layout_to_proto(layout: GpuLayout) -> pb.MigLayout:
    return pb.MigLayout(
        gpu_index=layout.gpu_index, instances=[instance_to_proto(m) for m in layout.instances]
    )


def layouts_from_proto(node: pb.Node) -> tuple[GpuLayout, ...]:
    """A node's layouts; an entry without instances (MIG off) is dropped: whole is the default."""
    return tuple(layout_from_proto(x) for x in node.mig_layouts if x.instances)


def slices_from_proto(job: pb.Job) -> SliceRequest | None:
    if not job.HasField("slices") or not job.slices.allow:
        return None
    return SliceRequest(job.slices.smallest_profile, job.slices.largest_profile)


def slices_to_proto(request: SliceRequest) -> pb.SliceRequest:
    return pb.SliceRequest(
        allow=True,
        smallest_profile=request.smallest_profile,
        largest_profile=request.largest_profile,
    )


def set_assignment_instance(out: pb.JobAssignment, instance: MigInstance | None) -> None:
    """The assignment's instance and its names for Kubernetes and Slurm."""
    if instance is None:
        return
    out.mig_instance.CopyFrom(pb.MigInstance(profile=instance.profile, start=instance.start))
    out.mig_resource = k8s_resource(instance.profile)
    out.slurm_gres = slurm_gres(instance.profile)


def changes_to_proto(changes: Iterable[LayoutChange]) -> list[pb.MigLayoutChange]:
    return [pb.MigLayoutChange(node=c.node, layout=layout_to_proto(c.layout)) for c in changes]


def changes_from_proto(plan: pb.Plan) -> tuple[LayoutChange, ...]:
    return tuple(LayoutChange(c.node, layout_from_proto(c.layout)) for c in plan.layout_changes)
