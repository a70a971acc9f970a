"""The consolidated variant of a MIG solve (docs/mig.md, "Consolidating slices"): slice jobs
packed first onto instances where they lose little (solver.search.slice_prepack), the whole-GPU
paths on the GPUs left, then the rest packed as usual. solver.core.mig runs it beside the plain
pipeline when whole GPUs are short and keeps the better checked plan."""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Mapping

from solver.domain import Job, JobAssignment, JobState, Plan, Problem, SolveResult, Termination
from solver.mig import GpuLayout, MigInstance
from solver.perfmodel.configs import ConfigSet
from solver.search.slice_prepack import LosslessPacker
from solver.search.slices import KeptSlice, Packer

PREPACK_SHARE = 0.3
"""Share of the variant's time the consolidating packer may take; the rest is the whole-GPU
solve's and the final packing's (at 200 nodes and 400 slice jobs it took 1.15 s unbounded, and
a 1 s call answered after 2 s)."""

Whole = Callable[[Problem], SolveResult]
"""A whole-GPU solve of a problem (partitioned GPUs left out), within its share of the time."""


def short_of_gpus(problem: Problem) -> bool:
    """Whether the jobs' least GPU counts exceed the available GPUs: some job must wait."""
    need = sum(max(j.min_gpus, 1) for j in problem.jobs)
    return need > sum(n.available_gpus for n in problem.cluster.nodes)


def consolidated(
    problem: Problem,
    configs: ConfigSet,
    kept: Mapping[str, KeptSlice],
    whole_problem: Callable[[Problem, Mapping[str, KeptSlice]], Problem],
    solve_whole: Whole,
    stop_at: float | None = None,
) -> tuple[Plan, SolveResult] | None:
    """The plan with slice jobs consolidated first, and the whole-GPU solve's result; None when
    no slice job goes to an instance that way, the whole-GPU solve finds no plan for the jobs
    left, or the time is up (`stop_at`, a time.monotonic() instant) before the plan is made."""
    base = [_held(configs, j) for j in problem.jobs if j.name not in kept]
    prepack_stop = None
    if stop_at is not None:
        prepack_stop = time.monotonic() + PREPACK_SHARE * max(stop_at - time.monotonic(), 0.0)
    pre = LosslessPacker(problem, configs, base, kept, prepack_stop)
    pre.pack()
    moved = {name: got for name, got in pre.packed.items() if name not in kept}
    if not moved:
        return None
    gpus = {got[1] for got in moved.values()}
    result = solve_whole(whole_problem(_partitioned(problem, pre, gpus), {**kept, **moved}))
    planned = {a.job for a in result.plan.assignments}
    if result.stats.termination is Termination.INFEASIBLE or any(
        j.name not in planned and j.name not in moved and j.name not in kept for j in problem.jobs
    ):
        return None
    if stop_at is not None and time.monotonic() >= stop_at:
        return None
    final = Packer(problem, configs, result.plan.assignments, kept, stop_at)
    for key in gpus:
        final.gpus[key] = copy.deepcopy(pre.gpus[key])
        for spare in final.spare.values():
            if key in spare:
                spare.remove(key)
    for name, (config, gpu, inst) in moved.items():
        final.take_slice(name, config, gpu, inst)
    final.pack()
    return final.plan(), result


def _held(configs: ConfigSet, job: Job) -> JobAssignment:
    """A non-preemptible job on whole GPUs as it runs (at its shape's least draw): the packer
    must not partition the GPUs it keeps (it did, and the whole-GPU solve had no way to keep
    the job); any other job queued."""
    cur = job.current
    if cur is not None and cur.mig is None and not job.preemptible:
        same = [c for c in configs.by_job.get(job.name, ()) if c.shape == cur.shape]
        if same:
            least = min(same, key=lambda c: c.watts)
            return JobAssignment(job.name, JobState.RUNNING, least, cur.placement)
    return JobAssignment(job.name, JobState.QUEUED)


def _partitioned(problem: Problem, pre: Packer, gpus: set[tuple[str, int]]) -> Problem:
    """The problem with the consolidated GPUs partitioned as the packer left them (so the
    whole-GPU paths leave them out)."""
    by_node: dict[str, dict[int, GpuLayout]] = {}
    for node, g in gpus:
        instances = tuple(
            MigInstance(i.profile, i.start, i.job) for i in pre.gpus[node, g].instances
        )
        by_node.setdefault(node, {})[g] = GpuLayout(g, instances)
    nodes = []
    for n in problem.cluster.nodes:
        new = by_node.get(n.name)
        if new is None:
            nodes.append(n)
            continue
        layouts = {x.gpu_index: x for x in n.mig_layouts} | new
        nodes.append(dataclasses.replace(n, mig_layouts=tuple(layouts[g] for g in sorted(layouts))))
    cluster = dataclasses.replace(problem.cluster, nodes=tuple(nodes))
    return dataclasses.replace(problem, cluster=cluster)
