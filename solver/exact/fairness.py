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
from collections.abc import Callable, Sequence

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
    elif p.fairness.mode is FairnessMode.DRF:
        _add_drf(f, terms, position)
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
    f.offset += mean_share(terms) * sum(row.intercept for row in terms.rows)


def _add_drf(f: Formulation, terms: FairnessTerms, position: Positions) -> None:
    """DRF: F = the least row plus b times the mean row, each entity's row the largest of its
    shares of one resource over its fair share, at most 1. Per entity a variable at most 1
    and, through a binary per resource (exactly one set), at most that resource's row; the
    others' rows are relaxed by 1, which the cap makes enough (an entity whose jobs take one
    resource needs no binary). With b > 0 a second variable, the row times b over the number
    of entities, under the same binaries, carries the mean: every objective coefficient stays
    1/UNITS, exact on CP-SAT's scale."""
    k = terms.weight
    mean = terms.mean_weight / len(terms.rows)
    floor = int(f.add_vars("fairness_floor", 0, math.ceil(k * UNITS), lambda: ["F"])[0])
    epigraph: list[tuple[int, IntArray, IntArray]] = []
    for row in terms.rows:
        resources, shares = _drf_shares(f, terms, row, position)
        picks = ints([-1] * len(resources))
        if len(resources) > 1:
            picks = f.add_vars(
                "fairness_resource",
                np.zeros(len(resources)),
                np.ones(len(resources)),
                _names([f"{row.entity}, {r}" for r in resources]),
            )
            f.add_rows(
                "fairness_resources",
                "fairness",
                ints([0, len(resources)]),
                picks,
                ints([1] * len(resources)),
                1,
                1,
                _names([row.entity]),
            )
        scale = terms.drf_scale(row.entity)
        held = []
        for factor, kind in ((k, "fairness_row"), (k * mean, "fairness_mean")):
            if factor <= 0 or (kind == "fairness_mean" and not mean):
                continue
            var = _drf_row_var(f, row.entity, kind, factor, scale, shares, picks)
            held.append(
                (
                    var,
                    [(cols, ints(np.ceil(coef * factor * scale * UNITS))) for cols, coef in shares],
                )
            )
            if kind == "fairness_row":
                _add_floor_row(f, floor, var, row.entity)
                epigraph.append((0, ints([var]), ints([1])))
            else:
                f.add_objective(ints([var]), floats([1.0 / UNITS]))
        f.index.drf_rows.append((picks, held))
    f.index.epigraphs.append((floor, epigraph))
    f.add_objective(ints([floor]), floats([1.0 / UNITS]))


def _names(names: list[str]) -> Callable[[], list[str]]:
    return lambda: names


def _drf_shares(
    f: Formulation, terms: FairnessTerms, row: Row, position: Positions
) -> tuple[list[str], list[tuple[IntArray, FloatArray]]]:
    """The resources some configuration of the entity's jobs takes (in a fixed order) and, per
    resource, the y indices of those configurations and their shares of it."""
    lay = f.layout
    taken: dict[str, tuple[list[int], list[float]]] = {}
    for job in row.jobs:
        start = int(lay.cfg_start[position[job.name]])
        for i, c in enumerate(f.configs.by_job.get(job.name, ())):
            for resource, share in terms.usage(c):
                if share > 0:
                    cols, shares = taken.setdefault(resource, ([], []))
                    cols.append(int(f.index.y[start + i]))
                    shares.append(share)
    return list(taken), [(ints(cols), floats(shares)) for cols, shares in taken.values()]


def _drf_row_var(
    f: Formulation,
    entity: str,
    kind: str,
    factor: float,
    scale: float,
    shares: Sequence[tuple[IntArray, FloatArray]],
    picks: IntArray,
) -> int:
    """A variable at most factor x min(1, scale x the picked resource's share), in units."""
    top = math.ceil(factor * UNITS)
    var = int(f.add_vars(kind, 0, top if shares else 0, lambda: [entity])[0])
    for (cols, share), pick in zip(shares, picks, strict=True):
        coefs = ints(np.ceil(share * factor * scale * UNITS))
        relax = pick >= 0
        f.add_rows(
            "fairness",
            "fairness",
            ints([0, cols.size + 1 + int(relax)]),
            ints([*cols, var, *([int(pick)] if relax else [])]),
            ints([*(-coefs), 1, *([top] if relax else [])]),
            -np.inf,
            top if relax else 0,
            lambda: [entity],
        )
    return var


def _add_floor_row(f: Formulation, floor: int, var: int, entity: str) -> None:
    """floor <= var."""
    f.add_rows(
        "fairness_floor",
        "fairness",
        ints([0, 2]),
        ints([floor, var]),
        ints([1, -1]),
        -np.inf,
        0,
        lambda: [entity],
    )


def _add_log_epigraph(f: Formulation, terms: FairnessTerms, row: Row, position: Positions) -> None:
    """weight x w_e x ln(1 + row), as a variable under tangents of the log."""
    cols, coefs, low, high = _row_terms(f, terms, row, position)
    low, high = max(low, 0.0), max(high, 0.0)
    points = tangent_points(low, high)
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
    elif terms.mean_weight and terms.rows and p.fairness.mode is not FairnessMode.DRF:
        share = mean_share(terms)
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


def tangent_points(low: float, high: float) -> list[float]:
    """Where ln(1 + row) gets its tangents, for a row within [low, high] (both >= 0):
    TANGENTS points spread geometrically in 1 + row."""
    if high <= low:
        return [low]
    return [float(p) for p in np.geomspace(1.0 + low, 1.0 + high, TANGENTS) - 1.0]


def mean_share(terms: FairnessTerms) -> float:
    """The objective's factor of each row in weight x mean_weight x the mean row."""
    return terms.weight * terms.mean_weight / max(len(terms.rows), 1)


def separable_constant(terms: FairnessTerms) -> float:
    """Per-job proportional fairness: weight x F with every entity queued (its
    configurations' worth goes to their coefficients: ``linear_values``)."""
    return sum(terms.weight * r.weight * math.log1p(max(r.intercept, 0.0)) for r in terms.rows)


def _add_separable_offset(f: Formulation, terms: FairnessTerms) -> None:
    """Per-job proportional fairness: every entity's value queued, a constant."""
    f.offset += separable_constant(terms)
