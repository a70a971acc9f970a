"""Shadow prices of the scarce resources (GPUs per type, watts) that the greedy charges.

A greedy pass ranks and picks configurations by value minus priced resources. A uniform GPU
price favours small configurations so more jobs fit; the prices of the aggregated model's
Lagrangian dual (solver.search.lagrangian) also price each GPU type and every watt drawn over
idle, which is what makes a lower clock worth its lost throughput when a power budget binds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from solver.domain import Config, Problem
from solver.perfmodel.configs import ConfigSet
from solver.search.lagrangian import LagrangianBound, solve_lagrangian

DUAL_SCALES = (1.0, 0.75, 1.25)
"""Multiples of the dual prices tried by the priced passes: they price the relaxation, whose
optimum is fractional; a little under or over them often packs the integer plan better. Scales
0.5 and 1.5 instead did worse on two power-bound snapshots, and adding them gained nothing."""
DUAL_ITERATIONS = 60
"""Cutting-plane iterations for the prices: a work limit, so the prices do not depend on the
machine's speed (the cuts over a few prices converge in tens)."""


@dataclass(frozen=True)
class Prices:
    """Price of one GPU of each type and of one watt over idle, in objective units."""

    gpu: Mapping[str, float] = field(default_factory=dict)
    default_gpu: float = 0.0
    """Price of a GPU of a type absent from `gpu`."""
    watt: float = 0.0

    def cost(self, config: Config, extra_watts: float) -> float:
        """What running `config`, drawing `extra_watts` over idle, is charged (Scorer.costs
        tabulates it per job)."""
        per_gpu = self.gpu.get(config.gpu_type, self.default_gpu)
        return per_gpu * config.num_gpus + self.watt * extra_watts

    def scaled(self, factor: float) -> Prices:
        return Prices(
            {t: factor * p for t, p in self.gpu.items()},
            factor * self.default_gpu,
            factor * self.watt,
        )

    @property
    def is_zero(self) -> bool:
        return self.default_gpu == 0 and self.watt == 0 and not any(self.gpu.values())


def uniform(price: float) -> Prices:
    """The same price for a GPU of any type; watts free."""
    return Prices(default_gpu=price)


def dual_bound(problem: Problem, configs: ConfigSet, time_limit: float) -> LagrangianBound:
    """The Lagrangian dual after DUAL_ITERATIONS cuts at most (`time_limit` is only a safety
    stop): a valid bound, and the prices at it."""
    return solve_lagrangian(problem, configs, time_limit=time_limit, max_iterations=DUAL_ITERATIONS)


def lagrangian_prices(bound: LagrangianBound) -> Prices:
    """The prices at the dual's best bound."""
    return Prices(dict(bound.prices), 0.0, bound.watt_price)


def dual_prices(problem: Problem, configs: ConfigSet, time_limit: float) -> Prices:
    """The Lagrangian dual's prices at its best bound (`time_limit` is only a safety stop)."""
    return lagrangian_prices(dual_bound(problem, configs, time_limit))


def price_ladder(dual: Prices) -> list[Prices]:
    """The dual prices at each of DUAL_SCALES, duplicates and all-zero prices left out."""
    out: list[Prices] = []
    for factor in DUAL_SCALES:
        p = dual.scaled(factor)
        if not p.is_zero and p not in out:
            out.append(p)
    return out
