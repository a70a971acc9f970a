"""Numerical helpers shared by the fits: error statistics and a one-dimensional minimiser."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def stats(errors: Iterable[float]) -> dict[str, float]:
    """Median and worst of |relative error| (rounded), and how many points."""
    a = np.abs(np.asarray(list(errors), dtype=np.float64))
    if a.size == 0:
        return {"median": math.nan, "worst": math.nan, "points": 0}
    return {
        "median": round(float(np.median(a)), 4),
        "worst": round(float(a.max()), 4),
        "points": int(a.size),
    }


def rel(model: float, measured: float) -> float:
    """The relative error model / measured - 1."""
    return model / measured - 1


def golden_section(f: Callable[[float], float], lo: float, hi: float, tol: float) -> float:
    """Minimum of a unimodal f on [lo, hi]."""
    inv = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - inv * (b - a), a + inv * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - inv * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + inv * (b - a)
            fd = f(d)
    return (a + b) / 2
