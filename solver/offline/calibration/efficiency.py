"""Compute efficiency per GPU type: 1-GPU runs of the networks whose training FLOPs are known
(Gavel and Pollux) against the peak of the arithmetic they used."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from solver.domain import GpuType
from solver.offline.calibration.sources import (
    FAMILIES,
    GAVEL_TYPES,
    POLLUX_GPU,
    PRECISION,
    TRAIN_FLOPS_PER_SAMPLE,
    peak_tflops,
)


@dataclass(frozen=True)
class EfficiencyPoint:
    """One measured 1-GPU run of a network whose training FLOPs are known."""

    source: str
    gpu_type: str
    network: str
    batch: int
    precision: str
    samples_per_second: float
    peak_tflops: float

    @property
    def efficiency(self) -> float:
        """Achieved training FLOP/s over the peak of the arithmetic the run used."""
        flops = TRAIN_FLOPS_PER_SAMPLE[self.network] * self.samples_per_second
        return flops / (self.peak_tflops * 1e12)


@dataclass(frozen=True)
class EfficiencyFit:
    """The fitted efficiency of one GPU type in one precision."""

    gpu_type: str
    precision: str
    peak_tflops: float
    value: float
    fit_points: tuple[EfficiencyPoint, ...]
    """The largest measured batch of each network (the saturated regime)."""
    all_points: tuple[EfficiencyPoint, ...]
    used: bool
    reason: str

    @property
    def family(self) -> str:
        return FAMILIES[self.gpu_type]

    def errors(self, points: Iterable[EfficiencyPoint]) -> list[float]:
        """model / measured - 1 of the samples/s of each point."""
        return [self.value / p.efficiency - 1 for p in points]


def efficiency_points(
    gavel: Sequence[Mapping[str, str]],
    pollux: Mapping[str, Sequence[Mapping[str, str]]],
    catalog: Mapping[str, GpuType],
) -> list[EfficiencyPoint]:
    """1-GPU runs of the networks with known FLOPs: Gavel (packed rows) and Pollux ("1")."""
    out = []
    for r in gavel:
        key = ("gavel", r["model"])
        if r["num_gpus"] != "1" or r["consolidated"] != "1" or key not in PRECISION:
            continue
        sps = float(r["steps_per_sec"]) * int(r["batch_size"])
        if sps <= 0:
            continue
        gpu = catalog[GAVEL_TYPES[r["gpu_type"]]]
        precision = PRECISION[key]
        out.append(
            EfficiencyPoint(
                "gavel",
                gpu.name,
                r["model"],
                int(r["batch_size"]),
                precision,
                sps,
                peak_tflops(gpu, precision),
            )
        )
    t4 = catalog[POLLUX_GPU]
    for app, rows in sorted(pollux.items()):
        if ("pollux", app) not in PRECISION:
            continue
        precision = PRECISION[("pollux", app)]
        for r in rows:
            if r["placement"] == "1":
                lbs = int(r["local_bsz"])
                out.append(
                    EfficiencyPoint(
                        "pollux",
                        t4.name,
                        app,
                        lbs,
                        precision,
                        lbs / float(r["step_time"]),
                        peak_tflops(t4, precision),
                    )
                )
    return out


def _largest_batch(points: Iterable[EfficiencyPoint]) -> tuple[EfficiencyPoint, ...]:
    best: dict[str, EfficiencyPoint] = {}
    for p in points:
        if p.network not in best or p.batch > best[p.network].batch:
            best[p.network] = p
    return tuple(best[k] for k in sorted(best))


def fit_efficiency(
    points: Sequence[EfficiencyPoint], catalog: Mapping[str, GpuType]
) -> list[EfficiencyFit]:
    """Per GPU type and precision: the geometric mean over networks of the efficiency at each
    network's largest measured batch (least squares in log space; one point per network).

    Used by the service where the precision's peak is the catalog's ``peak_tflops`` (the
    16-bit peak the service's model divides by): mixed-precision runs, and FP32 runs on a
    type whose catalog peak is its FP32 peak (K80).
    """
    groups: dict[tuple[str, str], list[EfficiencyPoint]] = defaultdict(list)
    for p in points:
        groups[(p.gpu_type, p.precision)].append(p)
    fits = []
    for (gpu_type, precision), pts in sorted(groups.items()):
        gpu = catalog[gpu_type]
        chosen = _largest_batch(pts)
        value = math.exp(sum(math.log(p.efficiency) for p in chosen) / len(chosen))
        peak = peak_tflops(gpu, precision)
        used = peak == gpu.peak_tflops
        if used and precision == "mixed":
            reason = "mixed-precision runs: the 16-bit peak the service's model uses"
        elif used:
            reason = f"FP32 runs; {gpu_type}'s catalog peak is its FP32 peak"
        else:
            reason = (
                f"FP32 runs cannot measure the {gpu.peak_tflops:g} TFLOP/s 16-bit peak the "
                f"service's model divides by (FP32 peak {peak:g} TFLOP/s)"
            )
        fits.append(
            EfficiencyFit(
                gpu_type, precision, peak, round(value, 4), chosen, tuple(pts), used, reason
            )
        )
    return fits
