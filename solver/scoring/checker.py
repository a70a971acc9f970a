"""Independent plan checker: every plan is verified here before it leaves the solver.

It re-derives every rule from the request itself and shares no code with the formulations,
so that a modelling bug in a backend shows up as a violation rather than as a bad plan. Like
the formulation, it has one function per constraint family (``check_*``, listed in
``CHECKS``), each reading a ``PlanView`` and returning that family's violations, so that each
family can be tested on its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

from solver.domain import DEFAULT_QUEUE, POWER, Job, JobAssignment, JobState, Problem
from solver.mig import LayoutChange
from solver.power_states import NodePowerState, PowerAction, PowerActionKind
from solver.scoring import mig_checks, power_checks
from solver.scoring.view import POWER_TOLERANCE as POWER_TOLERANCE
from solver.scoring.view import Check
from solver.scoring.view import PlanView as PlanView
from solver.scoring.view import PlanViolation as PlanViolation
from solver.scoring.view import Running as Running


def check_jobs_known_once(view: PlanView) -> Iterator[PlanViolation]:
    """Every job of the request is assigned exactly once, and no other job is."""
    seen: set[str] = set()
    for a in view.assignments:
        if a.job not in view.jobs:
            yield PlanViolation(
                "known_job", a.job, "the plan assigns a job that is not in the request"
            )
        elif a.job in seen:
            yield PlanViolation("one_assignment", a.job, "the job is assigned more than once")
        seen.add(a.job)
    for name in view.jobs.keys() - seen:
        yield PlanViolation("one_assignment", name, "the job is missing from the plan")


def check_queued_jobs(view: PlanView) -> Iterator[PlanViolation]:
    """A queued job holds no GPUs and is not a running non-preemptible job."""
    for job, a in view.unique:
        if a.state is JobState.RUNNING:
            continue
        if a.placement:
            yield PlanViolation("queued_has_no_gpus", a.job, "a queued job holds GPUs")
        if job.current is not None and not job.preemptible:
            yield PlanViolation(
                "non_preemptible", a.job, "a running non-preemptible job is stopped"
            )


def check_configuration(view: PlanView) -> Iterator[PlanViolation]:
    """A running job has a configuration on a GPU type of the cluster that it may use, within
    its GPU limits, at a supported clock, that fits in memory."""
    types = view.problem.cluster.gpu_types
    for job, a in view.unique:
        c = a.config
        if a.state is not JobState.RUNNING:
            continue
        if c is None:
            yield PlanViolation("configuration", a.job, "a running job has no configuration")
            continue
        gpu = types.get(c.gpu_type)
        if gpu is None:
            yield PlanViolation("gpu_type", a.job, f"unknown GPU type {c.gpu_type}")
            continue
        if not job.allows(c.gpu_type):
            yield PlanViolation(
                "allowed_gpu_types", a.job, f"GPU type {c.gpu_type} is not allowed for the job"
            )
        if not job.min_gpus <= c.num_gpus <= job.max_gpus:
            yield PlanViolation(
                "gpu_limits",
                a.job,
                f"{c.num_gpus} GPUs outside the job's limits [{job.min_gpus}, {job.max_gpus}]",
            )
        if c.sm_clock_mhz not in gpu.sm_clocks_mhz:
            yield PlanViolation(
                "sm_clock", a.job, f"{c.sm_clock_mhz} MHz is not a supported clock of {gpu.name}"
            )
        if c.memory_per_gpu_gib > gpu.memory_gib and not _stays(job, a):
            yield PlanViolation(
                "memory_fit",
                a.job,
                f"{c.memory_per_gpu_gib:.1f} GiB per GPU exceeds {gpu.name}'s {gpu.memory_gib} GiB",
            )


def check_placement(view: PlanView) -> Iterator[PlanViolation]:
    """Each slice names a node of the cluster with the configuration's GPU type, and GPUs of
    that node that exist and are available."""
    for r in view.running:
        for s in r.assignment.placement:
            node = view.nodes.get(s.node)
            if node is None:
                yield PlanViolation("known_node", r.job.name, f"unknown node {s.node}")
                continue
            if node.gpu_type != r.config.gpu_type:
                yield PlanViolation(
                    "gpu_type_match",
                    r.job.name,
                    f"node {s.node} has {node.gpu_type}, not {r.config.gpu_type}",
                )
            for i in s.gpu_indices:
                if not 0 <= i < node.gpu_count:
                    yield PlanViolation("gpu_index", r.job.name, f"{s.node} has no GPU {i}")
                elif i in node.unavailable_gpu_indices:
                    yield PlanViolation(
                        "gpu_available", r.job.name, f"GPU {s.node}/{i} is unavailable"
                    )


def check_excluded_nodes(view: PlanView) -> Iterator[PlanViolation]:
    """A job is not placed on a node it excludes, unless it runs there now (an exclusion
    governs new placements)."""
    for r in view.running:
        excluded = r.job.excluded_nodes
        if not excluded:
            continue
        held = {s.node for s in r.job.current.placement} if r.job.current else set()
        for node in sorted({s.node for s in r.assignment.placement} - held):
            if node in excluded:
                yield PlanViolation(
                    "excluded_node",
                    r.job.name,
                    f"node {node} is barred (excluded_nodes, node_selector or taints)",
                )


def check_tensor_group_in_node(view: PlanView) -> Iterator[PlanViolation]:
    """A tensor-parallel group never spans nodes: each node holds whole groups."""
    for r in view.running:
        tp = r.config.shape.tensor_parallel
        for s in r.assignment.placement:
            if len(s.gpu_indices) % tp:
                yield PlanViolation(
                    "tensor_group_in_node",
                    r.job.name,
                    f"{len(s.gpu_indices)} GPUs on {s.node} split a tensor-parallel group of {tp}",
                )


def check_gpu_capacity(view: PlanView) -> Iterator[PlanViolation]:
    """A GPU runs at most one job (and is listed once by it)."""
    owner: dict[tuple[str, int], str] = {}
    for r in view.whole:  # (jobs on MIG instances: mig_checks.check_one_job_per_instance)
        for node, i in view.gpus(r):
            key = (node.name, i)
            if key in owner:
                yield PlanViolation(
                    "gpu_capacity", r.job.name, f"GPU {node.name}/{i} is also given to {owner[key]}"
                )
            else:
                owner[key] = r.job.name


def check_gang(view: PlanView) -> Iterator[PlanViolation]:
    """A running job holds exactly its configuration's number of GPUs."""
    for r in view.running:
        placed = len(set(view.gpus(r)))
        if placed != r.config.num_gpus:
            yield PlanViolation(
                "gang",
                r.job.name,
                f"{placed} GPUs placed for a configuration of {r.config.num_gpus}",
            )


def check_non_preemptible(view: PlanView) -> Iterator[PlanViolation]:
    """A running non-preemptible job keeps its shape and its GPUs (stopping it is
    check_queued_jobs' concern)."""
    for r in view.running:
        job = r.job
        if job.current is None or job.preemptible:
            continue
        old = sorted((s.node, i) for s in job.current.placement for i in s.gpu_indices)
        new = sorted((s.node, i) for s in r.assignment.placement for i in s.gpu_indices)
        if r.config.shape != job.current.shape or old != new:
            yield PlanViolation(
                "non_preemptible", job.name, "a non-preemptible job is moved or reshaped"
            )


def node_floors(view: PlanView) -> dict[str, float]:
    """What each node draws with no job after the plan: suspended (and not resumed by the
    plan), the policy's suspended_node_watts; else its base power and its GPUs' idle power. A
    node the plan suspends counts as up: this round's budget holds while it drains."""
    cluster = view.problem.cluster
    resumed = {a.node for a in view.power_actions if a.kind is PowerActionKind.RESUME}
    out = {}
    for node in cluster.nodes:
        if node.power.state is NodePowerState.SUSPENDED and node.name not in resumed:
            out[node.name] = cluster.power_saving.suspended_node_watts
        else:
            idle = cluster.gpu_types[node.gpu_type].idle_watts
            out[node.name] = node.power.base_watts + node.gpu_count * idle
    return out


def rack_watts(view: PlanView) -> dict[str, float]:
    """Power drawn per rack: running jobs' watts spread over their GPUs, and every node's
    floor less the idle power of the GPUs jobs use."""
    cluster = view.problem.cluster
    out: dict[str, float] = {}
    floors = node_floors(view)
    for node in cluster.nodes:
        out[node.rack] = out.get(node.rack, 0.0) + floors[node.name]
    for name, _ in view.used:
        node = view.nodes[name]
        out[node.rack] -= cluster.gpu_types[node.gpu_type].idle_watts
    for r in view.running:
        gpus = set(view.gpus(r))
        if not gpus:
            continue
        per_gpu = r.config.watts / r.config.num_gpus
        for node, _ in gpus:
            out[node.rack] += per_gpu
    return out


def check_power_budget(view: PlanView) -> Iterator[PlanViolation]:
    """The cluster draws at most its power budget: running jobs' configured watts plus every
    node's floor less the idle power of the GPUs jobs use."""
    budget = view.problem.cluster.power_budget_watts
    if budget is None:
        return
    cluster = view.problem.cluster
    idle = sum(node_floors(view).values())
    idle -= sum(cluster.gpu_types[view.nodes[name].gpu_type].idle_watts for name, _ in view.used)
    drawn = sum(r.config.watts for r in view.running) + idle
    if drawn > budget * (1 + POWER_TOLERANCE):
        yield PlanViolation(
            "power_budget", "", f"cluster draws {drawn:.0f} W over its budget {budget:.0f} W"
        )


def check_rack_power_budget(view: PlanView) -> Iterator[PlanViolation]:
    """Each rack with a budget draws at most that budget."""
    budgets = view.problem.cluster.rack_power_budgets_watts
    if not budgets:
        return
    drawn = rack_watts(view)
    for rack, budget in budgets.items():
        watts = drawn.get(rack, 0.0)
        if watts > budget * (1 + POWER_TOLERANCE):
            yield PlanViolation(
                "rack_power_budget",
                "",
                f"rack {rack} draws {watts:.0f} W over its budget {budget:.0f} W",
            )


def check_queue_quotas(view: PlanView) -> Iterator[PlanViolation]:
    """Each declared queue within its quotas (Kueue's meaning): GPUs of each type and watts
    drawn; without a cohort at most nominal; in one at most nominal plus the borrowing limit,
    and the cohort's queues together take beyond what each keeps unlent (nominal less lending
    limit) no more than they lend."""
    cluster = view.problem.cluster
    if not cluster.queues:
        return
    queues = {q.name: q for q in cluster.queues}
    used: dict[tuple[str, str], float] = {}
    for r in view.running:
        name = r.job.tenant or DEFAULT_QUEUE
        if name not in queues:
            continue
        for resource, amount in (
            (r.config.gpu_type, float(r.config.num_gpus)),
            (POWER, r.config.watts),
        ):
            used[name, resource] = used.get((name, resource), 0.0) + amount

    def limit(q_name: str, resource: str) -> tuple[float, float | None, float | None] | None:
        """(nominal, borrowing limit, lending limit); None: not limited (watts, no quota)."""
        quota = queues[q_name].quotas.get(resource)
        if quota is None:
            return None if resource == POWER else (0.0, None, None)
        return quota.nominal, quota.borrowing_limit, quota.lending_limit

    def over(value: float, bound: float) -> bool:
        return value > bound + POWER_TOLERANCE * max(abs(bound), 1.0)

    cohorts: dict[tuple[str, str], list[tuple[float, float]]] = {}
    resources = {r for _, r in used} | {r for q in cluster.queues for r in q.quotas}
    for q in cluster.queues:
        for resource in sorted(resources):
            lim = limit(q.name, resource)
            if lim is None:
                continue
            nominal, borrowing, lending = lim
            u = used.get((q.name, resource), 0.0)
            cap = (
                nominal
                if not q.cohort
                else (math.inf if borrowing is None else nominal + borrowing)
            )
            if over(u, cap):
                yield PlanViolation(
                    "queue_quota",
                    "",
                    f"queue {q.name} uses {u:g} of {resource} over its limit {cap:g}",
                )
            if q.cohort:
                kept = 0.0 if lending is None else max(nominal - lending, 0.0)
                cohorts.setdefault((q.cohort, resource), []).append((max(u, kept), nominal))
    for (cohort, resource), parts in sorted(cohorts.items()):
        claim, total = sum(p[0] for p in parts), sum(p[1] for p in parts)
        if over(claim, total):
            yield PlanViolation(
                "queue_quota",
                "",
                f"cohort {cohort} takes {claim:g} of {resource} (its queues' usage, and what each "
                f"keeps unlent) over its quota {total:g}",
            )


CHECKS: tuple[Check, ...] = (
    check_jobs_known_once,
    check_queued_jobs,
    check_configuration,
    check_placement,
    check_excluded_nodes,
    check_tensor_group_in_node,
    check_gpu_capacity,
    check_gang,
    check_non_preemptible,
    check_power_budget,
    check_rack_power_budget,
    check_queue_quotas,
    *mig_checks.CHECKS,
    *power_checks.POWER_CHECKS,
)
"""Every constraint family, in the order its violations are reported."""


def check_plan(
    problem: Problem,
    assignments: Iterable[JobAssignment],
    layout_changes: Sequence[LayoutChange] = (),
    power_actions: Sequence[PowerAction] = (),
) -> list[PlanViolation]:
    """All the constraints the plan breaks (with the plan's MIG layout changes and node power
    actions); an empty list means the plan is valid."""
    view = PlanView(problem, assignments, layout_changes, power_actions)
    return [v for check in CHECKS for v in check(view)]


def _stays(job: Job, a: JobAssignment) -> bool:
    """The job keeps its current shape on exactly its current GPUs: it demonstrably fits."""
    if job.current is None or a.config is None or a.config.shape != job.current.shape:
        return False
    old = {(s.node, i) for s in job.current.placement for i in s.gpu_indices}
    return old == {(s.node, i) for s in a.placement for i in s.gpu_indices}
