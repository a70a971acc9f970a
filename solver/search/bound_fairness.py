"""DRF's term in the aggregated model (``solver.search.bound``): the full model's rows
(``solver.exact.fairness``) over the configuration columns.

Why: DRF's value depends only on which configurations run (their GPU types, counts and
watts), not on placement, so the aggregated model can hold it exactly. Without it that model
bounds the objective less F (a headroom added) and its choice, which the search places,
ignores DRF: on the multi-tenant scenario the rounds whose 1 s solve ended on such a choice
were the ones that left a tenant under its fair share. With it the aggregated optimum bounds
the whole objective and its choice is DRF's.

Per entity (docs/objective.md, "DRF"): a row value v at most 1 and, through a pick per
resource (exactly one set; binary in the MIP, relaxed in the LP), at most the picked
resource's share over the fair share; F at most every v. The objective gains
weight x (F + mean weight x the mean of the v). Relaxing the picks only raises the optimum,
so the LP's is a bound too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from solver.domain import Config, FairnessMode, Problem
from solver.scoring.fairness import FairnessTerms
from solver.search.array_lp import ArrayLp


def holds_fairness(problem: Problem) -> bool:
    """Whether the aggregated model holds the fairness term (DRF), so that its bounds are of
    the whole objective; otherwise they leave weight x F out."""
    return problem.fairness.active and problem.fairness.mode is FairnessMode.DRF


def add_drf(
    lp: ArrayLp,
    terms: FairnessTerms,
    options: Mapping[str, Sequence[Config]],
    columns: Mapping[str, list[tuple[int, int]]],
) -> list[int]:
    """Weight x F under DRF in `lp`, over each job's (configuration index, column) pairs in
    `columns`; the pick columns, which a MIP makes integral."""
    k = terms.weight
    if not terms.rows or k <= 0:
        return []
    mean = k * terms.mean_weight / len(terms.rows)
    floor = lp.column(k, 0.0, 1.0)
    picks: list[int] = []
    for row in terms.rows:
        shares: dict[str, list[tuple[int, float]]] = {}
        for job in row.jobs:
            for i, col in columns.get(job.name, ()):
                for resource, share in terms.usage(options[job.name][i]):
                    if share > 0:
                        shares.setdefault(resource, []).append((col, share))
        scale = terms.drf_scale(row.entity)
        value = lp.column(mean, 0.0, 1.0 if shares else 0.0)
        lp.row([(floor, 1.0), (value, -1.0)], hi=0.0)
        if not shares:
            continue
        if len(shares) == 1:
            (taken,) = shares.values()
            lp.row([(value, 1.0), *((col, -scale * s) for col, s in taken)], hi=0.0)
            continue
        mine = [lp.column(0.0, 0.0, 1.0) for _ in shares]
        lp.row([(p, 1.0) for p in mine], lo=1.0, hi=1.0)
        for pick, taken in zip(mine, shares.values(), strict=True):
            # v - scale x share <= 1 - pick: binding where picked, void elsewhere (v <= 1)
            lp.row([(value, 1.0), (pick, 1.0), *((col, -scale * s) for col, s in taken)], hi=1.0)
        picks.extend(mine)
    return picks
