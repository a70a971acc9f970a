"""Turning a backend's decisions (a configuration and GPUs per node for each job) into a Plan.

Backends decide counts; this module picks the GPU indices (a running job keeps its own GPUs
wherever it stays on a node), says why queued jobs wait, and scores the result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from solver.domain import (
    Cluster,
    Config,
    GpuSlice,
    Job,
    JobAssignment,
    JobState,
    Plan,
    Problem,
    QueueReason,
)
from solver.perfmodel.configs import ConfigSet
from solver.perfmodel.facts import min_nodes, min_racks, type_facts
from solver.scoring.objective import is_migrated, running_gain, score_plan

IntArray = npt.NDArray[np.int64]
Choice = tuple[Config, Mapping[str, int]]
"""A running job's configuration and its GPU count per node."""


def materialize(
    problem: Problem,
    configs: ConfigSet,
    choices: Mapping[str, Choice | None],
) -> Plan:
    """The plan for the given choices; jobs absent from `choices` are queued."""
    free: dict[str, list[int]] = {
        n.name: list(n.available_gpu_indices) for n in problem.cluster.nodes
    }
    picked: dict[str, dict[str, list[int]]] = {}
    jobs = {j.name: j for j in problem.jobs}
    # First every job takes back the GPUs it already holds on the nodes it stays on.
    for name, choice in choices.items():
        if choice is None:
            continue
        job = jobs[name]
        mine: dict[str, list[int]] = {}
        if job.current is not None:
            for s in job.current.placement:
                want = choice[1].get(s.node, 0)
                keep = [i for i in s.gpu_indices if i in free[s.node]][:want]
                if keep:
                    mine.setdefault(s.node, []).extend(keep)
                    for i in keep:
                        free[s.node].remove(i)
        picked[name] = mine
    for name, choice in choices.items():
        if choice is None:
            continue
        for node, count in choice[1].items():
            have = picked[name].setdefault(node, [])
            need = count - len(have)
            if need > len(free[node]):
                raise ValueError(
                    f"{name}: node {node} has {len(free[node])} free GPUs, needs {need}"
                )
            have.extend(free[node][:need])
            del free[node][:need]
    assignments = []
    for job in problem.jobs:
        choice = choices.get(job.name)
        if choice is None:
            assignments.append(queued_assignment(problem, configs, job))
            continue
        placement = tuple(
            GpuSlice(node, tuple(sorted(idx)))
            for node, idx in sorted(picked[job.name].items())
            if idx
        )
        a = JobAssignment(
            job=job.name, state=JobState.RUNNING, config=choice[0], placement=placement
        )
        assignments.append(_with_migration(job, a))
    objective = score_plan(
        problem, assignments, configs.best_samples_per_second, (), configs.least_joules_per_sample
    )
    return Plan(assignments=tuple(assignments), objective=objective)


def queued_assignment(problem: Problem, configs: ConfigSet, job: Job) -> JobAssignment:
    """A queued job with the reason it waits."""
    options = configs.by_job.get(job.name, ())
    if not options:
        reason, detail = (
            QueueReason.NO_FEASIBLE_CONFIGURATION,
            ("no configuration fits the job's GPU limits, allowed types, memory and node sizes"),
        )
    elif job.barred_nodes and not any(_may_hold(problem, job, c) for c in options):
        reason, detail = (
            QueueReason.NO_FEASIBLE_CONFIGURATION,
            "the nodes it may use (excluded_nodes, node_selector, taints) cannot hold any of its "
            "configurations",
        )
    else:
        best = configs.best_samples_per_second[job.name]
        max_watts = problem.cluster.max_gpu_watts()
        least = configs.least_joules(job.name)
        gain = max(running_gain(job, c, best, problem.weights, max_watts, least) for c in options)
        if gain > 0:
            reason, detail = (
                QueueReason.INSUFFICIENT_RESOURCES,
                ("its GPUs or power went to jobs of more value"),
            )
        else:
            reason, detail = (
                QueueReason.NOT_WORTH_RUNNING,
                ("its energy cost outweighs its weighted throughput under the current weights"),
            )
    a = JobAssignment(job=job.name, state=JobState.QUEUED, queue_reason=reason, queue_detail=detail)
    return _with_migration(job, a)


def _may_hold(problem: Problem, job: Job, c: Config) -> bool:
    """Whether the GPUs installed on the nodes the job may use hold `c` in whole tensor
    groups (or a MIG instance): the type's, less its barred nodes' (by position, in numpy:
    a job may bar thousands)."""
    rooms: dict[tuple[frozenset[str], str, int], int] = problem.__dict__.setdefault("_rooms", {})
    key = (job.barred_nodes, c.gpu_type, c.tensor_parallel)
    if key not in rooms:  # once a rule, type and tensor degree: a rule's jobs share it
        types, counts = _node_arrays(problem.cluster)
        at = np.fromiter(problem.cluster.positions(job.barred_nodes), dtype=np.int64)
        groups = counts // c.tensor_parallel * c.tensor_parallel
        of_type = types == c.gpu_type
        rooms[key] = int(groups[of_type].sum()) - int(groups[at][of_type[at]].sum())
    return rooms[key] >= (1 if c.mig_profile else c.num_gpus)


def _node_arrays(cluster: Cluster) -> tuple[npt.NDArray[np.str_], IntArray]:
    """The cluster's nodes' GPU types and installed GPUs, by position (made once)."""
    made = cluster.__dict__.get("_node_arrays")
    if made is None:
        made = (
            np.array([n.gpu_type for n in cluster.nodes]),
            np.array([n.gpu_count for n in cluster.nodes], dtype=np.int64),
        )
        object.__setattr__(cluster, "_node_arrays", made)
    return made


def _with_migration(job: Job, a: JobAssignment) -> JobAssignment:
    if not is_migrated(job, a):
        return a
    return JobAssignment(
        job=a.job,
        state=a.state,
        config=a.config,
        placement=a.placement,
        migrated=True,
        queue_reason=a.queue_reason,
        queue_detail=a.queue_detail,
    )


def on_this_cluster(problem: Problem, configs: ConfigSet, plan: Plan) -> Plan:
    """`plan` with its whole-GPU jobs' least nodes and racks those of the snapshot's cluster,
    rescored. A path that plans on part of the cluster (the GPUs no MIG instance holds, the
    nodes not suspended) sees fewer GPUs per node and rack, where a spread looks unavoidable
    that is not: EvaluatePlan scored such plans below the solve's figure (a running 8-GPU job on
    two nodes, one of eight GPUs partitioned: 0.01; a 16-GPU job over two racks of mostly
    suspended nodes, answered by the quick plan: 1 a job)."""
    facts = type_facts(problem.cluster)
    changed = False
    assignments = []
    for a in plan.assignments:
        c = a.config
        f = None if c is None or c.mig_profile else facts.get(c.gpu_type)
        if c is not None and f is not None and a.state is JobState.RUNNING:
            nodes = min_nodes(c.num_gpus, c.tensor_parallel, f.node_capacities) or c.min_nodes
            racks = min_racks(c.num_gpus, f.rack_capacities)
            if (nodes, racks) != (c.min_nodes, c.min_racks):
                a = dataclasses.replace(a, config=c._replace(min_nodes=nodes, min_racks=racks))
                changed = True
        assignments.append(a)
    if not changed:
        return plan
    best, least = configs.best_samples_per_second, configs.least_joules_per_sample
    objective = score_plan(problem, assignments, best, plan.layout_changes, least)
    return dataclasses.replace(plan, assignments=tuple(assignments), objective=objective)
