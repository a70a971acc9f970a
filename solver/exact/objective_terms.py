"""The objective of the full model (docs/objective.md): per-configuration values, migration,
locality and node preferences, with the groups that bound CP-SAT's rounding error."""

from __future__ import annotations

import numpy as np

from solver.domain import EnergyBasis
from solver.exact.blocks import interleave, ones
from solver.exact.fairness import add_fairness, linear_values
from solver.exact.milp import Formulation
from solver.exact.rows import FloatArray, floats, ints, starts
from solver.scoring.objective import migration_cost, queued_value, throughput_weight


def config_charged_watts(f: Formulation) -> FloatArray:
    """solver.scoring.objective.energy_watts of every configuration, in numpy (the same
    operations, so the same floats): the draw, or under WASTE the draw less sps x e*_j."""
    lay = f.layout
    if f.problem.weights.energy_basis is EnergyBasis.DRAW:
        return lay.cfg_watts
    least = floats([f.configs.least_joules(name) for name in lay.job_names])[lay.cfg_job]
    return floats(np.maximum(0.0, lay.cfg_watts - lay.cfg_sps * least))


def config_values(f: Formulation) -> FloatArray:
    """config_value(c) - queued_value(j) of every configuration (solver.scoring.objective,
    computed with numpy in the same order of operations, so to the same floats)."""
    p, lay = f.problem, f.layout
    w = p.weights
    jobs = lay.jobs
    weight = floats([j.weight for j in jobs])[lay.cfg_job]
    per_utility = floats([throughput_weight(j, w) for j in jobs])[lay.cfg_job]
    best = floats([f.configs.best_samples_per_second.get(j.name, 0.0) for j in jobs])[lay.cfg_job]
    required = [j.required_samples_per_second for j in jobs]
    has_deadline = np.array([r is not None for r in required], dtype=bool)[lay.cfg_job]
    rate = floats([1.0 if r is None else r for r in required])[lay.cfg_job]
    queued = floats([queued_value(j, w) for j in jobs])[lay.cfg_job]
    sps = lay.cfg_sps
    utility = np.divide(sps, best, out=np.zeros_like(sps), where=best > 0)
    shortfall = np.where(has_deadline, np.maximum(0.0, 1.0 - sps / rate), 0.0)
    return floats(
        per_utility * utility
        - w.energy * config_charged_watts(f) / p.cluster.max_gpu_watts()
        - w.deadline * weight * shortfall
        + w.locality * lay.cfg_min_spread
        - queued
    )


def set_objective(f: Formulation) -> None:
    """The objective of docs/objective.md: per-configuration values, migration, locality,
    fairness."""
    p, lay = f.problem, f.layout
    w = p.weights
    for job in p.jobs:
        f.offset += queued_value(job, w) - migration_cost(job, w)
    keep = f.index.keep if f.index.keep is not None else np.full(lay.num_jobs, -1, np.int64)
    kept = ints(np.flatnonzero(keep >= 0))
    y_at, keep_at = interleave([ints(np.diff(lay.cfg_start)), (keep >= 0).astype(np.int64)])
    variables = np.empty(y_at.size + keep_at.size, dtype=np.int64)
    coefs = np.empty(variables.size)
    values = config_values(f)
    fair = linear_values(f)
    variables[y_at], coefs[y_at] = f.index.y, values if fair is None else values + fair
    variables[keep_at] = keep[kept]
    coefs[keep_at] = [migration_cost(lay.jobs[j], w) for j in kept.tolist()]
    f.add_objective(ints(variables), coefs)
    jobs = ints(np.flatnonzero(lay.has_configs()))
    f.add_objective_groups(starts(ints(np.diff(lay.cfg_start)[jobs])), f.index.y, ones(jobs.size))
    f.add_objective_groups(ints(np.arange(kept.size + 1)), keep[kept], ones(kept.size))
    z = f.index.z if f.index.z is not None else ints([])
    used = ints(np.concatenate([z, np.sort(f.index.r)]))
    if used.size:
        f.add_objective(used, floats(np.full(used.size, -w.locality)))
        # At an optimum a node or rack is marked only where the job has a GPU.
        gpus = int(sum(n.available_gpus for n in p.cluster.nodes))
        f.add_objective_groups(ints([0, used.size]), used, ints([2 * gpus]))
    add_node_preferences(f)
    add_fairness(f)


def add_node_preferences(f: Formulation) -> None:
    """P: each GPU of a job on a node it would rather not use costs the weight times its
    dislike over the job's max_gpus (solver.preferences). One group per job: its GPUs there
    are at most its max_gpus, which bounds CP-SAT's rounding of these coefficients."""
    w = f.problem.weights.node_preference
    x = f.index.x
    if w <= 0 or x is None:
        return
    lay = f.layout
    variables, coefs, counts, most = [], [], [], []
    for j, job in enumerate(lay.jobs):
        if job.preference is None or not job.preference.dislike:
            continue
        dislike = job.preference.dislike
        pairs = np.arange(lay.pair_start[j], lay.pair_start[j + 1])
        cost = floats([dislike.get(lay.node_names[n], 0.0) for n in lay.pair_node[pairs].tolist()])
        on = cost > 0
        if not on.any():
            continue
        variables.append(x[pairs[on]])
        coefs.append(-w * cost[on] / max(job.max_gpus, 1))
        counts.append(int(on.sum()))
        most.append(job.max_gpus)
    if not variables:
        return
    chosen = ints(np.concatenate(variables))
    f.add_objective(chosen, floats(np.concatenate(coefs)))
    f.add_objective_groups(starts(ints(counts)), chosen, ints(most))
