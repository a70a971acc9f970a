"""The fairness term of the full model's objective (docs/objective.md, "Fairness").

The rows of ``solver.scoring.fairness`` become constraints on integer epigraph variables in
units of 1/UNITS: for the least row, one variable ``fairness_floor`` at most every entity's
row; for a sum of logs by tenant, one ``fairness_log`` per entity at most each tangent of
ln(1 + row) at a few points. What is linear in the configurations goes to their objective
coefficients, no epigraph: per-job proportional fairness (separable) and the mean row.
Coefficients and right-hand sides are rounded up, and tangents lie above the log, so the
model can only overrate a plan: its bound stays a proven bound on the exact F, and plans are
scored exactly (``score_plan``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from solver.domain import FairnessMode
from solver.exact.milp import Formulation
from solver.exact.rows import FloatArray, IntArray, floats, ints
from solver.scoring.fairness import SUM_LOG_MODES, FairnessTerms, Row

UNITS = 1_000_000
"""Epigraph steps per objective unit: the CP-SAT objective's own scale, so an epigraph
variable's objective coefficient, 1/UNITS, is exact there (the objective's factor, weight x
entity weight, is folded into the rows)."""
TANGENTS = 16
"""Tangents of ln(1 + row) per entity, at points spread geometrically over its range."""


def add_fairness(f: Formulation) -> None:
    """The fairness mode's value F, times its weight, in the objective."""
    p = f.problem
    if not p.fairness.active:
        return
    terms = FairnessTerms(p, f.configs.best_samples_per_second)
    if not terms.rows:
        return
    position = {j.name: k for k, j in enumerate(f.layout.jobs)}
    if terms.separable():
        _add_separable_offset(f, terms)
    elif p.fairness.mode in SUM_LOG_MODES:
        for row in terms.rows:
            _add_log_epigraph(f, terms, row, position)
    else:
        _add_floor(f, terms, position)


Positions = dict[str, int]
"""Each job's index in the formulation's layout."""


def _row_terms(
    f: Formulation, terms: FairnessTerms, row: Row, position: Positions
) -> tuple[IntArray, FloatArray, float, float]:
    """(y indices, float coefficients) of an entity's row, and the least and largest value the
    row can take (one configuration per job, or none)."""
    lay = f.layout
    cols: list[IntArray] = []
    coefs: list[float] = []
    low = high = row.intercept
    for job in row.jobs:
        j = position[job.name]
        start, stop = int(lay.cfg_start[j]), int(lay.cfg_start[j + 1])
        cols.append(ints(f.index.y[start:stop]))
        ts = terms.terms(job, f.configs.by_job.get(job.name, ()))
        coefs.extend(ts)
        low += min([0.0, *ts])
        high += max([0.0, *ts])
    return (ints(np.concatenate(cols)) if cols else ints([])), floats(coefs), low, high


def _add_epigraph_rows(
    f: Formulation,
    var: int,
    cols: IntArray,
    coefs: Sequence[FloatArray],
    intercepts: Sequence[float],
    name: str,
) -> None:
    """UNITS var - sum ceil(UNITS coef) y <= ceil(UNITS intercept), one row per coefficient set."""
    rows = []
    for coef, intercept in zip(coefs, intercepts, strict=True):
        scaled = ints(np.ceil(coef * UNITS))
        keep = scaled != 0
        rhs = math.ceil(intercept * UNITS)
        f.add_rows(
            "fairness",
            "fairness",
            ints([0, int(keep.sum()) + 1]),
            ints(np.concatenate([cols[keep], [var]])),
            ints(np.concatenate([-scaled[keep], [1]])),
            -np.inf,
            rhs,
            lambda: [name],
        )
        rows.append((rhs, cols[keep], scaled[keep]))
    f.index.epigraphs.append((var, rows))


def _add_floor(f: Formulation, terms: FairnessTerms, position: Positions) -> None:
    """F = the least row: one variable at most every row, weight x F in the objective."""
    parts = [(row, *_row_terms(f, terms, row, position)) for row in terms.rows]
    k = terms.weight
    low = min(part[3] for part in parts)
    high = min(part[4] for part in parts)
    if f.problem.fairness.mode is FairnessMode.DRF:  # F = min(1, least row): the variable's bound
        low, high = min(low, 1.0), min(high, 1.0)
    var = int(
        f.add_vars(
            "fairness_floor",
            math.floor(k * low * UNITS),
            math.ceil(k * high * UNITS),
            lambda: ["F"],
        )[0]
    )
    for row, cols, coefs, _, _ in parts:
        _add_epigraph_rows(f, var, cols, [k * coefs], [k * row.intercept], row.entity)
    f.add_objective(ints([var]), floats([1.0 / UNITS]))
    # the mean row's intercepts; its terms are in the configurations' coefficients
    f.offset += _mean_share(terms) * sum(row.intercept for row in terms.rows)


def _add_log_epigraph(f: Formulation, terms: FairnessTerms, row: Row, position: Positions) -> None:
    """weight x w_e x ln(1 + row), as a variable under tangents of the log."""
    cols, coefs, low, high = _row_terms(f, terms, row, position)
    low, high = max(low, 0.0), max(high, 0.0)
    points = np.geomspace(1.0 + low, 1.0 + high, TANGENTS) - 1.0 if high > low else [low]
    k = terms.weight * row.weight
    var = int(
        f.add_vars(
            "fairness_log",
            math.floor(k * math.log1p(low) * UNITS),
            math.ceil(k * math.log1p(high) * UNITS),
            lambda: [row.entity],
        )[0]
    )
    # ln(1 + s) <= ln(1 + p) + (s - p) / (1 + p), s = intercept + coefs . y
    slopes = [1.0 / (1.0 + p) for p in points]
    intercepts = [
        k * (math.log1p(p) + (row.intercept - p) * slope)
        for p, slope in zip(points, slopes, strict=True)
    ]
    _add_epigraph_rows(
        f, var, cols, [coefs * (k * slope) for slope in slopes], intercepts, row.entity
    )
    f.add_objective(ints([var]), floats([1.0 / UNITS]))


def linear_values(f: Formulation) -> FloatArray | None:
    """weight x the part of F that is linear in the configurations (in the order of the y
    variables): per-job proportional fairness's exact worth, or the mean row's terms of a
    least-row mode; None when F has no such part."""
    p = f.problem
    if not p.fairness.active:
        return None
    terms = FairnessTerms(p, f.configs.best_samples_per_second)
    if terms.separable():
        values = terms.surrogates(f.configs.by_job)
    elif terms.mean_weight and terms.rows:
        share = _mean_share(terms)
        values = {
            j.name: [share * t for t in terms.terms(j, f.configs.by_job.get(j.name, ()))]
            for r in terms.rows
            for j in r.jobs
        }
    else:
        return None
    out = np.zeros(f.layout.num_configs)
    lay = f.layout
    for j, job in enumerate(lay.jobs):
        if job.name in values:
            out[int(lay.cfg_start[j]) : int(lay.cfg_start[j + 1])] = values[job.name]
    return floats(out)


def _mean_share(terms: FairnessTerms) -> float:
    """The objective's factor of each row in weight x mean_weight x the mean row."""
    return terms.weight * terms.mean_weight / max(len(terms.rows), 1)


def _add_separable_offset(f: Formulation, terms: FairnessTerms) -> None:
    """Per-job proportional fairness: every entity's value queued, a constant (its
    configurations' worth is in their objective coefficients: ``linear_values``)."""
    for row in terms.rows:
        f.offset += terms.weight * row.weight * math.log1p(max(row.intercept, 0.0))
