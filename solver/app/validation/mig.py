"""Validation of MIG partitions: nodes' layouts, jobs' slice requests, allocations on slices.

A layout must be one the GPU type's geometry allows (``solver.mig.layout_problems``),
every busy instance must name a job whose current allocation is that instance (and the other
way round), and a job that may run on a slice must fit one: one GPU, a known profile range,
memory within the largest allowed profile's.
"""

from __future__ import annotations

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert_mig import type_geometries, uses_mig
from solver.app.validation.common import Collector, quoted
from solver.app.validation.jobs import check_model
from solver.app.validation.mig_geometry import valid_mig_geometry
from solver.domain import ModelSpec, Shape
from solver.mig import MigGeometry, MigInstance, SliceRequest, layout_problems
from solver.perfmodel.mig_catalog import FILE, load_mig_catalog
from solver.perfmodel.throughput import memory_per_gpu_gib


def _no_geometry() -> str:
    """How a GPU type gets a geometry, for the messages that find none."""
    known = ", ".join(sorted(load_mig_catalog()))
    return (
        f"give it GpuType.mig, or the name and memory_gib of a type of models/{FILE} ({known}) or "
        "of its family, e.g. NVIDIA-A100-SXM4-80GB with 80 GiB"
    )


Place = tuple[str, int, str, int]
"""(node, GPU index, profile, start) of an instance."""


def check_mig(
    c: Collector,
    req: pb.SolveRequest,
    nodes: dict[str, pb.Node],
    claims: dict[tuple[str, int], tuple[int, str]],
) -> None:
    """Every MIG field of the request; `claims` are the GPUs held by whole-GPU allocations."""
    if not uses_mig(req) and not any(
        j.current_allocation.HasField("mig_instance")
        or any(q.mig_profile for q in j.profile.points)
        for j in req.jobs
    ):
        return
    catalog = type_geometries(t for t in req.cluster.gpu_types if valid_mig_geometry(t))
    jobs = {j.name: (i, j) for i, j in enumerate(req.jobs)}
    busy = _check_layouts(c, req, catalog, claims, jobs)
    for i, job in enumerate(req.jobs):
        if job.HasField("slices") and job.slices.allow:
            _check_slice_request(c, f"jobs[{i}]", job, req, catalog)
        if job.current_allocation.HasField("mig_instance"):
            _check_slice_allocation(c, i, job, nodes, busy)
        for k, q in enumerate(job.profile.points):
            if q.mig_profile:
                _check_mig_point(c, f"jobs[{i}].profile.points[{k}]", q, catalog)


def _check_mig_point(
    c: Collector, p: str, q: pb.ProfilePoint, catalog: dict[str, MigGeometry]
) -> None:
    """A point measured on a MIG instance: a profile of its GPU type, on one GPU."""
    g = catalog.get(q.gpu_type)
    if g is None or q.mig_profile not in g.profiles:
        c.add(
            f"{p}.mig_profile",
            f"unknown MIG profile {quoted(q.mig_profile)} for {quoted(q.gpu_type)}",
        )
    if (q.num_gpus, q.tensor_parallel, q.pipeline_parallel) != (1, 1, 1):
        c.add(f"{p}.num_gpus", "a MIG point is one instance: num_gpus, tensor and pipeline 1")


def _check_layouts(
    c: Collector,
    req: pb.SolveRequest,
    catalog: dict[str, MigGeometry],
    claims: dict[tuple[str, int], tuple[int, str]],
    jobs: dict[str, tuple[int, pb.Job]],
) -> dict[str, Place]:
    """Each node's layouts; returns where each busy instance's job runs."""
    busy: dict[str, Place] = {}
    for i, n in enumerate(req.cluster.nodes):
        seen: set[int] = set()
        geometry = catalog.get(n.gpu_type)
        for k, layout in enumerate(n.mig_layouts):
            lp = f"cluster.nodes[{i}].mig_layouts[{k}]"
            g = layout.gpu_index
            if not 0 <= g < n.gpu_count:
                c.add(f"{lp}.gpu_index", f"must be in [0, {n.gpu_count}), got {g}")
                continue
            if g in seen:
                c.add(f"{lp}.gpu_index", f"GPU {g} has a layout already")
                continue
            seen.add(g)
            if not layout.instances:
                continue
            if geometry is None:
                c.add(lp, f"gpu type {quoted(n.gpu_type)} has no MIG geometry ({_no_geometry()})")
                continue
            if (n.name, g) in claims:
                holder = claims[(n.name, g)]
                c.add(lp, f"GPU {g} is in the whole-GPU allocation of jobs[{holder[0]}]")
            good = _check_instances(c, lp, layout, geometry)
            for problem in layout_problems(geometry, good):
                c.add(f"{lp}.instances", f"cannot exist on {n.gpu_type}: {problem}")
            for m, inst in enumerate(layout.instances):
                if not inst.job:
                    continue
                jp = f"{lp}.instances[{m}].job"
                if inst.job not in jobs:
                    c.add(jp, f"unknown job {quoted(inst.job)}")
                elif inst.job in busy:
                    c.add(jp, f"job {quoted(inst.job)} is on another instance already")
                else:
                    busy[inst.job] = (n.name, g, inst.profile, inst.start)
                    a = jobs[inst.job][1].current_allocation
                    if not a.HasField("mig_instance"):
                        c.add(jp, f"job {quoted(inst.job)} has no current_allocation.mig_instance")
    return busy


def _check_instances(
    c: Collector, lp: str, layout: pb.MigLayout, geometry: MigGeometry
) -> list[MigInstance]:
    """Per instance: known profile, valid start. Returns the instances that pass both."""
    good: list[MigInstance] = []
    for m, inst in enumerate(layout.instances):
        ip = f"{lp}.instances[{m}]"
        p = geometry.profiles.get(inst.profile)
        if p is None:
            known = ", ".join(sorted(geometry.profiles))
            c.add(f"{ip}.profile", f"unknown MIG profile {quoted(inst.profile)} ({known})")
        elif inst.start not in p.starts:
            starts = ", ".join(map(str, p.starts))
            c.add(f"{ip}.start", f"{p.name} cannot start at {inst.start} (valid: {starts})")
        else:
            good.append(MigInstance(inst.profile, inst.start))
    return good


def _allowed_geometries(
    job: pb.Job, req: pb.SolveRequest, catalog: dict[str, MigGeometry]
) -> list[MigGeometry]:
    names = {t.name for t in req.cluster.gpu_types}
    allowed = set(job.allowed_gpu_types) or names
    return [catalog[t] for t in sorted(allowed & names) if t in catalog]


def _check_slice_request(
    c: Collector, p: str, job: pb.Job, req: pb.SolveRequest, catalog: dict[str, MigGeometry]
) -> None:
    sp = f"{p}.slices"
    if job.min_gpus > 1:
        c.add(
            f"{sp}.allow",
            f"a slice job runs on one instance of one GPU: min_gpus is {job.min_gpus}",
        )
        return
    geometries = _allowed_geometries(job, req, catalog)
    if not geometries:
        c.add(sp, f"no GPU type the job may use has a MIG geometry ({_no_geometry()})")
        return
    request = SliceRequest(job.slices.smallest_profile, job.slices.largest_profile)
    for field in ("smallest_profile", "largest_profile"):
        name = getattr(job.slices, field)
        if name and not any(name in g.profiles for g in geometries):
            c.add(f"{sp}.{field}", f"unknown MIG profile {quoted(name)} for the job's GPU types")
            return
    offered = [(g, q) for g in geometries for q in g.plannable() if request.allows(g, q.name)]
    if not offered:
        c.add(sp, "no profile lies between smallest_profile and largest_profile")
        return
    need = _slice_memory(job)
    room = max(q.memory_gib for _, q in offered)
    if need is not None and need > room:
        c.add(
            sp,
            f"the job needs {need:.1f} GiB on one GPU; the largest MIG instance it allows has "
            f"{room:g} GiB: it fits no slice",
        )


def _slice_memory(job: pb.Job) -> float | None:
    """Least memory the job needs on one GPU; None when a profile measures a MIG point, or
    when its model is malformed (reported on its own fields: read, it divides by zero)."""
    if job.WhichOneof("workload") == "model":
        m = job.model
        malformed = Collector()
        check_model(malformed, "model", m)
        if malformed.out:
            return None
        spec = ModelSpec(
            m.parameters, m.layers, m.hidden_size, m.attention_heads, m.sequence_length,
            m.global_batch_size,
        )  # fmt: skip
        return memory_per_gpu_gib(spec, Shape("", 1, 1, 1), 1)
    points = job.profile.points
    if any(q.mig_profile for q in points):
        return None
    ones = [q.memory_per_gpu_gib for q in points if q.num_gpus == 1]
    return min(ones) if ones else float("inf")


def _check_slice_allocation(
    c: Collector, i: int, job: pb.Job, nodes: dict[str, pb.Node], busy: dict[str, Place]
) -> None:
    p = f"jobs[{i}].current_allocation"
    a = job.current_allocation
    if not (job.HasField("slices") and job.slices.allow):
        c.add(f"{p}.mig_instance", "the job runs on a MIG instance but slices.allow is false")
    if (
        (a.data_parallel, a.tensor_parallel, a.pipeline_parallel) != (1, 1, 1)
        or len(a.placement) != 1
        or len(a.placement[0].gpu_indices) != 1
    ):
        c.add(f"{p}.placement", "a job on a MIG instance has one GPU (1 x 1 x 1)")
        return
    s = a.placement[0]
    where = (s.node, s.gpu_indices[0], a.mig_instance.profile, a.mig_instance.start)
    if busy.get(job.name) != where:
        node = nodes.get(s.node)
        c.add(
            f"{p}.mig_instance",
            f"{a.mig_instance.profile}@{a.mig_instance.start} on GPU {where[1]} of node "
            f"{quoted(s.node)} is not an instance of its layout with job {quoted(job.name)}"
            + ("" if node is not None else " (unknown node)"),
        )
