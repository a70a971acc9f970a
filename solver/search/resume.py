"""Suspended nodes woken for jobs the plan leaves waiting, and idle nodes suspended
(docs/power-states.md).

Every solver path plans the snapshot with suspended nodes left out, so a job goes to a node that
is up whenever one holds it (a resume costs the job its resume time, and the node its draw). Then
the jobs still queued, most valuable first, are placed best-fit on suspended nodes in their most
valuable configuration that the budgets and quotas allow; each node so used is resumed. Last,
the up nodes the plan leaves empty and the policy lets go are suspended, longest idle first,
keeping `spare_nodes_per_type` empty nodes of each type up for arrivals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from solver.domain import (
    Config,
    GpuSlice,
    Job,
    JobAssignment,
    JobState,
    Problem,
    busy_nodes,
    gpus_per_node,
)
from solver.perfmodel import budgets
from solver.perfmodel.configs import ConfigSet
from solver.perfmodel.quotas import QuotaLedger
from solver.power_states import NodePowerState, PowerAction, PowerActionKind, may_suspend
from solver.scoring.objective import running_gain
from solver.search.placement import Placer

EPSILON = 1e-9


def asleep(problem: Problem) -> list[str]:
    """The suspended nodes with available GPUs, in cluster order."""
    return [
        n.name
        for n in problem.cluster.nodes
        if n.power.state is NodePowerState.SUSPENDED and n.available_gpus > 0
    ]


class _Ledger:
    """Watts and quotas the plan draws, and what one more configuration would: its watts
    above its GPUs' idle, and each node it wakes the difference of the node's floors."""

    def __init__(self, problem: Problem, assignments: Sequence[JobAssignment]) -> None:
        self.problem = problem
        cluster = problem.cluster
        self.jobs = {j.name: j for j in problem.jobs}
        self.room = budgets.power_room(cluster)
        self.rack_room = dict(budgets.rack_power_room(cluster))
        self.nodes = {n.name: n for n in cluster.nodes}
        self.woken: set[str] = set()
        self.quotas = QuotaLedger(cluster)
        for a in assignments:
            if a.state is JobState.RUNNING and a.config is not None:
                self.take(self.jobs[a.job], a.config, gpus_per_node(a.placement))

    def _needs(self, config: Config, counts: dict[str, int]) -> tuple[float, dict[str, float]]:
        """Watts for the cluster and per rack."""
        cluster = self.problem.cluster
        total = budgets.extra_watts(cluster, config)
        per_gpu = budgets.extra_watts_per_gpu(cluster, config)
        racks: dict[str, float] = {}
        for name, k in counts.items():
            node = self.nodes[name]
            wake = 0.0
            if node.power.state is NodePowerState.SUSPENDED and name not in self.woken:
                wake = budgets.resume_watts(cluster, node)
            total += wake
            racks[node.rack] = racks.get(node.rack, 0.0) + per_gpu * k + wake
        return total, racks

    def take(self, job: Job, config: Config, counts: dict[str, int]) -> None:
        total, racks = self._needs(config, counts)
        if self.room is not None:
            self.room -= total
        for rack, watts in racks.items():
            if rack in self.rack_room:
                self.rack_room[rack] -= watts
        self.woken.update(
            n for n in counts if self.nodes[n].power.state is NodePowerState.SUSPENDED
        )
        self.quotas.take(job, config)

    def fits(self, job: Job, config: Config, counts: dict[str, int]) -> bool:
        total, racks = self._needs(config, counts)
        if self.room is not None and total > self.room + EPSILON:
            return False
        if any(r in self.rack_room and w > self.rack_room[r] + EPSILON for r, w in racks.items()):
            return False
        return not self.quotas.active or self.quotas.fits(job, config)


def resume_for_queued(
    problem: Problem, configs: ConfigSet, assignments: Sequence[JobAssignment]
) -> tuple[list[JobAssignment], list[PowerAction]]:
    """The plan with queued jobs placed on suspended nodes, and a RESUME for each node used."""
    names = asleep(problem)
    out = list(assignments)
    if not names:
        return out, []
    cluster = problem.cluster
    sleeping = set(names)
    nodes = tuple(n for n in cluster.nodes if n.name in sleeping)
    placer = Placer(dataclasses.replace(cluster, nodes=nodes))
    free = {n.name: list(n.available_gpu_indices) for n in nodes}
    ledger = _Ledger(problem, assignments)
    w, max_watts = problem.weights, cluster.max_gpu_watts()
    jobs = {j.name: j for j in problem.jobs}
    waiting = []
    for k, a in enumerate(out):
        job = jobs.get(a.job)
        if a.state is not JobState.QUEUED or job is None or not configs.by_job.get(job.name):
            continue
        best, least = configs.best_samples_per_second[job.name], configs.least_joules(job.name)
        gains = sorted(
            ((running_gain(job, c, best, w, max_watts, least), i) for i, c in
             enumerate(configs.by_job[job.name])),
            reverse=True,
        )  # fmt: skip
        waiting.append((gains[0][0], job.name, k, gains))
    woken: list[str] = []
    for _, name, k, gains in sorted(waiting, key=lambda x: (-x[0], x[1])):
        for gain, i in gains:
            if gain <= EPSILON:
                break
            config = configs.by_job[name][i]
            if config.kept_only:  # over the memory model's limit: only where the job runs now
                continue
            counts = placer.place(
                config.gpu_type,
                config.num_gpus,
                config.tensor_parallel,
                barred=jobs[name].barred_nodes,
            )
            if counts is None or not ledger.fits(jobs[name], config, counts):
                continue
            placer.take(counts)
            ledger.take(jobs[name], config, counts)
            placement = []
            for node, count in counts.items():
                placement.append(GpuSlice(node, tuple(free[node][:count])))
                del free[node][:count]
                if node not in woken:
                    woken.append(node)
            out[k] = JobAssignment(name, JobState.RUNNING, config, tuple(placement))
            break
    actions = [
        PowerAction(node, PowerActionKind.RESUME, "a job of the plan is placed on it")
        for node in names
        if node in woken
    ]
    return out, actions


def suspend_idle(problem: Problem, assignments: Sequence[JobAssignment]) -> list[PowerAction]:
    """A SUSPEND for each up node the plan leaves empty and the policy lets go, longest idle
    first, keeping `spare_nodes_per_type` empty up nodes of each type."""
    policy = problem.cluster.power_saving
    if not policy.enabled:
        return []
    used = busy_nodes(assignments)
    empty: dict[str, list[tuple[float, str, bool]]] = {}
    for n in problem.cluster.nodes:
        if n.power.state is NodePowerState.UP and n.name not in used:
            eligible = may_suspend(policy, n.name, n.power)
            empty.setdefault(n.gpu_type, []).append((n.power.idle_seconds, n.name, eligible))
    actions = []
    for _, nodes in sorted(empty.items()):
        keep = min(policy.spare_nodes_per_type, len(nodes))
        spare = len(nodes)
        for idle, name, eligible in sorted(nodes, key=lambda x: (-x[0], x[1])):
            if not eligible or spare <= keep:
                continue
            spare -= 1
            reason = f"no job for {idle:.0f} s (suspend_after {policy.suspend_after_seconds:g} s)"
            actions.append(PowerAction(name, PowerActionKind.SUSPEND, reason))
    return sorted(actions, key=lambda a: a.node)
