"""GPU power over SM clock, with the constants fitted to the Zeus power-limit sweeps.

    P(f, a) = idle + dynamic_fraction * (tdp - idle) * a * (f / f_max) ** alpha

``a`` (activity) is the share of the step the GPU spends computing at clock ``f``; the rest of
the step (waiting on communication, the pipeline bubble, input) draws ``idle``. Only computing
slows down at a lower clock: time(f) = t_compute * f_max / f + t_other. ``scripts/
fit_clock_model.py`` fits alpha, the dynamic fraction and the compute fractions;
docs/performance-model.md describes the fit and its error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from solver.domain import GpuType
from solver.perfmodel.catalog import CatalogError, models_dir, read_json

CLOCK_MODEL_FILE = "clock_model.json"


@dataclass(frozen=True)
class ClockModel:
    """Fitted constants of the clock model (``models/clock_model.json``)."""

    alpha: float
    """Exponent of computing power in the clock ratio f / f_max."""
    dynamic_fraction: float
    """Share of (tdp - idle) that computing at f_max draws (median over the Zeus GPUs)."""
    compute_fraction: float
    """Median fitted share of a step spent computing at f_max over the Zeus workloads."""


def clock_ratio(gpu: GpuType, sm_clock_mhz: float) -> float:
    """f / f_max; raises ValueError for a clock outside (0, f_max]."""
    if not 0 < sm_clock_mhz <= gpu.max_clock_mhz:
        raise ValueError(
            f"SM clock {sm_clock_mhz} MHz is outside (0, {gpu.max_clock_mhz}] MHz of {gpu.name}"
        )
    return sm_clock_mhz / gpu.max_clock_mhz


def gpu_watts(
    gpu: GpuType, sm_clock_mhz: int, activity: float, model: ClockModel | None = None
) -> float:
    """Average watts of one GPU at ``sm_clock_mhz`` computing a share ``activity`` of the time."""
    if not 0.0 <= activity <= 1.0:
        raise ValueError(f"activity must be in [0, 1], got {activity}")
    m = model or load_clock_model()
    return watts_at_ratio(gpu, clock_ratio(gpu, sm_clock_mhz), activity, m)


def watts_at_ratio(gpu: GpuType, ratio: float, activity: float, model: ClockModel) -> float:
    """``gpu_watts`` at a clock ratio f / f_max already known (and checked): the formula alone,
    for callers that evaluate many clocks."""
    dynamic = model.dynamic_fraction * (gpu.tdp_watts - gpu.idle_watts)
    return gpu.idle_watts + dynamic * activity * math.pow(ratio, model.alpha)


def load_clock_model() -> ClockModel:
    """The fitted constants of ``models/clock_model.json`` (read once per models folder)."""
    return _load(models_dir())


@lru_cache(maxsize=4)
def _load(folder: Path) -> ClockModel:
    doc = read_json(CLOCK_MODEL_FILE)
    where = folder / CLOCK_MODEL_FILE
    try:
        alpha = float(doc["alpha"])
        dynamic = float(doc["dynamic_fraction"])
        compute = float(doc["compute_fraction"]["median"])
    except (KeyError, TypeError, ValueError) as e:
        raise CatalogError(
            f"{where}: needs numbers alpha, dynamic_fraction, compute_fraction.median ({e!r})"
        ) from e
    if not 0 < alpha <= 10:
        raise CatalogError(f"{where}: field 'alpha' must be in (0, 10], got {alpha}")
    if not 0 < dynamic <= 1:
        raise CatalogError(f"{where}: field 'dynamic_fraction' must be in (0, 1], got {dynamic}")
    if not 0 <= compute <= 1:
        raise CatalogError(f"{where}: field 'compute_fraction.median' must be in [0, 1]")
    return ClockModel(alpha=alpha, dynamic_fraction=dynamic, compute_fraction=compute)
