"""The aggregated LP's share of soft node preferences (``Job.preference``, docs/objective.md,
"Node preferences").

The LP pools each GPU type's GPUs, so it cannot see on which nodes a job lands; what it can
count is how many GPUs a job's nodes leave at each level of its dislike. A job's GPUs of a type
each cost at least the least it dislikes a usable node of the type (the floor); beyond it, its
dislike rises in steps, and only the GPUs on nodes below a step escape that step. Per rule
(jobs sharing one preference and one barred set) and step, those GPUs fit in what such nodes
hold: valid for every plan, so the bound stays a bound. Without these rows a plan whose
preferences bind beyond the floor was never proven optimal (its gap held them all).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from solver.domain import Config, Job, Problem
from solver.preferences import NodePreference, dislike_of, preference_cost
from solver.search.array_lp import INF, ArrayLp

MAX_STEPS = 3
"""Steps of dislike above the floor priced per job and type (a column and a row each, per job
and type); the rises beyond are left out, which only loosens the bound. Kubernetes' preferred
terms give a level per subset of a job's terms, most rules one or two."""

Levels = dict[str, list[tuple[float, int]]]
"""Per GPU type, the distinct dislikes of the usable nodes with available GPUs, ascending, each
with the available GPUs of the nodes at it."""


def levels(problem: Problem, job: Job) -> Levels:
    """The job's levels of dislike per GPU type (empty without priced preferences). Made once
    per distinct preference and barred set: jobs of one rule share both."""
    preference = job.preference
    if preference is None or problem.weights.node_preference <= 0:
        return {}
    # Keyed by the objects, not their ids: a job made from another (dataclasses.replace)
    # may be short-lived, and its barred set's id reused by another's.
    memo: dict[tuple[NodePreference, frozenset[str]], Levels] = problem.__dict__.setdefault(
        "_dislike_levels", {}
    )
    key = (preference, job.barred_nodes)
    found = memo.get(key)
    if found is None:
        gpus: dict[str, dict[float, int]] = {}
        dislike = preference.dislike
        for n in problem.cluster.nodes:
            if n.available_gpus and job.may_use(n.name):
                at = gpus.setdefault(n.gpu_type, {})
                d = dislike.get(n.name, 0.0)
                at[d] = at.get(d, 0) + n.available_gpus
        found = {t: sorted(at.items()) for t, at in gpus.items()}
        memo[key] = found
    return found


def preference_floor(problem: Problem, job: Job) -> dict[str, float]:
    """Per GPU type, the least the job dislikes a node of it that it may use: what each of its
    GPUs there costs at least (empty without priced preferences, or where it likes some node
    of every type)."""
    return {t: at[0][0] for t, at in levels(problem, job).items() if at[0][0] > 0}


def floor_per_gpu(problem: Problem, job: Job) -> dict[str, float]:
    """Per GPU type, what each of the job's GPUs there pays for its preferences wherever it
    goes (its floor), in objective units; empty when it pays nothing anywhere. Made once per
    job: the bounds price every configuration by it."""
    floor = preference_floor(problem, job)
    if not floor:
        return {}
    scale = problem.weights.node_preference / max(job.max_gpus, 1)
    return {t: scale * d for t, d in floor.items()}


def kept_cost(problem: Problem, job: Job) -> float | None:
    """What a running job pays for its preferences where it runs now, in objective units
    (kept on its own GPUs in its shape); None without priced preferences or a whole-GPU run."""
    current = job.current
    w = problem.weights.node_preference
    if current is None or current.mig is not None or job.preference is None or w <= 0:
        return None
    gpus = {s.node: len(s.gpu_indices) for s in current.placement}
    return w * preference_cost(job.preference, job.max_gpus, gpus)


def add_preference_rows(
    lp: ArrayLp,
    problem: Problem,
    opts: Mapping[str, Sequence[Config]],
    y: Mapping[str, list[tuple[int, int]]],
    held: Mapping[str, Sequence[int]],
) -> None:
    """Per job, type and step of its dislike above the floor: its whole-GPU columns pay the
    step on every GPU (at the objective's weight over the job's max_gpus), and a column of
    its own (at most its GPUs) earns it back for the GPUs on nodes below the step; per rule,
    type and step, those columns sum to at most the GPUs such nodes hold. A running job kept
    on its own GPUs (its `held` columns, at most one of them 1) earns back only for its GPUs
    below the step now: what it pays where it runs. Slice configurations keep the floor."""
    weight = problem.weights.node_preference
    if weight <= 0:
        return
    rooms: dict[
        tuple[NodePreference | None, frozenset[str], str, int],
        tuple[float, list[tuple[int, float]]],
    ] = {}
    for job in problem.jobs:
        by_type = levels(problem, job)
        if not any(len(at) > 1 for at in by_type.values()):
            continue
        columns: dict[str, list[tuple[int, float]]] = {}
        for i, col in y[job.name]:
            c = opts[job.name][i]
            if not c.mig_profile and len(by_type.get(c.gpu_type, ())) > 1:
                columns.setdefault(c.gpu_type, []).append((col, float(c.num_gpus)))
        rule = (job.preference, job.barred_nodes)
        now = _where_it_runs(job)
        for gpu_type, cols in columns.items():
            at = by_type[gpu_type]
            below = 0
            for step in range(1, min(len(at), MAX_STEPS + 1)):
                below += at[step - 1][1]
                price = weight * (at[step][0] - at[step - 1][0]) / max(job.max_gpus, 1)
                for col, gpus in cols:
                    lp.cost[col] -= price * gpus
                escaped = lp.column(price, 0.0, INF)
                lp.row([(escaped, 1.0), *((col, -gpus) for col, gpus in cols)], hi=0.0)
                kept = now.get(gpu_type)
                if kept is not None and held.get(job.name):
                    most = max(gpus for _, gpus in cols)
                    stays = sum(k for d, k in kept if d <= at[step - 1][0])
                    if stays < most:
                        lp.row(
                            [(escaped, 1.0), *((h, most - stays) for h in held[job.name])],
                            hi=most,
                        )
                key = (*rule, gpu_type, step)
                rooms.setdefault(key, (float(below), []))[1].append((escaped, 1.0))
    for room, terms in rooms.values():
        lp.row(terms, hi=room)


def _where_it_runs(job: Job) -> dict[str, list[tuple[float, int]]]:
    """A running job's GPUs now, by the dislike of their node, under its GPU type."""
    current = job.current
    if current is None or current.mig is not None:
        return {}
    return {
        current.shape.gpu_type: [
            (dislike_of(job.preference, s.node), len(s.gpu_indices)) for s in current.placement
        ]
    }
