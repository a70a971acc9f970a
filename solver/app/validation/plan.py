"""Validation of a caller-made plan against its request (EvaluatePlan): names resolve and
numbers are in range; whether the plan fits is the checker's job."""

from __future__ import annotations

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import MAX_GPU_WATTS, Limits
from solver.app.validation.common import Collector, FieldViolation, quoted
from solver.app.validation.jobs import placement_sizes, unsupported_clock
from solver.app.validation.plan_mig import check_plan_mig

_DEFAULT_LIMITS = Limits()


def validate_plan(
    req: pb.SolveRequest, plan: pb.Plan, limits: Limits = _DEFAULT_LIMITS
) -> list[FieldViolation]:
    """Malformed parts of a caller's plan: names that don't resolve, shapes that are missing,
    repeated fields over the limits.

    Whether the plan fits (capacity, power, memory, placement rules) is left to the checker,
    which reports it as plan violations rather than as invalid input.
    """
    c = Collector()
    jobs = {j.name for j in req.jobs}
    types = {t.name: t for t in req.cluster.gpu_types}
    nodes = {n.name: n for n in req.cluster.nodes}
    seen: dict[str, str] = {}
    if not c.count("plan.assignments", len(plan.assignments), limits.max_jobs, "max_jobs"):
        return c.out
    for i, a in enumerate(plan.assignments):
        p = f"plan.assignments[{i}]"
        if not a.job:
            c.add(f"{p}.job", "must not be empty")
        elif a.job not in jobs:
            c.add(f"{p}.job", f"unknown job {quoted(a.job)}")
        elif a.job in seen:
            c.add(f"{p}.job", f"duplicate assignment for job {quoted(a.job)} (also {seen[a.job]})")
        else:
            seen[a.job] = p
        if a.state == pb.JOB_STATE_QUEUED:
            if a.placement:
                c.add(f"{p}.placement", "must be empty for a JOB_STATE_QUEUED assignment")
            if a.HasField("power_limit_watts"):
                c.add(f"{p}.power_limit_watts", "must be unset for a JOB_STATE_QUEUED assignment")
        elif a.state == pb.JOB_STATE_RUNNING:
            if placement_sizes(c, p, a.placement, limits):
                _check_running(c, p, a, types, nodes)
            if a.HasField("power_limit_watts"):
                c.positive(f"{p}.power_limit_watts", a.power_limit_watts, MAX_GPU_WATTS)
        else:
            c.add(f"{p}.state", f"must be JOB_STATE_RUNNING or JOB_STATE_QUEUED, got {a.state}")
    for j in req.jobs:
        if j.name and j.name not in seen:
            c.add("plan.assignments", f"no assignment for job {quoted(j.name)}")
    check_plan_mig(c, plan, nodes, req.cluster.gpu_types)
    for k, action in enumerate(plan.power_actions):
        if action.node not in nodes:
            c.add(f"plan.power_actions[{k}].node", f"unknown node {quoted(action.node)}")
        if action.kind not in (pb.POWER_ACTION_KIND_SUSPEND, pb.POWER_ACTION_KIND_RESUME):
            c.add(f"plan.power_actions[{k}].kind", f"must be SUSPEND or RESUME, got {action.kind}")
    return c.out


def _check_running(
    c: Collector,
    p: str,
    a: pb.JobAssignment,
    types: dict[str, pb.GpuType],
    nodes: dict[str, pb.Node],
) -> None:
    gpu = types.get(a.gpu_type)
    if gpu is None:
        c.add(f"{p}.gpu_type", f"unknown gpu type {quoted(a.gpu_type)}")
    ok = c.at_least(f"{p}.data_parallel", a.data_parallel, 1)
    ok = c.at_least(f"{p}.tensor_parallel", a.tensor_parallel, 1) and ok
    ok = c.at_least(f"{p}.pipeline_parallel", a.pipeline_parallel, 1) and ok
    want = a.data_parallel * a.tensor_parallel * a.pipeline_parallel
    if ok and a.num_gpus and a.num_gpus != want:
        c.add(
            f"{p}.num_gpus",
            f"must equal data_parallel*tensor_parallel*pipeline_parallel "
            f"({want}) when set, got {a.num_gpus}",
        )
    if gpu is not None and a.sm_clock_mhz not in gpu.sm_clocks_mhz:
        c.add(f"{p}.sm_clock_mhz", unsupported_clock(gpu, a.sm_clock_mhz))
    if not a.placement:
        c.add(f"{p}.placement", "must not be empty for a JOB_STATE_RUNNING assignment")
    for k, s in enumerate(a.placement):
        node = nodes.get(s.node)
        if node is None:
            c.add(f"{p}.placement[{k}].node", f"unknown node {quoted(s.node)}")
            continue
        for m, idx in enumerate(s.gpu_indices):
            if not 0 <= idx < node.gpu_count:
                c.add(
                    f"{p}.placement[{k}].gpu_indices[{m}]",
                    f"must be in [0, {node.gpu_count}) for node {quoted(s.node)}, got {idx}",
                )
