"""Aggregated model: configurations against GPU pools per type, without node placement.

It relaxes the full model (placement can only lose GPUs to fragmentation and pay locality;
rack budgets are dropped), so its proven optimum bound is a valid upper bound on the whole
problem. Its solution is also a strong guide: a configuration choice to place greedily.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ortools.linear_solver import pywraplp

from solver.domain import Config, Problem
from solver.model.configs import ConfigSet
from solver.scoring.objective import migration_cost, queued_value, running_gain


@dataclass(frozen=True)
class AggregateOutcome:
    status: str
    best_bound: float | None
    """Proven upper bound on the full problem's objective, rounding error included."""
    choice: dict[str, Config]
    """The aggregated solution: a configuration per running job."""
    wall_seconds: float


LP_SAFETY = 1e-6
"""Relative margin added to the LP optimum: GLOP's optimality tolerances, made explicit."""


def solve_aggregate(problem: Problem, configs: ConfigSet) -> AggregateOutcome:
    """LP relaxation of the aggregated model (GLOP): a bound in milliseconds, and a rounding.

    The multiple-choice knapsack behind it has an LP optimum with at most one fractional job
    per pool and budget, so rounding each job to its heaviest configuration is close to optimal.
    """
    start = time.monotonic()
    cluster = problem.cluster
    w = problem.weights
    max_watts = cluster.max_gpu_watts()
    lp = pywraplp.Solver.CreateSolver("GLOP")
    pools: dict[str, list[tuple[int, pywraplp.Variable]]] = {}
    power_terms: list[tuple[float, pywraplp.Variable]] = []
    objective: list[tuple[float, pywraplp.Variable]] = []
    y: dict[tuple[str, int], pywraplp.Variable] = {}
    offset = 0.0
    for job in problem.jobs:
        options = configs.by_job[job.name]
        offset += queued_value(job, w) - migration_cost(job, w)
        best = configs.best_samples_per_second[job.name]
        same_shape = []
        for i, c in enumerate(options):
            var = lp.NumVar(0.0, 1.0, f"y[{job.name},{i}]")
            y[job.name, i] = var
            # Placement terms dropped: w_L (nodes + racks - min) >= 0 only lowers the objective.
            value = running_gain(job, c, best, w, max_watts)
            objective.append((value, var))
            pools.setdefault(c.gpu_type, []).append((c.num_gpus, var))
            idle = cluster.gpu_types[c.gpu_type].idle_watts
            power_terms.append((c.watts - idle * c.num_gpus, var))
            if job.current is not None and c.shape == job.current.shape:
                same_shape.append(var)
        if options:
            lp.Add(sum(y[job.name, i] for i in range(len(options))) <= 1)
        if same_shape:
            keep = lp.NumVar(0.0, 1.0, f"keep[{job.name}]")
            lp.Add(keep <= sum(same_shape))
            objective.append((migration_cost(job, w), keep))
            if job.current is not None and not job.preemptible:
                lp.Add(keep >= 1)
    for gpu_type, terms in pools.items():
        capacity = sum(n.available_gpus for n in cluster.nodes if n.gpu_type == gpu_type)
        lp.Add(sum(k * v for k, v in terms) <= capacity)
    if cluster.power_budget_watts is not None:
        idle_total = sum(
            n.gpu_count * cluster.gpu_types[n.gpu_type].idle_watts for n in cluster.nodes
        )
        lp.Add(sum(k * v for k, v in power_terms) <= cluster.power_budget_watts - idle_total)
    lp.Maximize(sum(k * v for k, v in objective))
    status = lp.Solve()
    elapsed = time.monotonic() - start
    if status == pywraplp.Solver.INFEASIBLE:
        return AggregateOutcome("INFEASIBLE", None, {}, elapsed)
    if status != pywraplp.Solver.OPTIMAL:
        return AggregateOutcome("NOT_SOLVED", None, {}, elapsed)
    value = lp.Objective().Value() + offset
    bound = value + LP_SAFETY * max(abs(value), 1.0)
    choice: dict[str, Config] = {}
    for job in problem.jobs:
        options = configs.by_job[job.name]
        weights = [(y[job.name, i].solution_value(), i) for i in range(len(options))]
        if weights and max(weights)[0] >= 0.5 - 1e-9:
            choice[job.name] = options[max(weights)[1]]
    return AggregateOutcome("OPTIMAL", bound, choice, elapsed)
