"""Validation of the MIG parts of a caller-made plan (EvaluatePlan): each slice assignment names
a profile of its GPU type's geometry on one GPU, each layout change a GPU of a known node
with known profiles. Whether the layouts are valid and the jobs fit is the checker's job
(solver.scoring.mig_checks), reported as plan violations."""

from __future__ import annotations

from collections.abc import Iterable

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert_mig import type_geometries
from solver.app.validation.common import Collector, quoted
from solver.app.validation.mig_geometry import valid_mig_geometry


def check_plan_mig(
    c: Collector, plan: pb.Plan, nodes: dict[str, pb.Node], types: Iterable[pb.GpuType]
) -> None:
    """Every MIG field of `plan` (the slice assignments' instances, the layout changes), against
    the geometries of the request's GPU types."""
    catalog = type_geometries(t for t in types if valid_mig_geometry(t))
    gpus = sum(n.gpu_count for n in nodes.values())
    if len(plan.layout_changes) > gpus:
        c.add("plan.layout_changes", f"at most one change per GPU ({gpus}), got "
              f"{len(plan.layout_changes)}")  # fmt: skip
        return
    for i, a in enumerate(plan.assignments):
        if not a.HasField("mig_instance"):
            continue
        p = f"plan.assignments[{i}]"
        geometry = catalog.get(a.gpu_type)
        if geometry is None or a.mig_instance.profile not in geometry.profiles:
            c.add(
                f"{p}.mig_instance.profile",
                f"unknown MIG profile {quoted(a.mig_instance.profile)} for {quoted(a.gpu_type)}",
            )
        if (a.data_parallel, a.tensor_parallel, a.pipeline_parallel) != (1, 1, 1):
            c.add(f"{p}.data_parallel", "a job on a MIG instance has shape 1 x 1 x 1")
        if len(a.placement) != 1 or len(a.placement[0].gpu_indices) != 1:
            c.add(f"{p}.placement", "a job on a MIG instance is placed on exactly one GPU")
    for k, change in enumerate(plan.layout_changes):
        p = f"plan.layout_changes[{k}]"
        node = nodes.get(change.node)
        if node is None:
            c.add(f"{p}.node", f"unknown node {quoted(change.node)}")
            continue
        if not 0 <= change.layout.gpu_index < node.gpu_count:
            c.add(
                f"{p}.layout.gpu_index",
                f"must be in [0, {node.gpu_count}) for node {quoted(node.name)}, "
                f"got {change.layout.gpu_index}",
            )
        geometry = catalog.get(node.gpu_type)
        if geometry is None:
            c.add(f"{p}.node", f"{quoted(node.gpu_type)} has no MIG geometry")
            continue
        if len(change.layout.instances) > geometry.memory_slices:
            c.add(f"{p}.layout.instances", f"at most {geometry.memory_slices} instances")
            continue
        for m, inst in enumerate(change.layout.instances):
            if inst.profile not in geometry.profiles:
                c.add(
                    f"{p}.layout.instances[{m}].profile",
                    f"unknown MIG profile {quoted(inst.profile)} for {quoted(node.gpu_type)}",
                )
