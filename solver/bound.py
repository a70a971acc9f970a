"""Aggregated model: configurations against GPU pools per type, without node placement.

It relaxes the full model (placement can only lose GPUs to fragmentation and pay locality;
rack budgets are dropped), so its proven optimum bound is a valid upper bound on the whole
problem. Its solution is also a strong guide: a configuration choice to place greedily.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ortools.sat.python import cp_model

from solver.configs import ConfigSet
from solver.domain import Config, Problem
from solver.objective import config_value, migration_cost, queued_value

SCALE = 1_000_000


@dataclass(frozen=True)
class AggregateOutcome:
    status: str
    best_bound: float | None
    """Proven upper bound on the full problem's objective, rounding error included."""
    choice: dict[str, Config]
    """The aggregated solution: a configuration per running job."""
    wall_seconds: float


def solve_aggregate(
    problem: Problem,
    configs: ConfigSet,
    *,
    time_limit: float,
    seed: int,
    threads: int,
) -> AggregateOutcome:
    cluster = problem.cluster
    w = problem.weights
    max_watts = cluster.max_gpu_watts()
    model = cp_model.CpModel()
    pools: dict[str, list[tuple[int, cp_model.IntVar]]] = {}
    power_terms: list[tuple[int, cp_model.IntVar]] = []
    objective: list[tuple[int, cp_model.IntVar]] = []
    y: dict[tuple[str, int], cp_model.IntVar] = {}
    offset = 0.0
    slack = 0.0
    for job in problem.jobs:
        options = configs.by_job[job.name]
        offset += queued_value(job, w) - migration_cost(job, w)
        best = configs.best_samples_per_second[job.name]
        worst = 0.0
        same_shape = []
        for i, c in enumerate(options):
            var = model.new_bool_var(f"y[{job.name},{i}]")
            y[job.name, i] = var
            # Placement terms dropped: w_L (nodes + racks - min) >= 0 only lowers the objective.
            v = (
                config_value(job, c, best, w, max_watts)
                - w.locality * (c.min_nodes + c.min_racks)
                - queued_value(job, w)
            )
            coef = round(v * SCALE)
            worst = max(worst, abs(coef - v * SCALE))
            objective.append((coef, var))
            pools.setdefault(c.gpu_type, []).append((c.num_gpus, var))
            idle = cluster.gpu_types[c.gpu_type].idle_watts
            power_terms.append((math.ceil(c.watts - idle * c.num_gpus), var))
            if job.current is not None and c.shape == job.current.shape:
                same_shape.append(var)
        if options:
            model.add_at_most_one(y[job.name, i] for i in range(len(options)))
        if same_shape:
            keep = model.new_bool_var(f"keep[{job.name}]")
            model.add(keep <= sum(same_shape))
            v = migration_cost(job, w)
            objective.append((round(v * SCALE), keep))
            worst += abs(round(v * SCALE) - v * SCALE)
            if job.current is not None and not job.preemptible:
                model.add(keep == 1)
        slack += worst
    for gpu_type, terms in pools.items():
        capacity = sum(n.available_gpus for n in cluster.nodes if n.gpu_type == gpu_type)
        model.add(sum(k * v for k, v in terms) <= capacity)
    if cluster.power_budget_watts is not None:
        idle_total = sum(
            n.gpu_count * cluster.gpu_types[n.gpu_type].idle_watts for n in cluster.nodes
        )
        # Rounded up per configuration, so the right-hand side gets the same total slack back.
        model.add(
            sum(k * v for k, v in power_terms)
            <= math.floor(cluster.power_budget_watts - idle_total) + len(problem.jobs)
        )
    model.maximize(sum(k * v for k, v in objective if k))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit, 0.001)
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = max(threads, 1)
    status = solver.solve(model)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return AggregateOutcome(name, None, {}, solver.wall_time)
    bound = solver.best_objective_bound / SCALE + offset + slack / SCALE
    choice = {
        job.name: c
        for job in problem.jobs
        for i, c in enumerate(configs.by_job[job.name])
        if solver.boolean_value(y[job.name, i])
    }
    return AggregateOutcome(name, bound, choice, solver.wall_time)
