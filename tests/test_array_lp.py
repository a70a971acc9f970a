"""The aggregated model's container drops a choice's columns that another of the same choice
matches in every row at a value at least as high, and its LP and MIP optima stay."""

from __future__ import annotations

import random

import highspy
import numpy as np
import pytest

from solver.search.array_lp import ArrayLp, undominated

OPTIMAL = highspy.HighsModelStatus.kOptimal


def _two_jobs(*, plain: bool) -> ArrayLp:
    """Two jobs over one pool of 4 GPUs: job a's columns 0-2 (0 and 1 alike in every row),
    job b's columns 3-4. With `plain`, the choice rows are ordinary rows."""
    lp = ArrayLp()
    a = [lp.column(1.0), lp.column(1.5), lp.column(1.2)]
    b = [lp.column(2.0), lp.column(0.5)]
    for cols in (a, b):
        if plain:
            lp.row([(c, 1.0) for c in cols], hi=1.0)
        else:
            lp.choice(cols)
    lp.row([(a[0], 2.0), (a[1], 2.0), (a[2], 3.0), (b[0], 2.0), (b[1], 1.0)], hi=4.0)
    return lp


def test_the_lower_of_two_alike_columns_is_dropped() -> None:
    assert undominated(_two_jobs(plain=False), [0, 1, 2, 3, 4]).tolist() == [1, 2, 3, 4]


def test_without_choice_rows_every_column_is_loaded() -> None:
    assert undominated(_two_jobs(plain=True), [0, 1, 2, 3, 4]).tolist() == [0, 1, 2, 3, 4]


def test_a_column_that_differs_in_one_coefficient_is_kept() -> None:
    lp = ArrayLp()
    x, y = lp.column(1.0), lp.column(2.0)
    lp.choice([x, y])
    lp.row([(x, 3.0), (y, 3.0 + 1e-12)], hi=5.0)
    assert undominated(lp, [x, y]).tolist() == [0, 1]


def test_at_equal_value_the_later_column_is_dropped() -> None:
    lp = ArrayLp()
    cols = [lp.column(1.0) for _ in range(3)]
    lp.choice(cols)
    lp.row([(c, 2.0) for c in cols], hi=3.0)
    assert undominated(lp, cols).tolist() == [0]


@pytest.mark.parametrize(("bounds", "integer"), [((0.0, 2.0), [0, 1]), ((0.0, 1.0), [1])])
def test_columns_of_other_bounds_or_integrality_are_kept(
    bounds: tuple[float, float], integer: list[int]
) -> None:
    lp = ArrayLp()
    x, y = lp.column(1.0), lp.column(2.0, *bounds)
    lp.choice([x, y])
    assert undominated(lp, integer).tolist() == [0, 1]


def test_the_solution_names_every_column_and_the_dropped_at_zero() -> None:
    status, bound, values = _two_jobs(plain=False).solve(integer=[0, 1, 2, 3, 4])
    assert status == OPTIMAL and bound == pytest.approx(3.5)
    assert values is not None and len(values) == 5
    assert values[0] == 0.0 and values[1] == pytest.approx(1.0) and values[3] == pytest.approx(1.0)


def _random_model(rng: random.Random, *, plain: bool) -> tuple[ArrayLp, list[int]]:
    """Jobs whose configurations come in alike pairs and triples, over pools and a power row,
    a forced row and a continuous column or two."""
    lp = ArrayLp()
    pools: list[list[tuple[int, float]]] = [[] for _ in range(rng.randint(1, 3))]
    power: list[tuple[int, float]] = []
    choice_cols: list[int] = []
    for _ in range(rng.randint(2, 6)):
        cols: list[int] = []
        for _ in range(rng.randint(1, 4)):
            pool, gpus, watts = (
                rng.randrange(len(pools)),
                rng.choice([1, 2, 4]),
                rng.choice([0, 300]),
            )
            for _ in range(rng.randint(1, 3)):  # alike but for their value (a clock)
                col = lp.column(round(rng.uniform(0.1, 2.0), rng.choice([1, 3])))
                cols.append(col)
                pools[pool].append((col, float(gpus)))
                if watts:
                    power.append((col, float(watts * gpus)))
        choice_cols += cols
        if plain:
            lp.row([(c, 1.0) for c in cols], hi=1.0)
        else:
            lp.choice(cols)
        if rng.random() < 0.2:
            keep = lp.column(-0.1, 0.0, 1.0)  # a continuous column in the job's own row
            lp.row([(keep, 1.0), *((c, -1.0) for c in cols[:2])], hi=0.0)
    for terms in pools:
        if terms:
            lp.row(terms, hi=float(rng.randint(2, 8)))
    if power:
        lp.row(power, hi=float(rng.randint(600, 3000)))
    return lp, choice_cols


@pytest.mark.parametrize("seed", range(40))
def test_the_optima_are_those_of_the_model_with_every_column(seed: int) -> None:
    """LP and MIP optima with the dominated columns dropped equal the plain model's, and the
    MIP's solution is feasible in it (checked row by row on the full model)."""
    plain, choices = _random_model(random.Random(seed), plain=True)
    lp, _ = _random_model(random.Random(seed), plain=False)
    for integer in (None, choices):
        full = plain.solve(integer=integer)
        fewer = lp.solve(integer=integer)
        assert full[0] == fewer[0] == OPTIMAL
        assert fewer[1] == pytest.approx(full[1], abs=1e-7)
        x = np.array(fewer[2])
        assert float(np.dot(lp.cost, x)) == pytest.approx(full[1], abs=1e-7)
        starts = [*lp.starts, len(lp.index)]
        for r, (lo, hi) in enumerate(zip(lp.row_lo, lp.row_hi, strict=True)):
            activity = sum(lp.value[k] * x[lp.index[k]] for k in range(starts[r], starts[r + 1]))
            assert lo - 1e-7 <= activity <= hi + 1e-7


def test_random_models_do_drop_columns() -> None:
    """The property above is tested on models that have columns to drop."""
    dropped = 0
    for seed in range(40):
        lp, choices = _random_model(random.Random(seed), plain=False)
        dropped += len(lp.cost) - undominated(lp, choices).size
    assert dropped > 40
