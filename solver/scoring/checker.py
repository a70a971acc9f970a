"""Independent plan checker: every plan is verified here before it leaves the solver.

It re-derives every rule from the request itself and shares no code with the formulations,
so that a modelling bug in a backend shows up as a violation rather than as a bad plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from solver.domain import Job, JobAssignment, JobState, Problem

POWER_TOLERANCE = 1e-6
"""Relative slack on power budgets, for floating-point sums only."""


@dataclass(frozen=True)
class PlanViolation:
    constraint: str
    """Constraint family, e.g. "gpu_capacity"."""
    job: str
    message: str


def check_plan(problem: Problem, assignments: Iterable[JobAssignment]) -> list[PlanViolation]:
    """All the constraints the plan breaks; an empty list means the plan is valid."""
    cluster = problem.cluster
    jobs = {j.name: j for j in problem.jobs}
    nodes = {n.name: n for n in cluster.nodes}
    out: list[PlanViolation] = []
    seen: set[str] = set()
    owner: dict[tuple[str, int], str] = {}
    used_gpus = 0
    job_watts = 0.0
    rack_watts: dict[str, float] = {}

    def bad(constraint: str, job: str, message: str) -> None:
        out.append(PlanViolation(constraint, job, message))

    for a in assignments:
        if a.job not in jobs:
            bad("known_job", a.job, "the plan assigns a job that is not in the request")
            continue
        if a.job in seen:
            bad("one_assignment", a.job, "the job is assigned more than once")
            continue
        seen.add(a.job)
        job = jobs[a.job]
        running = a.state is JobState.RUNNING
        if not running:
            if a.placement:
                bad("queued_has_no_gpus", a.job, "a queued job holds GPUs")
            if job.current is not None and not job.preemptible:
                bad("non_preemptible", a.job, "a running non-preemptible job is stopped")
            continue
        c = a.config
        if c is None:
            bad("configuration", a.job, "a running job has no configuration")
            continue
        gpu = cluster.gpu_types.get(c.gpu_type)
        if gpu is None:
            bad("gpu_type", a.job, f"unknown GPU type {c.gpu_type}")
            continue
        if not job.allows(c.gpu_type):
            bad("allowed_gpu_types", a.job, f"GPU type {c.gpu_type} is not allowed for the job")
        if not job.min_gpus <= c.num_gpus <= job.max_gpus:
            bad(
                "gpu_limits",
                a.job,
                f"{c.num_gpus} GPUs outside the job's limits [{job.min_gpus}, {job.max_gpus}]",
            )
        if c.sm_clock_mhz not in gpu.sm_clocks_mhz:
            bad("sm_clock", a.job, f"{c.sm_clock_mhz} MHz is not a supported clock of {gpu.name}")
        if c.memory_per_gpu_gib > gpu.memory_gib and not _stays(job, a):
            bad(
                "memory_fit",
                a.job,
                f"{c.memory_per_gpu_gib:.1f} GiB per GPU exceeds {gpu.name}'s {gpu.memory_gib} GiB",
            )
        placed = 0
        per_gpu_watts = c.watts / c.num_gpus
        for s in a.placement:
            node = nodes.get(s.node)
            if node is None:
                bad("known_node", a.job, f"unknown node {s.node}")
                continue
            if node.gpu_type != c.gpu_type:
                bad("gpu_type_match", a.job, f"node {s.node} has {node.gpu_type}, not {c.gpu_type}")
            if len(s.gpu_indices) % c.shape.tensor_parallel:
                bad(
                    "tensor_group_in_node",
                    a.job,
                    f"{len(s.gpu_indices)} GPUs on {s.node} split a tensor-parallel group of "
                    f"{c.shape.tensor_parallel}",
                )
            for i in s.gpu_indices:
                if not 0 <= i < node.gpu_count:
                    bad("gpu_index", a.job, f"{s.node} has no GPU {i}")
                elif i in node.unavailable_gpu_indices:
                    bad("gpu_available", a.job, f"GPU {s.node}/{i} is unavailable")
                elif (s.node, i) in owner:
                    bad(
                        "gpu_capacity",
                        a.job,
                        f"GPU {s.node}/{i} is also given to {owner[(s.node, i)]}",
                    )
                else:
                    owner[(s.node, i)] = a.job
                    placed += 1
                    rack_watts[node.rack] = rack_watts.get(node.rack, 0.0) + per_gpu_watts
        if placed != c.num_gpus:
            bad("gang", a.job, f"{placed} GPUs placed for a configuration of {c.num_gpus}")
        used_gpus += placed
        job_watts += c.watts
        if job.current is not None and not job.preemptible:
            old = sorted((s.node, i) for s in job.current.placement for i in s.gpu_indices)
            new = sorted((s.node, i) for s in a.placement for i in s.gpu_indices)
            if c.shape != job.current.shape or old != new:
                bad("non_preemptible", a.job, "a non-preemptible job is moved or reshaped")

    for name in jobs.keys() - seen:
        bad("one_assignment", name, "the job is missing from the plan")

    # Every GPU draws idle power unless a job uses it, in which case the job's power counts.
    idle_rack: dict[str, float] = {}
    for each in cluster.nodes:
        idle = each.gpu_count * cluster.gpu_types[each.gpu_type].idle_watts
        idle_rack[each.rack] = idle_rack.get(each.rack, 0.0) + idle
    for name, _ in owner:
        used = nodes[name]
        idle_rack[used.rack] -= cluster.gpu_types[used.gpu_type].idle_watts
    if cluster.power_budget_watts is not None:
        drawn = job_watts + sum(idle_rack.values())
        if drawn > cluster.power_budget_watts * (1 + POWER_TOLERANCE):
            bad(
                "power_budget",
                "",
                f"cluster draws {drawn:.0f} W over its budget {cluster.power_budget_watts:.0f} W",
            )
    for rack, budget in cluster.rack_power_budgets_watts.items():
        drawn = rack_watts.get(rack, 0.0) + idle_rack.get(rack, 0.0)
        if drawn > budget * (1 + POWER_TOLERANCE):
            bad(
                "rack_power_budget",
                "",
                f"rack {rack} draws {drawn:.0f} W over its budget {budget:.0f} W",
            )
    return out


def _stays(job: Job, a: JobAssignment) -> bool:
    """The job keeps its current shape on exactly its current GPUs: it demonstrably fits."""
    if job.current is None or a.config is None or a.config.shape != job.current.shape:
        return False
    old = {(s.node, i) for s in job.current.placement for i in s.gpu_indices}
    return old == {(s.node, i) for s in a.placement for i in s.gpu_indices}
