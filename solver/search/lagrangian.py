"""Lagrangian bound of the aggregated model, in numpy: valid at every step, cheap at any size.

The aggregated model (solver.search.bound) picks at most one configuration per job against one GPU
pool per type and the cluster power budget. Pricing those few coupling constraints (lambda per
pool, mu for power) splits it into independent per-job choices:

    L(lambda, mu) = sum_t lambda_t cap_t + mu B
                    + sum_j max(0, max_c v_jc - lambda_t(c) g_c - mu p_c)

Weak duality makes every L(lambda, mu) with lambda, mu >= 0 an upper bound on the aggregated
optimum, itself an upper bound on the full problem; its minimum equals the LP bound. One
evaluation costs milliseconds where an LP over 250,000 configurations takes GLOP ten seconds;
Kelley's cutting planes over the few prices find the minimum in tens of evaluations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from ortools.linear_solver import pywraplp

from solver.domain import Config, Problem
from solver.perfmodel import budgets
from solver.perfmodel.configs import ConfigSet
from solver.scoring.objective import migration_cost, queued_value, running_gains
from solver.search.bound_preferences import floor_per_gpu, kept_cost

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SAFETY = 1e-9
"""Relative margin for floating-point sums: the bound is rounded up by this much."""


@dataclass(frozen=True)
class LagrangianBound:
    best_bound: float
    """Upper bound on the full problem's objective."""
    choice: dict[str, Config]
    """Each job's best configuration at the best prices: a guide for placement."""
    iterations: int
    wall_seconds: float
    prices: dict[str, float] = field(default_factory=dict)
    """lambda at the best bound: shadow price of one GPU of each type (pool), in objective units."""
    watt_price: float = 0.0
    """mu at the best bound: shadow price of one watt drawn over idle (0 without a power budget)."""


@dataclass
class _Arrays:
    job: IntArray
    """Job index of each configuration, sorted ascending."""
    value: FloatArray
    """Objective gained by running the configuration instead of queueing, keep bonus included."""
    pool: IntArray
    gpus: FloatArray
    power: FloatArray
    starts: IntArray
    """First configuration of each job that has any."""
    forced: npt.NDArray[np.bool_]
    """Per job with configurations: must run (a non-preemptible job kept in place)."""
    capacity: FloatArray
    power_room: float | None
    offset: float


def _arrays(problem: Problem, configs: ConfigSet) -> tuple[_Arrays, list[Config]]:
    cluster = problem.cluster
    w = problem.weights
    max_watts = cluster.max_gpu_watts()
    types = sorted(cluster.gpu_types)
    pool_index = {t: i for i, t in enumerate(types)}
    jobs: list[int] = []
    pools: list[int] = []
    values: list[float] = []
    gpus: list[float] = []
    power: list[float] = []
    flat: list[Config] = []
    starts: list[int] = []
    forced: list[bool] = []
    offset = 0.0
    for k, job in enumerate(problem.jobs):
        offset += queued_value(job, w) - migration_cost(job, w)
        kept_shape = job.current.shape if job.current is not None else None
        best = configs.best_samples_per_second[job.name]
        must = job.current is not None and not job.preemptible
        options = [
            c for c in configs.by_job[job.name] if not must or c.shape == kept_shape
        ]  # a non-preemptible job has only its running shape
        if not options:
            continue
        starts.append(len(flat))
        forced.append(must)
        gains = running_gains(job, options, best, w, max_watts, configs.least_joules(job.name))
        keep = migration_cost(job, w)
        per_gpu = floor_per_gpu(problem, job)
        kept = kept_cost(problem, job)
        for c, v in zip(options, gains, strict=True):
            jobs.append(k)
            if not per_gpu and kept is None:
                values.append(v + keep if c.shape == kept_shape else v)
            else:
                values.append(_priced(v, c, kept_shape, keep, per_gpu, kept))
            pools.append(pool_index[c.gpu_type])
            gpus.append(float(c.num_gpus))
            power.append(budgets.extra_watts(cluster, c))
            flat.append(c)
    capacity = np.zeros(len(types))
    for n in cluster.nodes:
        capacity[pool_index[n.gpu_type]] += n.available_gpus
    room = budgets.power_room(cluster)
    arrays = _Arrays(
        job=np.array(jobs, dtype=np.int64),
        value=np.array(values, dtype=np.float64),
        pool=np.array(pools, dtype=np.int64),
        gpus=np.array(gpus, dtype=np.float64),
        power=np.array(power, dtype=np.float64),
        starts=np.array(starts, dtype=np.int64),
        forced=np.array(forced, dtype=np.bool_),
        capacity=capacity,
        power_room=room,
        offset=offset,
    )
    return arrays, flat


def _priced(
    value: float,
    c: Config,
    kept_shape: object,
    keep: float,
    per_gpu: dict[str, float],
    kept: float | None,
) -> float:
    """A configuration's value with the job's preferences: the floor wherever it goes; in its
    running shape, what it pays where it runs, worth keeping only while the migration saved
    exceeds that (solver.search.bound_preferences)."""
    floor = per_gpu.get(c.gpu_type, 0.0) * c.num_gpus
    if c.shape != kept_shape:
        return value - floor
    above = max((kept if kept is not None else floor) - floor, 0.0)
    return value - floor + max(keep - above, 0.0)


def _evaluate(
    a: _Arrays, prices: FloatArray, mu: float
) -> tuple[float, FloatArray, float, IntArray]:
    """L(prices, mu), its subgradient (pools, power) and each job's chosen configuration (-1)."""
    reduced = a.value - prices[a.pool] * a.gpus - mu * a.power
    if a.starts.size == 0:
        dual = float(prices @ a.capacity + (mu * a.power_room if a.power_room is not None else 0))
        return dual, a.capacity.copy(), a.power_room or 0.0, np.empty(0, dtype=np.int64)
    best = np.maximum.reduceat(reduced, a.starts)
    # The index of each job's best configuration: last maximum of its segment.
    is_best = reduced == np.repeat(best, np.diff(np.append(a.starts, reduced.size)))
    positions = np.flatnonzero(is_best)
    owner = np.searchsorted(a.starts, positions, side="right") - 1
    chosen = np.full(a.starts.size, -1, dtype=np.int64)
    chosen[owner] = positions
    take = a.forced | (best > 0)
    gain = np.where(take, best, 0.0)
    chosen = np.where(take, chosen, -1)
    picked = chosen[chosen >= 0]
    used = np.bincount(a.pool[picked], weights=a.gpus[picked], minlength=a.capacity.size)
    dual = float(prices @ a.capacity + gain.sum())
    drawn = float(a.power[picked].sum())
    if a.power_room is not None:
        dual += mu * a.power_room
    return dual, a.capacity - used, (a.power_room or 0.0) - drawn, chosen


def solve_lagrangian(
    problem: Problem,
    configs: ConfigSet,
    *,
    time_limit: float,
    max_iterations: int = 200,
    tolerance: float = 1e-6,
) -> LagrangianBound:
    """Kelley's cutting planes on the prices: a tiny LP (GLOP) over the cuts picks each next
    price vector; stops when the lowest bound met is within `tolerance` of the cuts' minimum.

    Every evaluated L(prices) is a valid bound, so stopping early (time) stays honest.
    """
    start = time.monotonic()
    a, flat = _arrays(problem, configs)
    pools = a.capacity.size
    has_power = a.power_room is not None
    dims = pools + (1 if has_power else 0)
    upper = np.zeros(dims)
    if a.value.size:
        positive = np.maximum(a.value, 0.0)
        upper[:pools] = [
            float((positive / a.gpus)[a.pool == t].max(initial=0.0)) for t in range(pools)
        ]
        if has_power:
            drawn = a.power > 0
            upper[pools] = float((positive[drawn] / a.power[drawn]).max(initial=0.0))
    master = pywraplp.Solver.CreateSolver("GLOP")
    x = [master.NumVar(0.0, float(upper[d]), f"price{d}") for d in range(dims)]
    t = master.NumVar(-master.infinity(), master.infinity(), "t")
    master.Minimize(t)
    point = np.zeros(dims)
    best_dual, best_chosen = np.inf, np.empty(0, dtype=np.int64)
    best_point = point
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        prices, mu = point[:pools], float(point[pools]) if has_power else 0.0
        dual, slack, power_slack, chosen = _evaluate(a, prices, mu)
        if dual < best_dual:
            best_dual, best_chosen, best_point = dual, chosen, point
        grad = np.append(slack, power_slack) if has_power else slack
        # Cut: L(y) >= dual + grad . (y - point)
        master.Add(t >= dual + sum(float(grad[d]) * (x[d] - float(point[d])) for d in range(dims)))
        if master.Solve() != pywraplp.Solver.OPTIMAL:
            break
        floor = master.Objective().Value()
        if best_dual - floor <= tolerance * max(abs(best_dual), 1.0):
            break
        if time.monotonic() - start > time_limit:
            break
        point = np.array([v.solution_value() for v in x])
    bound = float(best_dual) + a.offset
    bound += SAFETY * max(abs(bound), 1.0)
    choice = {problem.jobs[int(a.job[i])].name: flat[int(i)] for i in best_chosen if i >= 0}
    types = sorted(problem.cluster.gpu_types)
    gpu_prices = {t: float(best_point[i]) for i, t in enumerate(types)}
    watt_price = float(best_point[pools]) if has_power else 0.0
    elapsed = time.monotonic() - start
    return LagrangianBound(bound, choice, iterations, elapsed, gpu_prices, watt_price)
