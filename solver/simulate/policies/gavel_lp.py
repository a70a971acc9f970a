"""Gavel's allocation LPs over time shares X[j, t] (``solver.simulate.policies.gavel`` has the
mechanism around them and their sources): max-sum throughput, max-min fairness normalised by
the proportional policy's throughput, and Gavel's base constraints

    sum_t X[j, t] <= 1,   sum_j scale_factor_j * X[j, t] <= num_gpus_t,   X >= 0
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from solver.domain import Config, Job
from solver.simulate.policies.lp import solve_max

Shares = dict[tuple[str, str], float]


def max_sum_throughput(
    jobs: Sequence[Job],
    types: Sequence[str],
    configs: Mapping[tuple[str, str], Config],
    capacity: Mapping[str, float],
    *,
    normalize: bool = False,
    time_limit_s: float = math.inf,
) -> Shares:
    """Gavel's max-sum-throughput LP: X[j, t] for every (job, type) with a configuration."""
    keys = [(j.name, t) for j in jobs for t in types if (j.name, t) in configs]
    best = {
        j.name: max((configs[k].samples_per_second for k in keys if k[0] == j.name), default=1.0)
        for j in jobs
    }
    gains = [configs[k].samples_per_second / (best[k[0]] if normalize else 1.0) for k in keys]
    index = {k: i for i, k in enumerate(keys)}
    x = solve_max(gains, _base_rows(jobs, types, configs, capacity, index), interior=True,
                  time_limit_s=time_limit_s)  # fmt: skip
    if x is None:
        return {}
    return {k: max(min(x[i], 1.0), 0.0) for k, i in index.items()}


def proportional_throughput(
    job: Job, types: Sequence[str], configs: Mapping[tuple[str, str], Config],
    capacity: Mapping[str, float],
) -> float:  # fmt: skip
    """The job's throughput under Gavel's ProportionalPolicy: time on each type in proportion
    to its GPU count, summing to 1."""
    total = sum(capacity.get(t, 0.0) for t in types)
    if total <= 0:
        return 0.0
    return sum(
        configs[(job.name, t)].samples_per_second * capacity.get(t, 0.0) / total
        for t in types
        if (job.name, t) in configs
    )


def max_min_fairness(
    jobs: Sequence[Job],
    types: Sequence[str],
    configs: Mapping[tuple[str, str], Config],
    capacity: Mapping[str, float],
    *,
    time_limit_s: float = math.inf,
) -> Shares:
    """Gavel's max_min_fairness_perf LP: maximise the least normalised throughput
    sum_t tput[j, t] * scale_factor_j / (weight_j * prop_j) * X[j, t] (module docstring)."""
    prop = {j.name: proportional_throughput(j, types, configs, capacity) for j in jobs}
    jobs = [j for j in jobs if prop[j.name] > 0]
    keys = [(j.name, t) for j in jobs for t in types if (j.name, t) in configs]
    if not keys:
        return {}
    weight = {j.name: j.weight for j in jobs}
    coef = {
        k: configs[k].samples_per_second * configs[k].num_gpus / (weight[k[0]] * prop[k[0]])
        for k in keys
    }
    index = {k: i for i, k in enumerate(keys)}
    z = len(keys)  # the least normalised throughput
    rows = _base_rows(jobs, types, configs, capacity, index)
    for j in jobs:
        mine = [k for k in keys if k[0] == j.name]
        rows.append(([z, *(index[k] for k in mine)], [1.0, *(-coef[k] for k in mine)], 0.0))
    top = max(sum(coef[k] for k in keys if k[0] == j.name) for j in jobs)
    gains = [0.0] * len(keys) + [1.0]
    x = solve_max(gains, rows, interior=True, time_limit_s=time_limit_s,
                  upper=[1.0] * len(keys) + [top])  # fmt: skip
    if x is None:
        return {}
    return {k: max(min(x[i], 1.0), 0.0) for k, i in index.items()}


def _base_rows(
    jobs: Sequence[Job],
    types: Sequence[str],
    configs: Mapping[tuple[str, str], Config],
    capacity: Mapping[str, float],
    index: Mapping[tuple[str, str], int],
) -> list[tuple[Sequence[int], Sequence[float], float]]:
    """sum_t X[j, t] <= 1 per job and sum_j scale_factor_j X[j, t] <= num_gpus_t per type."""
    rows: list[tuple[Sequence[int], Sequence[float], float]] = []
    for j in jobs:
        cols = [index[(j.name, t)] for t in types if (j.name, t) in index]
        rows.append((cols, [1.0] * len(cols), 1.0))
    for t in types:
        cols = [index[(j.name, t)] for j in jobs if (j.name, t) in index]
        coefs = [float(configs[(j.name, t)].num_gpus) for j in jobs if (j.name, t) in index]
        rows.append((cols, coefs, float(capacity.get(t, 0.0))))
    return rows
