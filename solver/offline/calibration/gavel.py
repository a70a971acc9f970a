"""Gavel: throughput ratios across GPU types and GPU counts, against the model."""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from solver.domain import GpuType
from solver.offline.calibration.efficiency import EfficiencyFit
from solver.offline.calibration.sources import (
    DATA_DIR,
    FP32_PEAK_TFLOPS,
    GAVEL_TYPES,
    GRADIENT_BYTES_PER_PARAMETER,
    PRECISION,
    TRAIN_FLOPS_PER_SAMPLE,
)
from solver.offline.generate import GAVEL_PARAMETERS
from solver.perfmodel import throughput


def gavel_rows(data_dir: Path = DATA_DIR) -> list[dict[str, str]]:
    with (data_dir / "gavel" / "isolated_throughputs.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@dataclass(frozen=True)
class GavelWorkload:
    """One network at one batch size: samples/s per (Gavel GPU, GPUs, packed) of the runs."""

    network: str
    batch: str
    samples_per_second: Mapping[tuple[str, int, bool], float]

    @property
    def label(self) -> str:
        return f"{self.network} {self.batch}" if self.batch else self.network


def gavel_workloads(rows: Sequence[Mapping[str, str]]) -> list[GavelWorkload]:
    """Gavel's runs grouped by network and batch; samples/s = steps/s x batch (per-GPU batch;
    Gavel counts the steps of all workers). Zero entries (runs that failed) are left out."""
    series: dict[tuple[str, str], dict[tuple[str, int, bool], float]] = defaultdict(dict)
    for r in rows:
        steps = float(r["steps_per_sec"])
        if steps <= 0:
            continue
        batch = int(r["batch_size"]) if r["batch_size"] else 1
        key = (r["gpu_type"], int(r["num_gpus"]), r["consolidated"] == "1")
        series[(r["model"], r["batch_size"])][key] = steps * batch
    return [
        GavelWorkload(network, batch, dict(v))
        for (network, batch), v in sorted(
            series.items(), key=lambda kv: (kv[0][0], int(kv[0][1] or 0))
        )
    ]


PAIRS: tuple[tuple[str, str], ...] = (("p100", "k80"), ("v100", "k80"), ("v100", "p100"))


def pair_name(pair: tuple[str, str]) -> str:
    """A pair of Gavel GPU names as the report writes it ("V100/K80")."""
    return f"{pair[0].upper()}/{pair[1].upper()}"


@dataclass(frozen=True)
class RatioPoint:
    pair: tuple[str, str]
    workload: str
    network: str
    num_gpus: int
    measured: float
    model: float


@dataclass(frozen=True)
class GavelResult:
    workloads: tuple[GavelWorkload, ...]
    ratio_before: Mapping[tuple[str, str], float]
    """The uncalibrated service model: catalog (16-bit) peaks x cited/default efficiencies."""
    ratio_fp32: Mapping[tuple[str, str], float]
    """FP32 peaks x the fitted FP32 efficiencies."""
    ratio_bandwidth: Mapping[tuple[str, str], float]
    """Memory bandwidth alone (a diagnostic: the model has no memory-bound term)."""
    ratios_1gpu: tuple[RatioPoint, ...]
    """Measured 1-GPU ratios of every workload measured on both types; model: ratio_fp32."""
    ratios_n: tuple[RatioPoint, ...]
    """Packed runs of 2, 4, 8 GPUs, networks with known FLOPs; model: the FP32 model."""
    scaling: tuple[tuple[str, str, int, float, float], ...]
    """(Gavel GPU, workload, GPUs, measured samples/s, model samples/s) of packed runs."""
    spread_penalty: Mapping[tuple[str, int], float]
    """Median over workloads of spread / packed samples/s, per (Gavel GPU, GPUs)."""


def gavel_model_terms(
    gpu: GpuType, efficiency: float, network: str, batch: int, num_gpus: int, parameters: float
) -> tuple[float, float, float]:
    """(compute, all-reduce, exposed sync) seconds of one step of a Gavel network on
    ``num_gpus`` packed GPUs (FP32 arithmetic, FP32 gradients): ``batch`` samples of compute
    per GPU at ``efficiency`` of the FP32 peak, and the ring all-reduce over the server's PCIe
    less the backward pass (``solver.perfmodel.throughput``'s terms)."""
    compute = TRAIN_FLOPS_PER_SAMPLE[network] * batch / (FP32_PEAK_TFLOPS[gpu.name] * 1e12)
    compute /= efficiency
    bandwidth = throughput.link_bandwidth(
        gpu, across_nodes=False, gpus_per_node=num_gpus, network_bandwidth_gbps=1.0
    )
    grads = GRADIENT_BYTES_PER_PARAMETER * parameters
    allreduce = throughput.allreduce_seconds(grads, num_gpus, bandwidth)
    return compute, allreduce, throughput.exposed_sync_seconds(allreduce, compute)


def gavel_model_sps(
    gpu: GpuType, efficiency: float, network: str, batch: int, num_gpus: int, parameters: float
) -> float:
    """The model's samples/s of a Gavel network on ``num_gpus`` packed GPUs."""
    compute, _, sync = gavel_model_terms(gpu, efficiency, network, batch, num_gpus, parameters)
    return num_gpus * batch / (compute + sync)


def analyse_gavel(
    rows: Sequence[Mapping[str, str]],
    fits: Sequence[EfficiencyFit],
    catalog: Mapping[str, GpuType],
) -> GavelResult:
    fp32 = {f.gpu_type: f.value for f in fits if f.precision == "fp32"}
    gpus = {g: catalog[t] for g, t in GAVEL_TYPES.items()}

    def per(f: Callable[[str], float]) -> dict[tuple[str, str], float]:
        return {(a, b): f(a) / f(b) for a, b in PAIRS}

    before = per(lambda g: gpus[g].peak_tflops * throughput.cited_efficiency(gpus[g]))
    after = per(lambda g: FP32_PEAK_TFLOPS[gpus[g].name] * fp32[gpus[g].name])
    bandwidth = per(lambda g: gpus[g].memory_bandwidth_gbps)
    workloads = gavel_workloads(rows)
    one: list[RatioPoint] = []
    many: list[RatioPoint] = []
    scaling = []
    for w in workloads:
        s = w.samples_per_second
        for a, b in PAIRS:
            if (a, 1, True) in s and (b, 1, True) in s:
                measured = s[(a, 1, True)] / s[(b, 1, True)]
                one.append(RatioPoint((a, b), w.label, w.network, 1, measured, after[(a, b)]))
        if ("gavel", w.network) not in PRECISION:
            continue
        batch = int(w.batch)
        model: dict[tuple[str, int], float] = {}
        for g, gpu in gpus.items():
            for n in (1, 2, 4, 8):
                if (g, n, True) in s:
                    model[(g, n)] = gavel_model_sps(
                        gpu, fp32[gpu.name], w.network, batch, n, GAVEL_PARAMETERS[w.network]
                    )
                    scaling.append((g, w.label, n, s[(g, n, True)], model[(g, n)]))
        for a, b in PAIRS:
            for n in (2, 4, 8):
                if (a, n, True) in s and (b, n, True) in s:
                    measured = s[(a, n, True)] / s[(b, n, True)]
                    predicted = model[(a, n)] / model[(b, n)]
                    many.append(RatioPoint((a, b), w.label, w.network, n, measured, predicted))
    penalties: dict[tuple[str, int], list[float]] = defaultdict(list)
    for w in workloads:
        for (g, n, packed), sps in w.samples_per_second.items():
            if not packed and n > 1 and (g, n, True) in w.samples_per_second:
                penalties[(g, n)].append(sps / w.samples_per_second[(g, n, True)])
    return GavelResult(
        workloads=tuple(workloads),
        ratio_before=before,
        ratio_fp32=after,
        ratio_bandwidth=bandwidth,
        ratios_1gpu=tuple(one),
        ratios_n=tuple(many),
        scaling=tuple(scaling),
        spread_penalty={k: float(np.median(v)) for k, v in sorted(penalties.items())},
    )
