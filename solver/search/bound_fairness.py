"""The fairness term in the aggregated model (``solver.search.bound``): the full model's rows
(``solver.exact.fairness``) over the configuration columns, in every mode.

Why: F depends only on which configurations run (their rates, GPU types, counts and watts),
not on placement, so the aggregated model can hold it exactly. Without it that model bounds
the objective less F (a headroom added) and its choice, which the search places, ignores F:
on the multi-tenant scenario the DRF rounds whose 1 s solve ended on such a choice were the
ones that left a tenant under its fair share. With it the aggregated optimum bounds the whole
objective and its choice is the mode's.

Per mode (docs/objective.md, "Fairness"):
- the least row (max-min, finish-time fairness): a column F at most every entity's row, its
  cost the weight; the mean row's terms in the configurations' costs, exact;
- DRF: per entity a row value v at most 1 and, through a pick per resource (exactly one set;
  binary in the MIP, relaxed in the LP), at most the picked resource's share over the fair
  share; F at most every v, and weight x mean weight x the mean of the v;
- a sum of logs by tenant: per entity a column under tangents of ln(1 + row), which lie above
  the log; per job the log's exact worth in the configurations' costs (separable).
Relaxing the picks and the log only raises the optimum, so the LP's is a bound too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from solver.domain import Config, FairnessMode, Problem
from solver.exact.fairness import mean_share, separable_constant, tangent_points
from solver.scoring.fairness import SUM_LOG_MODES, FairnessTerms, Row
from solver.search.array_lp import ArrayLp

Columns = Mapping[str, list[tuple[int, int]]]
"""Per job, its (configuration index, column) pairs."""


def holds_fairness(problem: Problem) -> bool:
    """Whether the aggregated model holds the fairness term, so that its bounds are of the
    whole objective; otherwise they leave weight x F out."""
    return problem.fairness.active


def add_fairness(
    lp: ArrayLp, terms: FairnessTerms, options: Mapping[str, Sequence[Config]], columns: Columns
) -> tuple[list[int], float]:
    """Weight x F in `lp`; the columns a MIP makes integral (DRF's picks), and F's constant
    part, which the caller adds to the objective."""
    if not terms.rows or terms.weight <= 0:
        return [], 0.0
    if terms.mode is FairnessMode.DRF:
        return add_drf(lp, terms, options, columns), 0.0
    if terms.separable():
        return [], _add_separable(lp, terms, options, columns)
    if terms.mode in SUM_LOG_MODES:
        for row in terms.rows:
            _add_log(lp, terms, row, options, columns)
        return [], 0.0
    return [], _add_least_row(lp, terms, options, columns)


def _row_columns(
    terms: FairnessTerms, row: Row, options: Mapping[str, Sequence[Config]], columns: Columns
) -> tuple[list[tuple[int, float]], float, float]:
    """An entity's row as (column, term) pairs, and the least and largest value it can take
    (one configuration per job, or none)."""
    pairs: list[tuple[int, float]] = []
    low = high = row.intercept
    for job in row.jobs:
        ts = terms.terms(job, options.get(job.name, ()))
        pairs.extend((col, ts[i]) for i, col in columns.get(job.name, ()))
        low += min([0.0, *ts])
        high += max([0.0, *ts])
    return pairs, low, high


def _add_least_row(
    lp: ArrayLp, terms: FairnessTerms, options: Mapping[str, Sequence[Config]], columns: Columns
) -> float:
    """weight x (the least row + mean weight x the mean row); the mean's intercepts."""
    k = terms.weight
    mean = mean_share(terms)
    parts = [(row, *_row_columns(terms, row, options, columns)) for row in terms.rows]
    floor = lp.column(k, min(p[2] for p in parts), min(p[3] for p in parts))
    for row, pairs, _, _ in parts:
        # F - terms . x <= intercept
        lp.row([(floor, 1.0), *((col, -t) for col, t in pairs if t)], hi=row.intercept)
        if mean:
            for col, t in pairs:
                lp.cost[col] += mean * t
    return mean * sum(row.intercept for row in terms.rows)


def _add_log(
    lp: ArrayLp,
    terms: FairnessTerms,
    row: Row,
    options: Mapping[str, Sequence[Config]],
    columns: Columns,
) -> None:
    """weight x w_e x ln(1 + row), as a column under tangents of the log. The row is a column
    of its own (one row holds its terms), so each tangent has two entries, not the entity's
    every configuration: at 2,048 jobs sixteen tangents over every configuration took 0.3 s
    to build."""
    pairs, least, most = _row_columns(terms, row, options, columns)
    low, high = max(least, 0.0), max(most, 0.0)
    points = tangent_points(low, high)
    k = terms.weight * row.weight
    value = lp.column(1.0, k * math.log1p(low), k * math.log1p(high))
    level = lp.column(0.0, least, most)
    # level = intercept + terms . x
    lp.row(
        [(level, 1.0), *((col, -t) for col, t in pairs if t)], lo=row.intercept, hi=row.intercept
    )
    for p in points:
        # value <= k (ln(1 + p) + (level - p) / (1 + p))
        slope = k / (1.0 + p)
        lp.row([(value, 1.0), (level, -slope)], hi=k * math.log1p(p) - p * slope)


def _add_separable(
    lp: ArrayLp, terms: FairnessTerms, options: Mapping[str, Sequence[Config]], columns: Columns
) -> float:
    """Per-job proportional fairness: each configuration's exact worth in its cost; every
    job's value queued, the constant."""
    worth = terms.surrogates(options)
    for name, cols in columns.items():
        if name in worth:
            for i, col in cols:
                lp.cost[col] += worth[name][i]
    return separable_constant(terms)


def add_drf(
    lp: ArrayLp, terms: FairnessTerms, options: Mapping[str, Sequence[Config]], columns: Columns
) -> list[int]:
    """Weight x F under DRF in `lp`, over each job's (configuration index, column) pairs in
    `columns`; the pick columns, which a MIP makes integral."""
    k = terms.weight
    if not terms.rows or k <= 0:
        return []
    mean = mean_share(terms)
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
