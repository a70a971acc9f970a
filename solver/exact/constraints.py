"""The constraint families of the full model, one ``add_*`` function each, and its objective.

Each family adds its variables and rows to a ``Formulation`` and is tested on its own by
leaving it out (``solver.exact.formulation.build``). Power is in milliwatts, each draw rounded
up and each budget down, so that the model can only be stricter than the checker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from solver.domain import Node
from solver.exact.model import Formulation, ObjectiveGroup, Term
from solver.scoring.objective import config_value, migration_cost, queued_value


def add_choice_vars(f: Formulation) -> None:
    """y[j, i] for every job and configuration: the model's core, made before any family."""
    for job in f.problem.jobs:
        for i in range(len(f.configs.by_job[job.name])):
            f.y[job.name, i] = f.add_var(f"y[{job.name},{i}]", 0, 1)


def add_config_choice(f: Formulation) -> None:
    """Each job runs in at most one configuration."""
    for job in f.problem.jobs:
        options = f.configs.by_job[job.name]
        if options:
            terms = [(f.y[job.name, i], 1) for i in range(len(options))]
            f.add_row("config_choice", f"one_config[{job.name}]", terms, hi=1)


def add_placement_vars(f: Formulation) -> None:
    """x[j, n] on the nodes of the types the job's configurations use."""
    for name in f.jobs_with_configs():
        types = {c.gpu_type for c in f.configs.by_job[name]}
        nodes = [n for n in f.problem.cluster.nodes if n.gpu_type in types and n.available_gpus > 0]
        f.candidates[name] = nodes
        for n in nodes:
            f.x[name, n.name] = f.add_var(f"x[{name},{n.name}]", 0, n.available_gpus)


def add_gang_size(f: Formulation) -> None:
    """All or nothing: the GPUs placed equal the chosen configuration's GPU count."""
    for name in f.jobs_with_configs():
        terms = [(f.x[name, n.name], 1) for n in f.candidates[name]]
        terms += [(f.y[name, i], -c.num_gpus) for i, c in enumerate(f.configs.by_job[name])]
        f.add_row("gang_size", f"gang_size[{name}]", terms, 0, 0)


def add_gpu_type_match(f: Formulation) -> None:
    """A job uses only nodes of its chosen configuration's GPU type."""
    for name in f.jobs_with_configs():
        options = f.configs.by_job[name]
        for n in f.candidates[name]:
            terms = [(f.x[name, n.name], 1)]
            terms += [
                (f.y[name, i], -n.available_gpus)
                for i, c in enumerate(options)
                if c.gpu_type == n.gpu_type
            ]
            f.add_row("gpu_type_match", f"type_match[{name},{n.name}]", terms, hi=0)


def add_tensor_groups_in_node(f: Formulation) -> None:
    """Tensor-parallel groups never cross nodes: x[j, n] = tp * q[j, n] for the chosen tp."""
    for name in f.jobs_with_configs():
        options = f.configs.by_job[name]
        degrees = sorted({c.shape.tensor_parallel for c in options if c.shape.tensor_parallel > 1})
        if not degrees:
            continue
        for t in degrees:
            f.tp[name, t] = f.add_var(f"tp[{name},{t}]", 0, 1)
            terms = [(f.tp[name, t], 1)]
            terms += [(f.y[name, i], -1) for i, c in enumerate(options) if c.tensor_parallel == t]
            f.add_row("tensor_groups_in_node", f"tp_chosen[{name},{t}]", terms, 0, 0)
        for n in f.candidates[name]:
            q = f.add_var(f"q[{name},{n.name}]", 0, n.available_gpus // degrees[0])
            f.q[name, n.name] = q
            for t in degrees:
                f.add_row(
                    "tensor_groups_in_node",
                    f"tp_groups[{name},{n.name},{t}]",
                    [(f.x[name, n.name], 1), (q, -t)],
                    0,
                    0,
                    enforce=f.tp[name, t],
                )


def add_gpu_capacity(f: Formulation) -> None:
    """No node gives out more GPUs than it has available."""
    per_node: dict[str, list[int]] = {}
    for (_, node), var in f.x.items():
        per_node.setdefault(node, []).append(var)
    for n in f.problem.cluster.nodes:
        if len(per_node.get(n.name, [])) > 1:
            terms = [(v, 1) for v in per_node[n.name]]
            f.add_row("gpu_capacity", f"capacity[{n.name}]", terms, hi=n.available_gpus)


def add_locality(f: Formulation) -> None:
    """z and r mark the nodes and racks a job uses; the objective charges w_L per each."""
    if f.problem.weights.locality <= 0:
        return
    for name in f.jobs_with_configs():
        for n in f.candidates[name]:
            z = f.add_var(f"z[{name},{n.name}]", 0, 1)
            f.z[name, n.name] = z
            f.add_row(
                "locality",
                f"node_used[{name},{n.name}]",
                [(f.x[name, n.name], 1), (z, -n.available_gpus)],
                hi=0,
            )
            if (name, n.rack) not in f.r:
                f.r[name, n.rack] = f.add_var(f"r[{name},{n.rack}]", 0, 1)
            f.add_row(
                "locality", f"rack_used[{name},{n.name}]", [(z, 1), (f.r[name, n.rack], -1)], hi=0
            )


def add_migration(f: Formulation) -> None:
    """keep[j] holds a running job on its GPUs in its shape; non-preemptible jobs must keep."""
    for job in f.problem.jobs:
        if job.current is None:
            continue
        options = f.configs.by_job[job.name]
        same_shape = [
            f.y[job.name, i] for i, c in enumerate(options) if c.shape == job.current.shape
        ]
        counts = job.current.gpus_per_node()
        kept_only = [f.y[job.name, i] for i, c in enumerate(options) if c.kept_only]
        if not same_shape or any((job.name, node) not in f.x for node in counts):
            if not job.preemptible:  # it cannot keep its shape: infeasible, as is the request
                f.add_infeasible("migration", f"keep_shape[{job.name}]")
            for v in kept_only:
                f.add_row("migration", f"kept_only[{f.variables[v].name}]", [(v, 1)], hi=0)
            continue
        keep = f.add_var(f"keep[{job.name}]", 0 if job.preemptible else 1, 1)
        f.keep[job.name] = keep
        for v in kept_only:  # over the memory model's limit: usable only where the job stays
            f.add_row("migration", f"kept_only[{f.variables[v].name}]", [(v, 1), (keep, -1)], hi=0)
        f.add_row(
            "migration", f"keep_shape[{job.name}]", [(v, 1) for v in same_shape], lo=1, enforce=keep
        )
        for n in f.candidates[job.name]:
            k = counts.get(n.name, 0)
            f.add_row(
                "migration",
                f"keep_gpus[{job.name},{n.name}]",
                [(f.x[job.name, n.name], 1)],
                k,
                k,
                enforce=keep,
            )


def _idle(f: Formulation, nodes: Sequence[Node]) -> float:
    types = f.problem.cluster.gpu_types
    return sum(n.gpu_count * types[n.gpu_type].idle_watts for n in nodes)


MILLIWATTS = 1000
"""Power rows count milliwatts: each configuration's draw rounded up, each budget down, so the
model is at most 1 mW per running job stricter than the checker."""


def add_power_budget(f: Formulation) -> None:
    """Assigned GPUs at their configuration's power, all others idle, within the budget (mW)."""
    budget = f.problem.cluster.power_budget_watts
    if budget is None:
        return
    types = f.problem.cluster.gpu_types
    terms = []
    for name in f.jobs_with_configs():
        for i, c in enumerate(f.configs.by_job[name]):
            extra = c.watts - types[c.gpu_type].idle_watts * c.num_gpus
            terms.append((f.y[name, i], math.ceil(extra * MILLIWATTS)))
    cap = math.floor((budget - _idle(f, f.problem.cluster.nodes)) * MILLIWATTS)
    f.add_row("power_budget", "power_budget[cluster]", [t for t in terms if t[1]], hi=cap)


def add_rack_power_budget(f: Formulation) -> None:
    """Per rack, in mW: w[j, k, i] = GPUs of job j in rack k when in configuration i."""
    cluster = f.problem.cluster
    for rack, budget in cluster.rack_power_budgets_watts.items():
        rack_nodes = [n for n in cluster.nodes if n.rack == rack]
        terms: list[Term] = []
        for name in f.jobs_with_configs():
            in_rack = [f.x[name, n.name] for n in f.candidates[name] if n.rack == rack]
            if not in_rack:
                continue
            cap = sum(n.available_gpus for n in f.candidates[name] if n.rack == rack)
            parts: list[Term] = []
            for i, c in enumerate(f.configs.by_job[name]):
                per_gpu = c.watts / c.num_gpus - cluster.gpu_types[c.gpu_type].idle_watts
                w = f.add_var(f"w[{name},{rack},{i}]", 0, cap)
                f.w[name, rack, i] = w
                f.add_row(
                    "rack_power_budget",
                    f"rack_share_on[{name},{rack},{i}]",
                    [(w, 1), (f.y[name, i], -cap)],
                    hi=0,
                )
                parts.append((w, 1))
                terms.append((w, math.ceil(per_gpu * MILLIWATTS)))
            f.add_row(
                "rack_power_budget",
                f"rack_share[{name},{rack}]",
                parts + [(v, -1) for v in in_rack],
                0,
                0,
            )
        cap_mw = math.floor((budget - _idle(f, rack_nodes)) * MILLIWATTS)
        f.add_row("rack_power_budget", f"rack_power[{rack}]", [t for t in terms if t[1]], hi=cap_mw)


def set_objective(f: Formulation) -> None:
    """The objective of docs/objective.md: per-configuration values, migration, locality."""
    p = f.problem
    w = p.weights
    max_watts = p.cluster.max_gpu_watts()
    for job in p.jobs:
        f.offset += queued_value(job, w) - migration_cost(job, w)
        best = f.configs.best_samples_per_second[job.name]
        ys = []
        for i, c in enumerate(f.configs.by_job[job.name]):
            v = config_value(job, c, best, w, max_watts) - queued_value(job, w)
            f.objective.append((f.y[job.name, i], v))
            ys.append(f.y[job.name, i])
        if ys:
            f.objective_groups.append(ObjectiveGroup(tuple(ys), 1))
        if job.name in f.keep:
            f.objective.append((f.keep[job.name], migration_cost(job, w)))
            f.objective_groups.append(ObjectiveGroup((f.keep[job.name],), 1))
    used = (*f.z.values(), *f.r.values())
    for var in used:
        f.objective.append((var, -w.locality))
    if used:
        # At an optimum a node or rack is marked only where the job has a GPU.
        gpus = sum(n.available_gpus for n in p.cluster.nodes)
        f.objective_groups.append(ObjectiveGroup(tuple(used), 2 * gpus))
