"""POP-k over Gavel's max-min fairness (``pop-maxmin``; POP, Narayanan et al., SOSP'21,
"Solving Large-Scale Granular Resource Allocation Problems Efficiently with POP"): jobs are split
at random into k equal parts, each part gets 1/k of every type's GPUs (fractional counts, as
POP's Gavel partitions), Gavel's max-min LP is solved per part and the allocations are joined;
k = 1 is the full LP. The rounds are Gavel's (``solver.simulate.policies.gavel``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from solver.domain import Config, Job
from solver.simulate.policies.gavel import GAVEL_ROUND_S, MIN_RESET_INTERVAL_S, GavelPolicy
from solver.simulate.policies.gavel_lp import Shares, max_min_fairness


def pop_partitions(jobs: Sequence[Job], k: int, rng: np.random.Generator) -> list[list[Job]]:
    """Jobs in k random parts of equal size (sizes differ by at most one)."""
    order = sorted(jobs, key=lambda j: j.name)
    perm = rng.permutation(len(order))
    shuffled = [order[i] for i in perm]
    return [shuffled[i::k] for i in range(k)]


POP_K = 4
"""Parts of the pop-maxmin baseline (POP's evaluation of Gavel uses k in 2..16)."""


class PopMaxMinPolicy(GavelPolicy):
    """POP-k over Gavel's max-min fairness LP, with Gavel's mechanism."""

    name = "pop-maxmin"

    def __init__(
        self,
        k: int = POP_K,
        seed: int = 0,
        min_reset_interval_s: float = MIN_RESET_INTERVAL_S,
        round_s: float = GAVEL_ROUND_S,
    ) -> None:
        super().__init__(min_reset_interval_s=min_reset_interval_s, round_s=round_s)
        if k < 1:
            raise ValueError(f"POP needs k >= 1, got {k}")
        self.k = k
        self.rng = np.random.default_rng(seed)

    def solve(
        self,
        jobs: Sequence[Job],
        types: Sequence[str],
        configs: Mapping[tuple[str, str], Config],
        capacity: Mapping[str, float],
        time_limit_s: float,
    ) -> Shares:
        return pop_solve(
            max_min_fairness, jobs, types, configs, capacity, self.k, self.rng, time_limit_s
        )


def pop_solve(
    lp: Callable[..., Shares],
    jobs: Sequence[Job],
    types: Sequence[str],
    configs: Mapping[tuple[str, str], Config],
    capacity: Mapping[str, float],
    k: int,
    rng: np.random.Generator,
    time_limit_s: float = math.inf,
) -> Shares:
    """POP: the LP on k random parts of the jobs, each with 1/k of every type's GPUs."""
    if k == 1:
        return lp(jobs, types, configs, capacity, time_limit_s=time_limit_s)
    part_capacity = {t: c / k for t, c in capacity.items()}
    out: Shares = {}
    for part in pop_partitions(jobs, k, rng):
        if part:
            out.update(lp(part, types, configs, part_capacity, time_limit_s=time_limit_s / k))
    return out
