"""Zeus: the clock model (time and power over the power limit) and its per-workload fit.

The GPU constants are fitted by ``scripts/fit_clock_model.py`` (``models/clock_model.json``),
which uses the model, the loader and the per-workload fit of this module; the calibration
reports the error at the file's constants."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from solver.offline.calibration.numeric import Array
from solver.offline.calibration.sources import DATA_DIR

MIN_CLOCK_RATIO = 0.1
"""Lowest clock ratio the driver is allowed to reach in the fit (V100: 135 of 1380 MHz)."""
C_COARSE = np.linspace(0.0, 1.0, 21)
C_FINE_OFFSETS = np.linspace(-0.05, 0.05, 11)


@dataclass(frozen=True)
class ZeusData:
    """The Zeus workloads of one GPU, padded to a (workloads x limits) grid."""

    name: str
    keys: tuple[tuple[str, str, int, str], ...]
    """(dataset, network, batch_size, optimizer) per row."""
    limit: Array
    log_time: Array
    log_power: Array
    mask: Array
    max_limit: float
    """Highest power limit swept: the board's default limit."""

    @property
    def min_power(self) -> float:
        return float(np.exp(self.log_power[self.mask > 0]).min())


@dataclass(frozen=True)
class ZeusFit:
    floor_watts: float
    dynamic_watts: float
    compute_fraction: Array
    """Fitted c per workload row."""
    log_t0: Array
    error: float


def load_zeus(data_dir: Path = DATA_DIR / "zeus") -> list[ZeusData]:
    """Read every ``summary_power_<gpu>.csv`` of ``data_dir``."""
    gpus = []
    for path in sorted(data_dir.glob("summary_power_*.csv")):
        rows: dict[tuple[str, str, int, str], list[tuple[float, float, float]]] = {}
        with path.open(newline="") as f:
            for r in csv.DictReader(f):
                key = (r["dataset"], r["network"], int(r["batch_size"]), r["optimizer"])
                point = (
                    float(r["power_limit"]),
                    float(r["time_per_epoch"]),
                    float(r["average_power"]),
                )
                rows.setdefault(key, []).append(point)
        keys = tuple(sorted(rows))
        width = max(len(v) for v in rows.values())
        shape = (len(keys), width)
        limit, log_t, log_p, mask = (
            np.ones(shape),
            np.zeros(shape),
            np.zeros(shape),
            np.zeros(shape),
        )
        for i, key in enumerate(keys):
            pts = sorted(rows[key])
            n = len(pts)
            arr = np.array(pts)
            limit[i, :n], log_t[i, :n], log_p[i, :n] = (
                arr[:, 0],
                np.log(arr[:, 1]),
                np.log(arr[:, 2]),
            )
            mask[i, :n] = 1.0
        gpus.append(
            ZeusData(
                name=path.stem.removeprefix("summary_power_"),
                keys=keys,
                limit=limit,
                log_time=log_t,
                log_power=log_p,
                mask=mask,
                max_limit=float(limit[mask > 0].max()),
            )
        )
    if not gpus:
        raise FileNotFoundError(f"no summary_power_*.csv in {data_dir}")
    return gpus


def zeus_clock_ratio(limit: Array, floor: float, dyn: float, alpha: float) -> Array:
    """Clock ratio at which the computing phases draw the power limit (capped at 1)."""
    headroom = np.clip((limit - floor) / dyn, 0.0, 1.0)
    return np.maximum(headroom ** (1.0 / alpha), MIN_CLOCK_RATIO)


def zeus_predict(x: Array, c: Array, floor: float, dyn: float, alpha: float) -> tuple[Array, Array]:
    """(time / T0, average power) at clock ratios x for compute fractions c (broadcast)."""
    stretch = c / x
    rel_time = stretch + (1.0 - c)
    power = floor + dyn * x**alpha * (stretch / rel_time)
    return rel_time, power


def _zeus_sse(
    g: ZeusData, x: Array, c: Array, floor: float, dyn: float, alpha: float
) -> tuple[Array, Array]:
    """Squared log error and fitted log T0 per (candidate c, workload); c is (n, W, 1)."""
    rel_time, power = zeus_predict(x[None], c, floor, dyn, alpha)
    log_rest = (g.log_time[None] - np.log(rel_time)) * g.mask
    log_t0 = log_rest.sum(axis=2) / g.mask.sum(axis=1)
    err_t = (log_rest - log_t0[:, :, None]) * g.mask
    err_p = (g.log_power[None] - np.log(power)) * g.mask
    return (err_t**2).sum(axis=2) + (err_p**2).sum(axis=2), log_t0


def fit_zeus_workloads(g: ZeusData, alpha: float, floor: float, dyn: float) -> ZeusFit:
    """Best c (grid step 0.01) and T0 (closed form) per workload for fixed GPU constants.

    The c grid is searched coarse (step 0.05) then fine (step 0.01 around the coarse best).
    """
    x = zeus_clock_ratio(g.limit, floor, dyn, alpha)
    rows = np.arange(len(g.keys))
    sse, _ = _zeus_sse(g, x, C_COARSE[:, None, None], floor, dyn, alpha)
    centre = C_COARSE[sse.argmin(axis=0)]
    c = np.clip(centre[None, :] + C_FINE_OFFSETS[:, None], 0.0, 1.0)
    sse, log_t0 = _zeus_sse(g, x, c[:, :, None], floor, dyn, alpha)
    best = sse.argmin(axis=0)
    return ZeusFit(
        floor_watts=floor,
        dynamic_watts=dyn,
        compute_fraction=np.round(c[best, rows], 2),
        log_t0=log_t0[best, rows],
        error=float(sse[best, rows].sum()),
    )


def zeus_point_errors(g: ZeusData, gf: ZeusFit, alpha: float) -> tuple[Array, Array]:
    """Relative errors (model / measured - 1) of time and power at every measured point."""
    x = zeus_clock_ratio(g.limit, gf.floor_watts, gf.dynamic_watts, alpha)
    c = gf.compute_fraction[:, None]
    rel_time, power = zeus_predict(x, c, gf.floor_watts, gf.dynamic_watts, alpha)
    time = np.exp(gf.log_t0[:, None]) * rel_time
    m = g.mask > 0
    return (time / np.exp(g.log_time) - 1)[m], (power / np.exp(g.log_power) - 1)[m]


@dataclass(frozen=True)
class ZeusResult:
    alpha: float
    gpus: tuple[str, ...]
    limit_share: tuple[Array, ...]
    """Power limit / the GPU's highest limit, per measured point."""
    time_error: tuple[Array, ...]
    power_error: tuple[Array, ...]
    energy_error: tuple[Array, ...]


def analyse_zeus(data: Sequence[ZeusData], clock_doc: Mapping[str, Any]) -> ZeusResult:
    """The clock model at the constants of models/clock_model.json (per-workload c and T0
    refitted as the fit script does): errors of time, power and energy per epoch."""
    alpha = float(clock_doc["alpha"])
    shares, times, powers, energies = [], [], [], []
    for g in data:
        consts = clock_doc["gpus"][g.name]
        gf = fit_zeus_workloads(
            g, alpha, float(consts["floor_watts"]), float(consts["dynamic_watts"])
        )
        et, ep = zeus_point_errors(g, gf, alpha)
        shares.append(g.limit[g.mask > 0] / g.max_limit)
        times.append(et)
        powers.append(ep)
        energies.append((1 + et) * (1 + ep) - 1)
    return ZeusResult(
        alpha,
        tuple(g.name for g in data),
        tuple(shares),
        tuple(times),
        tuple(powers),
        tuple(energies),
    )
