"""Calibration of the analytic performance and power model against public measurements.

``dsfro calibrate`` compares ``solver.perf`` and ``solver.power`` with three measured sources,
fits the model's free constants to them and writes

- ``models/calibration.json``: the fitted constants that ``solver.perf`` reads, with provenance
  (data files, method, error) and the fits that the service does not use, with the reason;
- ``docs/calibration.md``: the report (errors per source, what cannot be fitted and why), with a
  machine-readable block of every number in it;
- ``docs/img/calibration-*.png``: the figures.

Sources (``data/*/SOURCE.md``):

- Gavel: throughput of seven networks on K80, P100 and V100 at 1-8 GPUs. Fits the compute
  efficiency per GPU type and checks the throughput ratios across types and GPU counts.
- Pollux: step and gradient-sync times on 4-GPU T4 nodes for every placement up to 16 GPUs.
  Fits the T4 compute efficiency and the network efficiency of the data-parallel all-reduce.
- Zeus: time and power over the power limit on four GPUs. The clock model's constants are
  fitted by ``scripts/fit_clock_model.py`` (``models/clock_model.json``); this module holds the
  model and the per-workload fit that script uses, and reports the error at the file's
  constants.

Everything is deterministic numpy (grids, golden-section search, closed forms).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from solver import perf
from solver.catalog import load_gpu_catalog, models_dir, read_json
from solver.domain import GpuType
from solver.generate import GAVEL_PARAMETERS, POLLUX_PARAMETERS, packed_placement

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Array = npt.NDArray[np.float64]

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "data"
DOC_PATH = ROOT / "docs" / "calibration.md"
IMG_DIR = ROOT / "docs" / "img"
COMMAND = "dsfro calibrate"
CLOCK_COMMAND = ".venv/bin/python scripts/fit_clock_model.py"

# ---------------------------------------------------------------- how the sources map to the model

FP32_PEAK_TFLOPS: Mapping[str, float] = {
    "K80": 4.365,
    "P100-16GB": 9.3,
    "V100-16GB": 14.0,
    "T4": 8.1,
}
"""Single-precision (FP32 CUDA-core) peaks, NVIDIA datasheets: Tesla K80 board 8.73 TFLOP/s at
GPU Boost for two GK210, halved; Tesla P100 PCIe 9.3; V100 PCIe 14; T4 8.1."""

GAVEL_TYPES: Mapping[str, str] = {"k80": "K80", "p100": "P100-16GB", "v100": "V100-16GB"}
"""Gavel's GPU names -> the catalog types that stand for them (as ``solver.generate``)."""
FAMILIES: Mapping[str, str] = {"K80": "K80", "P100-16GB": "P100", "V100-16GB": "V100", "T4": "T4"}
"""Catalog type -> the family key of ``models/calibration.json`` (a prefix of the names)."""

POLLUX_GPU = "T4"
POLLUX_GPUS_PER_NODE = 4
POLLUX_NETWORK_GBPS = 50.0
"""Pollux's testbed: AWS g4dn.12xlarge, 4 T4 each, 50 Gbit/s, one placement group (Qiao et al.
2021, sec. 5; petuum/adaptdl ``benchmark/main.tf``)."""
GRADIENT_BYTES_PER_PARAMETER = 4
"""Gavel and Pollux train FP32 weights (Pollux's ImageNet uses apex AMP O1, which keeps FP32
weights): the gradient all-reduce moves 4 bytes per parameter (the service's model: 2, bf16)."""
SEQUENCE_BERT = 384
"""Pollux's BERT fine-tunes on SQuAD at max_seq_length 384 (adaptdl ``benchmark/models/bert``)."""
BPTT_LM = 35
"""Gavel's LM trains on 35-token sequences (``--bptt`` default of its word_language_model)."""


def _conv_macs(c_in: int, c_out: int, kernel: int, out_size: int) -> int:
    return kernel * kernel * c_in * c_out * out_size * out_size


def resnet_macs(depths: Sequence[int], bottleneck: bool, image: int, classes: int) -> int:
    """Multiply-accumulates of one forward pass of a ResNet (convolutions and the classifier).

    CIFAR variant (``image=32``, kuangliu/pytorch-cifar): a 3x3 stem at full resolution. ImageNet
    variant (torchvision): a 7x7 stride-2 stem and a max-pool. Stride 2 on the 3x3 convolution
    of each stage's first block (ResNet v1.5); a 1x1 projection where the shape changes.
    """
    widths = (64, 128, 256, 512)
    expansion = 4 if bottleneck else 1
    if image <= 64:
        size = image
        macs = _conv_macs(3, 64, 3, size)
    else:
        macs = _conv_macs(3, 64, 7, image // 2)
        size = image // 4
    c_in = 64
    for stage, (width, depth) in enumerate(zip(widths, depths, strict=True)):
        for block in range(depth):
            stride = 2 if block == 0 and stage > 0 else 1
            out = size // stride
            c_out = width * expansion
            if bottleneck:
                macs += _conv_macs(c_in, width, 1, size)
                macs += _conv_macs(width, width, 3, out) + _conv_macs(width, c_out, 1, out)
            else:
                macs += _conv_macs(c_in, width, 3, out) + _conv_macs(width, width, 3, out)
            if stride != 1 or c_in != c_out:
                macs += _conv_macs(c_in, c_out, 1, out)
            c_in, size = c_out, out
    return macs + c_in * classes


def lstm_lm_macs_per_token(hidden: int, layers: int, vocabulary: int) -> int:
    """An LSTM language model: 4 gates of (input + hidden) x hidden per layer, then the decoder."""
    return layers * 4 * hidden * (hidden + hidden) + hidden * vocabulary


RESNET18_CIFAR_MACS = resnet_macs((2, 2, 2, 2), bottleneck=False, image=32, classes=10)
RESNET50_MACS = resnet_macs((3, 4, 6, 3), bottleneck=True, image=224, classes=1000)
LM_MACS_PER_TOKEN = lstm_lm_macs_per_token(200, 2, 33_278)

TRAIN_FLOPS_PER_SAMPLE: Mapping[str, float] = {
    "ResNet-18": 6.0 * RESNET18_CIFAR_MACS,
    "ResNet-50": 6.0 * RESNET50_MACS,
    "LM": 6.0 * LM_MACS_PER_TOKEN * BPTT_LM,
    "cifar10": 6.0 * RESNET18_CIFAR_MACS,
    "imagenet": 6.0 * RESNET50_MACS,
    "bert": 6.0 * POLLUX_PARAMETERS["bert"] * SEQUENCE_BERT,
}
"""Training FLOPs per sample: forward and backward = 3 forward passes of 2 FLOPs per MAC (the
rule behind the service's 6 x parameters x tokens). BERT uses the service's transformer rule
itself (6 x 110M x 384 tokens, attention left out as in ``solver.perf``). No established count
for Gavel's Transformer (Multi30k sentence lengths), Recommendation, A3C and CycleGAN, Pollux's
YOLOv3 (multi-scale input) or NCF (embedding lookups): they are not used for efficiency."""

PRECISION: Mapping[tuple[str, str], str] = {
    ("gavel", "ResNet-18"): "fp32",
    ("gavel", "ResNet-50"): "fp32",
    ("gavel", "LM"): "fp32",
    ("pollux", "cifar10"): "fp32",
    ("pollux", "bert"): "fp32",
    ("pollux", "imagenet"): "mixed",
}
"""The arithmetic each run used (the training scripts in stanford-futuredata/gavel and
petuum/adaptdl): FP32 everywhere except Pollux's ImageNet (apex AMP O1, tensor cores)."""


def peak_tflops(gpu: GpuType, precision: str) -> float:
    """The peak of the arithmetic a run used: the catalog's 16-bit peak, or the FP32 one."""
    return gpu.peak_tflops if precision == "mixed" else FP32_PEAK_TFLOPS[gpu.name]


def _stats(errors: Iterable[float]) -> dict[str, float]:
    """Median and worst of |relative error| (rounded), and how many points."""
    a = np.abs(np.asarray(list(errors), dtype=np.float64))
    if a.size == 0:
        return {"median": math.nan, "worst": math.nan, "points": 0}
    return {
        "median": round(float(np.median(a)), 4),
        "worst": round(float(a.max()), 4),
        "points": int(a.size),
    }


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


# ---------------------------------------------------------------- compute efficiency


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


def gavel_rows(data_dir: Path = DATA_DIR) -> list[dict[str, str]]:
    with (data_dir / "gavel" / "isolated_throughputs.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def pollux_rows(data_dir: Path = DATA_DIR) -> dict[str, list[dict[str, str]]]:
    """Every application's placements.csv, by application (the apps of ``solver.generate``)."""
    out = {}
    for app in sorted(POLLUX_PARAMETERS):
        with (data_dir / "pollux" / app / "placements.csv").open(newline="") as f:
            out[app] = list(csv.DictReader(f))
    return out


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


# ---------------------------------------------------------------- Gavel: ratios and GPU counts


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
    less the backward pass (``solver.perf``'s terms)."""
    compute = TRAIN_FLOPS_PER_SAMPLE[network] * batch / (FP32_PEAK_TFLOPS[gpu.name] * 1e12)
    compute /= efficiency
    bandwidth = perf.link_bandwidth(
        gpu, across_nodes=False, gpus_per_node=num_gpus, network_bandwidth_gbps=1.0
    )
    grads = GRADIENT_BYTES_PER_PARAMETER * parameters
    allreduce = perf.allreduce_seconds(grads, num_gpus, bandwidth)
    return compute, allreduce, perf.exposed_sync_seconds(allreduce, compute)


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

    before = per(lambda g: gpus[g].peak_tflops * perf.cited_efficiency(gpus[g]))
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


# ---------------------------------------------------------------- Pollux: the network


@dataclass(frozen=True)
class PolluxData:
    """Every multi-GPU Pollux measurement with its 1-GPU counterpart (same local batch)."""

    app: tuple[str, ...]
    placement: tuple[str, ...]
    local_batch: npt.NDArray[np.int64]
    num_gpus: npt.NDArray[np.int64]
    nodes: npt.NDArray[np.int64]
    step: Array
    sync: Array
    step_1: Array
    sync_1: Array
    gradient_bytes: Array

    @property
    def across(self) -> npt.NDArray[np.bool_]:
        return self.nodes > 1

    @cached_property
    def placement_class(self) -> tuple[str, ...]:
        """ "one node", "packed" (nodes filled in turn, as the service places) or "spread"."""
        out = []
        for pl, n, k in zip(self.placement, self.num_gpus, self.nodes, strict=True):
            if k == 1:
                out.append("one node")
            elif pl == packed_placement(int(n), POLLUX_GPUS_PER_NODE):
                out.append("packed")
            else:
                out.append("spread")
        return tuple(out)

    @cached_property
    def weights(self) -> Array:
        """Each application weighs the same in the fit, whatever its number of rows."""
        counts: dict[str, int] = defaultdict(int)
        for a in self.app:
            counts[a] += 1
        return np.array([1.0 / counts[a] for a in self.app])


def load_pollux(rows: Mapping[str, Sequence[Mapping[str, str]]]) -> PolluxData:
    cols: dict[str, list[Any]] = defaultdict(list)
    for app, rs in sorted(rows.items()):
        by_key = {(r["placement"], int(r["local_bsz"])): r for r in rs}
        for (pl, lbs), r in sorted(by_key.items()):
            one = by_key.get(("1", lbs))
            if pl == "1" or one is None:
                continue
            sizes = [int(c) for c in pl]
            cols["app"].append(app)
            cols["placement"].append(pl)
            cols["local_batch"].append(lbs)
            cols["num_gpus"].append(sum(sizes))
            cols["nodes"].append(len(sizes))
            cols["step"].append(float(r["step_time"]))
            cols["sync"].append(float(r["sync_time"]))
            cols["step_1"].append(float(one["step_time"]))
            cols["sync_1"].append(float(one["sync_time"]))
            cols["gradient_bytes"].append(GRADIENT_BYTES_PER_PARAMETER * POLLUX_PARAMETERS[app])
    return PolluxData(
        app=tuple(cols["app"]),
        placement=tuple(cols["placement"]),
        local_batch=np.array(cols["local_batch"], dtype=np.int64),
        num_gpus=np.array(cols["num_gpus"], dtype=np.int64),
        nodes=np.array(cols["nodes"], dtype=np.int64),
        step=np.array(cols["step"]),
        sync=np.array(cols["sync"]),
        step_1=np.array(cols["step_1"]),
        sync_1=np.array(cols["sync_1"]),
        gradient_bytes=np.array(cols["gradient_bytes"]),
    )


def pollux_predict(
    d: PolluxData,
    gpu: GpuType,
    network_efficiency: float,
    *,
    intra_efficiency: float = 1.0,
    overlap: float = perf.BACKWARD_SHARE,
) -> tuple[Array, Array]:
    """(sync, step) seconds the model predicts for every row of ``d``.

    ``solver.perf``'s data-parallel term, vectorised: a ring all-reduce of the FP32 gradients
    over NVLink/PCIe inside one node, else over the node's network link shared by its 4 GPUs at
    ``network_efficiency``; the backward pass (``overlap`` of the compute, the model's 2/3)
    hides part of it. Compute is the measured 1-GPU step at the same local batch less its sync
    time; the 1-GPU sync time (bookkeeping, no communication) is added back.
    ``intra_efficiency`` scales the in-node bandwidth (1 in the model; a diagnostic only).
    """
    inside = intra_efficiency * gpu.intra_node_bandwidth_gbps / 2 * 1e9
    share = POLLUX_NETWORK_GBPS / 8 * 1e9 / POLLUX_GPUS_PER_NODE
    bandwidth = np.where(d.across, network_efficiency * share, inside)
    n = d.num_gpus.astype(np.float64)
    allreduce = 2 * (n - 1) / n * d.gradient_bytes / bandwidth
    exposed = np.maximum(0.0, allreduce - overlap * (d.step_1 - d.sync_1))
    return d.sync_1 + exposed, d.step_1 + exposed


NETWORK_EFFICIENCY_RANGE = (0.01, 1.0)


def _minimise_log_grid(objective: Callable[[float], float]) -> float:
    """A log-spaced grid of 200 values in NETWORK_EFFICIENCY_RANGE, then golden section
    between the best grid point's neighbours; rounded to 3 decimals."""
    low, high = NETWORK_EFFICIENCY_RANGE
    grid = np.exp(np.linspace(math.log(low), math.log(high), 200))
    values = [objective(float(x)) for x in grid]
    i = int(np.argmin(values))
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    return round(golden_section(objective, lo, hi, 1e-5), 3)


def sync_objective(d: PolluxData, rows: npt.NDArray[np.bool_], sync: Array) -> float:
    """Weighted sum of squares of (modelled - measured sync) / measured step over ``rows``;
    each application weighs the same."""
    w = d.weights[rows]
    r = (sync[rows] - d.sync[rows]) / d.step[rows]
    return float(np.sum(w * r * r))


def fit_network_efficiency(
    d: PolluxData,
    gpu: GpuType,
    rows: npt.NDArray[np.bool_] | None = None,
    overlap: float = perf.BACKWARD_SHARE,
) -> tuple[float, float]:
    """(efficiency, objective): least squares of the sync time of every cross-node row (or of
    ``rows``), each residual in units of that row's step time, each application weighing the
    same (``sync_objective``), minimised by ``_minimise_log_grid``."""
    mask = d.across if rows is None else rows

    def objective(eta: float) -> float:
        return sync_objective(d, mask, pollux_predict(d, gpu, eta, overlap=overlap)[0])

    eta = _minimise_log_grid(objective)
    return eta, objective(eta)


def fit_intra_efficiency(d: PolluxData, gpu: GpuType) -> float:
    """A diagnostic, not a model constant: the in-node efficiency that would reproduce the
    one-node sync times with the model's overlap."""
    mask = ~d.across

    def objective(eta: float) -> float:
        return sync_objective(d, mask, pollux_predict(d, gpu, 1.0, intra_efficiency=eta)[0])

    return _minimise_log_grid(objective)


@dataclass(frozen=True)
class PolluxResult:
    data: PolluxData
    network_efficiency: float
    objective: float
    objective_before: float
    sync_before: Array
    step_before: Array
    sync_after: Array
    step_after: Array


def analyse_pollux(d: PolluxData, gpu: GpuType) -> PolluxResult:
    eta, objective = fit_network_efficiency(d, gpu)
    sync_b, step_b = pollux_predict(d, gpu, 1.0)
    sync_a, step_a = pollux_predict(d, gpu, eta)
    before = sync_objective(d, d.across, sync_b)
    return PolluxResult(d, eta, objective, before, sync_b, step_b, sync_a, step_a)


# ---------------------------------------------------------------- Zeus: the clock model

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


# ---------------------------------------------------------------- everything together


@dataclass(frozen=True)
class Result:
    efficiency: tuple[EfficiencyFit, ...]
    gavel: GavelResult
    pollux: PolluxResult
    zeus: ZeusResult
    clock_doc: Mapping[str, Any]


def run(data_dir: Path = DATA_DIR) -> Result:
    """Every comparison and fit, on the bundled data and the catalog of ``models/``."""
    catalog = load_gpu_catalog()
    gavel, pollux = gavel_rows(data_dir), pollux_rows(data_dir)
    fits = fit_efficiency(efficiency_points(gavel, pollux, catalog), catalog)
    clock_doc = read_json("clock_model.json")
    return Result(
        efficiency=tuple(fits),
        gavel=analyse_gavel(gavel, fits, catalog),
        pollux=analyse_pollux(load_pollux(pollux), catalog[POLLUX_GPU]),
        zeus=analyse_zeus(load_zeus(data_dir / "zeus"), clock_doc),
        clock_doc=clock_doc,
    )


def _largest_batches(g: GavelResult) -> set[str]:
    """Labels of each network's largest batch (networks without a batch: their only run)."""
    best: dict[str, GavelWorkload] = {}
    for w in g.workloads:
        if w.network not in best or int(w.batch or 0) > int(best[w.network].batch or 0):
            best[w.network] = w
    return {w.label for w in best.values()}


def _pair_name(pair: tuple[str, str]) -> str:
    return f"{pair[0].upper()}/{pair[1].upper()}"


def _rel(model: float, measured: float) -> float:
    return model / measured - 1


def summary(r: Result) -> dict[str, Any]:
    """Every number of the report (rounded), as JSON: embedded in docs/calibration.md."""
    catalog = load_gpu_catalog()
    before = {f.gpu_type: perf.cited_efficiency(catalog[f.gpu_type]) for f in r.efficiency}
    eff = []
    for f in r.efficiency:
        eff.append(
            {
                "family": f.family,
                "gpu_type": f.gpu_type,
                "precision": f.precision,
                "peak_tflops": f.peak_tflops,
                "value": f.value,
                "used": f.used,
                "reason": f.reason,
                "networks": {
                    p.network: {"batch": p.batch, "efficiency": round(p.efficiency, 4)}
                    for p in f.fit_points
                },
                "error_fit": _stats(f.errors(f.fit_points)),
                "error_all_batches": _stats(f.errors(f.all_points)),
                "cited": before[f.gpu_type],
                "before": round(
                    before[f.gpu_type] * catalog[f.gpu_type].peak_tflops / f.peak_tflops, 4
                ),
                "error_before_all_batches": _stats(
                    _rel(
                        before[f.gpu_type] * catalog[f.gpu_type].peak_tflops,
                        p.efficiency * p.peak_tflops,
                    )
                    for p in f.all_points
                ),
            }
        )
    g = r.gavel
    ratios: dict[str, Any] = {}
    for pair in PAIRS:
        one = [p for p in g.ratios_1gpu if p.pair == pair]
        ratios[_pair_name(pair)] = {
            "measured_median": round(float(np.median([p.measured for p in one])), 3),
            "measured_range": [
                round(min(p.measured for p in one), 3),
                round(max(p.measured for p in one), 3),
            ],
            "model_before": round(g.ratio_before[pair], 3),
            "model_fp32": round(g.ratio_fp32[pair], 3),
            "bandwidth": round(g.ratio_bandwidth[pair], 3),
            "error_before": _stats(_rel(g.ratio_before[pair], p.measured) for p in one),
            "error_fp32": _stats(_rel(p.model, p.measured) for p in one),
            "error_bandwidth": _stats(_rel(g.ratio_bandwidth[pair], p.measured) for p in one),
        }
    by_network: dict[str, Any] = {}
    for net in sorted({p.network for p in g.ratios_1gpu}):
        pts = [p for p in g.ratios_1gpu if p.network == net]
        by_network[net] = _stats(_rel(p.model, p.measured) for p in pts)
    largest = _largest_batches(g)
    for pair in PAIRS:
        pts = [p for p in g.ratios_1gpu if p.pair == pair and p.workload in largest]
        ratios[_pair_name(pair)]["error_fp32_largest_batch"] = _stats(
            _rel(p.model, p.measured) for p in pts
        )
    counts = {
        str(n): _stats(_rel(p.model, p.measured) for p in g.ratios_n if p.num_gpus == n)
        for n in (2, 4, 8)
    }
    scaling: dict[str, Any] = {}
    gavel_comm = _gavel_communication(r, catalog)
    for gpu in GAVEL_TYPES:
        base = {lab: (m, mod) for gg, lab, n, m, mod in g.scaling if gg == gpu and n == 1}
        scaling[gpu] = {}
        for n in (2, 4, 8):
            measured, model = [], []
            for gg, lab, nn, m, mod in g.scaling:
                if gg == gpu and nn == n and lab in base:
                    measured.append(m / n / base[lab][0])
                    model.append(mod / n / base[lab][1])
            scaling[gpu][str(n)] = {
                "measured_median": round(float(np.median(measured)), 3),
                "model_median": round(float(np.median(model)), 3),
                "error": _stats(b / a - 1 for a, b in zip(measured, model, strict=True)),
            }
    p = r.pollux
    d = p.data
    classes = np.array(d.placement_class)
    apps = np.array(d.app)
    pol_classes: dict[str, Any] = {}
    for cls in ("one node", "packed", "spread"):
        m = classes == cls
        pol_classes[cls] = {
            "step_before": _stats(p.step_before[m] / d.step[m] - 1),
            "step_after": _stats(p.step_after[m] / d.step[m] - 1),
            "sync_after": _stats(p.sync_after[m] / d.sync[m] - 1),
            "sync_share_of_step_after": _stats((p.sync_after[m] - d.sync[m]) / d.step[m]),
            "sync_measured_median_s": round(float(np.median(d.sync[m])), 4),
        }
    pol_apps: dict[str, Any] = {}
    for app in sorted(set(d.app)):
        m = (apps == app) & d.across
        pol_apps[app] = {
            "step_after": _stats(p.step_after[m] / d.step[m] - 1),
            "sync_share_of_step_after": _stats((p.sync_after[m] - d.sync[m]) / d.step[m]),
        }
    across = d.across
    t4 = catalog[POLLUX_GPU]
    eta_by_nodes = {
        str(k): fit_network_efficiency(d, t4, d.nodes == k)[0]
        for k in sorted(set(d.nodes.tolist()))
        if k > 1
    }
    overlap = {
        f"{o:.3f}": dict(
            zip(
                ("network_efficiency", "objective"),
                _round_pair(fit_network_efficiency(d, t4, overlap=o)),
                strict=True,
            )
        )
        for o in OVERLAP_SENSITIVITY
    }
    bert2 = [
        float(d.sync[i]) for i in range(len(d.app)) if d.app[i] == "bert" and d.placement[i] == "2"
    ]
    bert_compute = [
        float(d.step_1[i] - d.sync_1[i]) for i in range(len(d.app)) if d.app[i] == "bert"
    ]
    z = r.zeus
    zeus_gpus = {
        name: {
            "points": int(z.time_error[i].size),
            "time": _stats(z.time_error[i]),
            "power": _stats(z.power_error[i]),
            "energy": _stats(z.energy_error[i]),
        }
        for i, name in enumerate(z.gpus)
    }
    zeus_all = {
        key: _stats(np.concatenate(arrs))
        for key, arrs in (
            ("time", z.time_error),
            ("power", z.power_error),
            ("energy", z.energy_error),
        )
    }
    used_eff = {f.family: f.value for f in r.efficiency if f.used}
    return {
        "mapping": _mapping(),
        "peak_tflops": _peaks(),
        "constants": {
            "compute_efficiency": used_eff,
            "network_efficiency": {FAMILIES[POLLUX_GPU]: p.network_efficiency},
            "alpha": float(r.clock_doc["alpha"]),
            "dynamic_fraction": float(r.clock_doc["dynamic_fraction"]),
        },
        "efficiency": eff,
        "gavel": {
            "ratios_1gpu": ratios,
            "ratio_error_by_network": by_network,
            "ratio_error_by_gpus": counts,
            "per_gpu_scaling": scaling,
            "model_communication": gavel_comm,
            "v100_over_k80_range_by_network": {
                net: [
                    round(
                        min(
                            q.measured
                            for q in g.ratios_1gpu
                            if q.pair == ("v100", "k80") and q.network == net
                        ),
                        2,
                    ),
                    round(
                        max(
                            q.measured
                            for q in g.ratios_1gpu
                            if q.pair == ("v100", "k80") and q.network == net
                        ),
                        2,
                    ),
                ]
                for net in sorted({q.network for q in g.ratios_1gpu})
            },
            "v100_over_k80_resnet18_by_batch": {
                q.workload.split()[-1]: round(q.measured, 2)
                for q in g.ratios_1gpu
                if q.pair == ("v100", "k80") and q.network == "ResNet-18"
            },
            "spread_over_packed": {
                f"{gpu}x{n}": round(v, 3) for (gpu, n), v in g.spread_penalty.items()
            },
        },
        "pollux": {
            "network_efficiency": p.network_efficiency,
            "objective_before": round(p.objective_before, 4),
            "objective_after": round(p.objective, 4),
            "rows_across_nodes": int(across.sum()),
            "rows_one_node": int((~across).sum()),
            "by_class": pol_classes,
            "by_app_across_nodes": pol_apps,
            "network_efficiency_by_nodes": eta_by_nodes,
            "overlap_sensitivity": overlap,
            "intra_node_efficiency_diagnostic": fit_intra_efficiency(d, t4),
            "bert_two_gpus_one_node_sync_ms": [
                round(min(bert2) * 1000, 1),
                round(max(bert2) * 1000, 1),
            ],
            "bert_two_gpus_model_allreduce_ms": round(
                float(
                    perf.allreduce_seconds(
                        GRADIENT_BYTES_PER_PARAMETER * POLLUX_PARAMETERS["bert"],
                        2,
                        t4.intra_node_bandwidth_gbps / 2 * 1e9,
                    )
                )
                * 1000,
                1,
            ),
            "bert_backward_s": [
                round(perf.BACKWARD_SHARE * min(bert_compute), 2),
                round(perf.BACKWARD_SHARE * max(bert_compute), 2),
            ],
            "bert_two_gpus_one_node_gbytes_per_s": round(
                GRADIENT_BYTES_PER_PARAMETER
                * POLLUX_PARAMETERS["bert"]
                / float(np.median(bert2))
                / 1e9,
                2,
            ),
            "network_efficiency_by_placement": {
                pl: fit_network_efficiency(d, t4, np.array([x == pl for x in d.placement]))[0]
                for pl in ("11", "22", "44", "1111", "2222", "4444")
            },
        },
        "headline": _headline(r, catalog, before),
        "service_examples": service_examples(r),
        "zeus": {"alpha": z.alpha, "gpus": zeus_gpus, "all": zeus_all},
    }


def _gavel_communication(r: Result, catalog: Mapping[str, GpuType]) -> dict[str, float]:
    """How much communication the model sees in Gavel's packed runs: the longest all-reduce
    (8 GPUs, the largest gradient) and the largest exposed share of a step."""
    fp32 = {f.gpu_type: f.value for f in r.efficiency if f.precision == "fp32"}
    longest, exposed_share = 0.0, 0.0
    for w in r.gavel.workloads:
        if ("gavel", w.network) not in PRECISION:
            continue
        for g, n, packed in w.samples_per_second:
            if packed and n > 1:
                gpu = catalog[GAVEL_TYPES[g]]
                compute, allreduce, sync = gavel_model_terms(
                    gpu, fp32[gpu.name], w.network, int(w.batch), n, GAVEL_PARAMETERS[w.network]
                )
                longest = max(longest, allreduce)
                exposed_share = max(exposed_share, sync / (compute + sync))
    return {
        "longest_allreduce_ms": round(longest * 1000, 1),
        "largest_exposed_share": round(exposed_share, 4),
    }


OVERLAP_SENSITIVITY = (0.0, 0.5, perf.BACKWARD_SHARE, 0.8, 1.0)
"""Overlap shares at which the network efficiency is refitted, to show the fit's sensitivity."""


def _round_pair(pair: tuple[float, float]) -> tuple[float, float]:
    return round(pair[0], 3), round(pair[1], 4)


def _peaks() -> dict[str, dict[str, float]]:
    catalog = load_gpu_catalog()
    return {
        t: {"catalog_16bit": catalog[t].peak_tflops, "fp32": v} for t, v in FP32_PEAK_TFLOPS.items()
    }


def _mapping() -> dict[str, Any]:
    """How each measured network maps onto the model: gradient size, FLOPs, precision."""
    out: dict[str, Any] = {}
    for source, params in (("gavel", GAVEL_PARAMETERS), ("pollux", POLLUX_PARAMETERS)):
        for net, count in sorted(params.items()):
            flops = TRAIN_FLOPS_PER_SAMPLE.get(net)
            out[f"{source}/{net}"] = {
                "parameters": count,
                "gradient_mb": round(GRADIENT_BYTES_PER_PARAMETER * count / 1e6, 1),
                "train_gflops_per_sample": None if flops is None else round(flops / 1e9, 3),
                "precision": PRECISION.get((source, net)),
            }
    return out


def _headline(
    r: Result, catalog: Mapping[str, GpuType], before: Mapping[str, float]
) -> list[dict[str, Any]]:
    """The error table per source: (source, what, before, after) with median/worst/points."""
    g, p, z = r.gavel, r.pollux, r.zeus
    d = p.data

    def eff_rows(fits: Iterable[EfficiencyFit]) -> tuple[dict[str, float], dict[str, float]]:
        pts = [(f, q) for f in fits for q in f.all_points]
        b = _stats(
            _rel(before[f.gpu_type] * catalog[f.gpu_type].peak_tflops, q.efficiency * q.peak_tflops)
            for f, q in pts
        )
        return b, _stats(_rel(f.value, q.efficiency) for f, q in pts)

    gavel_b, gavel_a = eff_rows(f for f in r.efficiency if f.family != "T4")
    t4_b, t4_a = eff_rows(f for f in r.efficiency if f.family == "T4" and f.used)
    one = g.ratios_1gpu
    across = d.across
    rows: list[dict[str, Any]] = [
        {
            "source": "Gavel",
            "what": "1-GPU samples/s, K80/P100/V100 (ResNet-18, ResNet-50, LM; every batch)",
            "before": gavel_b,
            "after": gavel_a,
        },
        {
            "source": "Gavel",
            "what": (
                f"1-GPU throughput ratio between types ({len(PAIRS)} pairs x "
                f"{len(one) // len(PAIRS)} workloads)"
            ),
            "before": _stats(_rel(g.ratio_before[q.pair], q.measured) for q in one),
            "after": _stats(_rel(q.model, q.measured) for q in one),
        },
        {
            "source": "Gavel",
            "what": "throughput ratio between types at 2, 4, 8 packed GPUs",
            "before": None,
            "after": _stats(_rel(q.model, q.measured) for q in g.ratios_n),
        },
        {
            "source": "Pollux",
            "what": "1-GPU samples/s, T4 mixed precision (ImageNet, every local batch)",
            "before": t4_b,
            "after": t4_a,
        },
        {
            "source": "Pollux",
            "what": "step time, placements across nodes",
            "before": _stats(p.step_before[across] / d.step[across] - 1),
            "after": _stats(p.step_after[across] / d.step[across] - 1),
        },
        {
            "source": "Pollux",
            "what": "sync time, placements across nodes",
            "before": _stats(p.sync_before[across] / d.sync[across] - 1),
            "after": _stats(p.sync_after[across] / d.sync[across] - 1),
        },
        {
            "source": "Pollux",
            "what": "step time, placements on one node (not fitted)",
            "before": _stats(p.step_before[~across] / d.step[~across] - 1),
            "after": _stats(p.step_after[~across] / d.step[~across] - 1),
        },
    ]
    for what, errors in (
        ("time per epoch", z.time_error),
        ("average power", z.power_error),
        ("energy per epoch", z.energy_error),
    ):
        rows.append(
            {
                "source": "Zeus",
                "what": (
                    f"{what} over the power limit ({len(z.gpus)} GPUs, "
                    f"{r.clock_doc['overall']['workloads']} workloads)"
                ),
                "before": None,
                "after": _stats(np.concatenate(errors)),
            }
        )
    return rows


SERVICE_EXAMPLES: tuple[tuple[str, str, int, int, float], ...] = (
    ("bert-large", "T4", 4, 4, 50.0),
    ("bert-large", "T4", 8, 4, 50.0),
    ("bert-large", "T4", 16, 4, 50.0),
    ("bert-large", "K80", 8, 8, 25.0),
    ("bert-large", "V100-16GB", 16, 8, 25.0),
)
"""(architecture, GPU type, data-parallel GPUs, GPUs per node, Gbit/s per node)."""


def service_examples(r: Result) -> list[dict[str, Any]]:
    """``solver.perf.estimate`` at the top clock, uncalibrated and with the fitted constants."""
    from solver.catalog import load_architectures
    from solver.domain import Shape

    catalog, archs = load_gpu_catalog(), load_architectures()
    fitted = perf.Calibration(
        compute_efficiency={f.family: f.value for f in r.efficiency if f.used},
        network_efficiency={FAMILIES[POLLUX_GPU]: r.pollux.network_efficiency},
    )
    out = []
    for arch, gpu_name, dp, per_node, network in SERVICE_EXAMPLES:
        gpu = catalog[gpu_name]
        values = []
        for cal in (perf.UNCALIBRATED, fitted):
            e = perf.estimate(
                archs[arch],
                gpu,
                Shape(gpu.name, dp, 1, 1),
                gpu.max_clock_mhz,
                gpus_per_node=per_node,
                network_bandwidth_gbps=network,
                calibration=cal,
            )
            assert e is not None, (arch, gpu_name, dp)
            values.append(e)
        out.append(
            {
                "job": f"{arch}, {dp} x {gpu_name}, {per_node} per node, {network:g} Gbit/s",
                "samples_per_second_before": round(values[0].samples_per_second, 2),
                "samples_per_second_after": round(values[1].samples_per_second, 2),
                "computing_share_after": round(values[1].compute_fraction, 3),
            }
        )
    return out


def calibration_doc(r: Result, s: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document written to models/calibration.json."""
    fits = []
    for e in s["efficiency"]:
        fits.append(
            {
                **e,
                "data": (
                    "data/gavel/isolated_throughputs.csv (1 GPU, packed)"
                    if e["family"] != "T4"
                    else "data/pollux/{"
                    + ",".join(sorted(e["networks"]))
                    + "}/placements.csv (placement 1)"
                ),
            }
        )
    pol = s["pollux"]
    return {
        "description": (
            "Constants of the analytic model fitted to measured data by `dsfro calibrate` "
            "(solver/calibrate.py); docs/calibration.md is the report. solver.perf reads "
            "compute_efficiency and network_efficiency, keyed by GPU family (a prefix of the "
            "catalog name)."
        ),
        "compute_efficiency": s["constants"]["compute_efficiency"],
        "network_efficiency": s["constants"]["network_efficiency"],
        "fallback": (
            "Families not listed under compute_efficiency keep solver.perf.COMPUTE_EFFICIENCY "
            "(cited MFUs: A100, H100, H200, V100) or DEFAULT_COMPUTE_EFFICIENCY 0.30; families "
            "not listed under network_efficiency use the full line rate (1.0)."
        ),
        "fits": {
            "compute_efficiency": {
                "method": (
                    "per GPU type and precision: geometric mean over networks of the achieved "
                    "training FLOP/s at each network's largest measured batch (1 GPU) over the "
                    "peak of the arithmetic used; FLOPs per sample = 3 forward passes at 2 "
                    "FLOPs per multiply-accumulate (BERT: 6 x parameters x tokens)"
                ),
                "fits": fits,
            },
            "network_efficiency": {
                "value": pol["network_efficiency"],
                "data": "data/pollux/{bert,cifar10,imagenet,ncf,yolov3}/placements.csv",
                "method": (
                    "least squares over the rows that cross nodes of (modelled - measured "
                    "sync_time) / measured step_time, each application weighing the same; "
                    "log grid then golden section on [0.01, 1]"
                ),
                "model": (
                    "ring all-reduce of 4 B x parameters over efficiency x 50 Gbit/s / 4 GPUs "
                    "per node, less 2/3 of the 1-GPU step time"
                ),
                "rows": pol["rows_across_nodes"],
                "error": {
                    k: {
                        "step_time": v["step_after"],
                        "sync_time_over_step_time": v["sync_share_of_step_after"],
                    }
                    for k, v in pol["by_class"].items()
                    if k != "one node"
                },
            },
            "clock": {
                "file": "models/clock_model.json",
                "command": CLOCK_COMMAND,
                "alpha": s["constants"]["alpha"],
                "dynamic_fraction": s["constants"]["dynamic_fraction"],
                "error": s["zeus"]["all"],
            },
        },
        "command": COMMAND,
    }


# ---------------------------------------------------------------- figures

GPU_COLOURS: Mapping[str, str] = {
    "k80": "tab:blue",
    "p100": "tab:orange",
    "v100": "tab:green",
    "a40": "tab:red",
    "rtx6000": "tab:purple",
}
CLASS_COLOURS: Mapping[str, str] = {
    "one node": "tab:green",
    "packed": "tab:blue",
    "spread": "tab:red",
}


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def figure_gavel_ratios(r: Result) -> Figure:
    """Measured 1-GPU throughput ratios per workload against the model's ratios."""
    g = r.gavel
    fig = _new_figure(15, 4.8)
    axes = fig.subplots(1, len(PAIRS), sharey=True)
    labels = sorted({p.workload for p in g.ratios_1gpu}, key=_workload_order)
    for ax, pair in zip(axes, PAIRS, strict=True):
        pts = {p.workload: p.measured for p in g.ratios_1gpu if p.pair == pair}
        xs = [i for i, lab in enumerate(labels) if lab in pts]
        ax.scatter(xs, [pts[labels[i]] for i in xs], color="black", s=18, label="measured")
        for value, style, name in (
            (g.ratio_before[pair], "--", "model before (16-bit peaks)"),
            (g.ratio_fp32[pair], "-", "model, FP32 peaks x fitted efficiency"),
            (g.ratio_bandwidth[pair], ":", "memory bandwidth only"),
        ):
            ax.axhline(value, linestyle=style, color="tab:red", label=name)
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        ax.set_title(f"{_pair_name(pair)} at 1 GPU")
        ax.set_xlabel("workload (network, batch)")
    axes[0].set_ylabel("throughput ratio")
    axes[0].legend(fontsize=7, loc="upper left")
    return fig


def _workload_order(label: str) -> tuple[str, int]:
    name, _, batch = label.partition(" ")
    return (name, int(batch) if batch else 0)


def figure_gavel_scaling(r: Result) -> Figure:
    """Per-GPU throughput over GPU count (packed), relative to 1 GPU: measured and model."""
    g = r.gavel
    fig = _new_figure(15, 4.5)
    axes = fig.subplots(1, len(GAVEL_TYPES), sharey=True)
    for ax, gpu in zip(axes, GAVEL_TYPES, strict=True):
        series: dict[str, dict[int, tuple[float, float]]] = defaultdict(dict)
        for gg, lab, n, measured, model in g.scaling:
            if gg == gpu:
                series[lab][n] = (measured, model)
        for k, (_, pts) in enumerate(sorted(series.items())):
            if 1 not in pts:
                continue
            ns = sorted(pts)
            m1, p1 = pts[1]
            ax.plot(
                ns,
                [pts[n][0] / n / m1 for n in ns],
                color="grey",
                alpha=0.5,
                marker=".",
                label="measured (one line per workload)" if k == 0 else None,
            )
            ax.plot(
                ns,
                [pts[n][1] / n / p1 for n in ns],
                color="tab:red",
                alpha=0.6,
                label="model" if k == 0 else None,
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8], ["1", "2", "4", "8"])
        ax.set_title(f"{gpu.upper()}, packed on one server")
        ax.set_xlabel("GPUs")
    axes[0].set_ylabel("samples/s per GPU / 1-GPU samples/s")
    axes[0].legend(fontsize=7)
    return fig


def figure_pollux(r: Result) -> Figure:
    """Modelled against measured step and sync times of every multi-GPU Pollux row."""
    p = r.pollux
    d = p.data
    classes = np.array(d.placement_class)
    fig = _new_figure(12, 5.5)
    axes = fig.subplots(1, 2)
    for ax, measured, model, what in (
        (axes[0], d.step, p.step_after, "step time"),
        (axes[1], d.sync, p.sync_after, "sync time"),
    ):
        for cls, colour in CLASS_COLOURS.items():
            m = classes == cls
            ax.scatter(measured[m], model[m], s=4, alpha=0.5, color=colour, label=cls)
        lo = float(min(measured.min(), model.min()))
        hi = float(max(measured.max(), model.max()))
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {what} (s)")
        ax.set_ylabel(f"model {what} (s)")
        ax.set_title(f"Pollux T4: {what}, network efficiency {p.network_efficiency}")
        ax.legend(fontsize=8, markerscale=3)
    return fig


def _spread_placement(n: int) -> str:
    """``n`` GPUs over as many of 4 nodes as possible, evenly (Pollux's normalised id)."""
    nodes = min(n, POLLUX_GPUS_PER_NODE)
    parts = [n // nodes + (1 if i < n % nodes else 0) for i in range(nodes)]
    return min("".join(map(str, parts[i:] + parts[:i])) for i in range(len(parts)))


def figure_pollux_scaling(r: Result) -> Figure:
    """Samples/s over GPU count, packed and spread, at each application's largest batch."""
    p = r.pollux
    d = p.data
    apps = sorted(set(d.app))
    fig = _new_figure(18, 4.2)
    axes = fig.subplots(1, len(apps))
    for ax, app in zip(axes, apps, strict=True):
        rows = [i for i, a in enumerate(d.app) if a == app]
        lbs = int(max(d.local_batch[i] for i in rows if d.placement[i] == "4444"))
        index = {d.placement[i]: i for i in rows if d.local_batch[i] == lbs}
        one = lbs / float(d.step_1[index["4444"]])
        for name, place, colour in (
            ("packed", lambda n: packed_placement(n, POLLUX_GPUS_PER_NODE), "tab:blue"),
            ("spread", _spread_placement, "tab:red"),
        ):
            ns = [1] + [n for n in range(2, 17) if place(n) in index]
            measured = [one] + [lbs * n / float(d.step[index[place(n)]]) for n in ns[1:]]
            model = [one] + [lbs * n / float(p.step_after[index[place(n)]]) for n in ns[1:]]
            ax.plot(ns, measured, marker=".", color=colour, label=f"measured, {name}")
            ax.plot(ns, model, linestyle="--", color=colour, label=f"model, {name}")
        ax.set_title(f"{app}, local batch {lbs}")
        ax.set_xlabel("GPUs")
    axes[0].set_ylabel("samples/s")
    axes[0].legend(fontsize=7)
    return fig


def figure_zeus(r: Result) -> Figure:
    """Relative error of time, power and energy per epoch over the power limit."""
    z = r.zeus
    fig = _new_figure(15, 4.5)
    axes = fig.subplots(1, 3, sharey=True)
    for ax, what, errors in (
        (axes[0], "time per epoch", z.time_error),
        (axes[1], "average power", z.power_error),
        (axes[2], "energy per epoch", z.energy_error),
    ):
        for name, share, err in zip(z.gpus, z.limit_share, errors, strict=True):
            ax.scatter(share, err, s=5, alpha=0.4, color=GPU_COLOURS.get(name), label=name)
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_title(f"Zeus: {what}")
        ax.set_xlabel("power limit / highest limit")
    axes[0].set_ylabel("model / measured - 1")
    axes[0].legend(fontsize=8, markerscale=3)
    return fig


FIGURES: Mapping[str, Callable[[Result], Figure]] = {
    "calibration-gavel-ratios.png": figure_gavel_ratios,
    "calibration-gavel-scaling.png": figure_gavel_scaling,
    "calibration-pollux.png": figure_pollux,
    "calibration-pollux-scaling.png": figure_pollux_scaling,
    "calibration-zeus.png": figure_zeus,
}


def make_figures(r: Result) -> dict[str, Figure]:
    """Every figure of the report, by file name."""
    return {name: make(r) for name, make in FIGURES.items()}


def write_figures(figures: Mapping[str, Figure], folder: Path, dpi: int = 110) -> list[Path]:
    """Save the figures as PNG (no software version in the metadata, so runs compare)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, fig in figures.items():
        path = folder / name
        fig.savefig(path, dpi=dpi, metadata={"Software": None})
        out.append(path)
    return out


# ---------------------------------------------------------------- the report

DATA_BEGIN = "<!-- calibration-data"
DATA_END = "-->"


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _err(e: Mapping[str, float]) -> str:
    return f"{_pct(e['median'])} / {_pct(e['worst'])}"


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> str:
    """A Markdown table; ``align`` holds "l" or "r" per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" if a == "l" else "---:" for a in align) + " |",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _opt_err(e: Mapping[str, float] | None) -> str:
    return "—" if e is None else _err(e)


def _lower_bound(e: Mapping[str, Any], s: Mapping[str, Any]) -> float:
    """An FP32 efficiency as a share of the type's 16-bit peak: mixed precision is no slower."""
    value: float = e["value"] * e["peak_tflops"]
    return value / float(s["peak_tflops"][e["gpu_type"]]["catalog_16bit"])


def render_markdown(s: Mapping[str, Any]) -> str:
    """docs/calibration.md from the summary alone (so the text matches the embedded block)."""
    c = s["constants"]
    g, pol, z = s["gavel"], s["pollux"], s["zeus"]
    eta = pol["network_efficiency"]
    used = [e for e in s["efficiency"] if e["used"]]
    out: list[str] = []
    add = out.append
    add("# Calibration of the performance and power model\n")
    add(
        "Generated by `dsfro calibrate` (`solver/calibrate.py`) from the bundled measurements; "
        "do not edit by hand. It compares the analytic model of `solver/perf.py` and "
        "`solver/power.py` (docs/performance-model.md) with three public sources, fits the "
        "model's free constants to them and writes them to `models/calibration.json`, which "
        "`solver.perf` reads: **the fitted constants are what the service uses**. "
        "`tests/test_calibrate.py` re-runs the fit and checks the file, this report (against "
        "the machine-readable block at the end) and the figures. `dsfro calibrate --check` "
        "tells whether the models file is up to date.\n"
    )
    add("Errors are `|model / measured - 1|`, given as median / worst over the points.\n")

    add("## Summary\n")
    add("### Fitted constants\n")
    rows = []
    for e in s["efficiency"]:
        source = "Pollux" if e["family"] == "T4" else "Gavel"
        rows.append(
            [
                f"compute efficiency, {e['gpu_type']}, {e['precision']}",
                f"{e['value']:.4f} of {e['peak_tflops']:g} TFLOP/s",
                f"{source} 1-GPU runs: {', '.join(e['networks'])}",
                f"yes (was {e['before']:.2f})" if e["used"] else f"no: {e['reason']}",
            ]
        )
    rows.append(
        [
            f"network efficiency, {', '.join(c['network_efficiency'])}",
            f"{eta:.3f}",
            "Pollux sync times, placements across nodes",
            "yes (was 1.0, the line rate)",
        ]
    )
    rows.append(
        [
            "clock-power exponent `alpha`",
            f"{c['alpha']:.3f}",
            "Zeus power-limit sweeps (`scripts/fit_clock_model.py`)",
            "yes (`models/clock_model.json`, unchanged)",
        ]
    )
    rows.append(
        [
            "`dynamic_fraction`",
            f"{c['dynamic_fraction']:.4f}",
            "Zeus, as above",
            "yes (unchanged)",
        ]
    )
    add(_table(["constant", "value", "fitted to", "used by the service"], rows, "lrll") + "\n")
    add(
        "Fallback, for GPU types the data does not cover in the precision the model uses: the "
        "cited efficiencies of `solver.perf.COMPUTE_EFFICIENCY` (A100 0.61, H100 and H200 0.42, "
        "V100 0.30) and `DEFAULT_COMPUTE_EFFICIENCY` 0.30 for the others (P100, A10, L40S); "
        "the full network line rate (efficiency 1.0) for every type without a fitted one. "
        "Lookup is by GPU family, the prefix of the catalog name ("
        + ", ".join(f"`{e['family']}`" for e in used)
        + ").\n"
    )
    add("### Error per source\n")
    add(
        _table(
            ["source", "quantity", "points", "before: median / worst", "after: median / worst"],
            (
                [
                    h["source"],
                    h["what"],
                    h["after"]["points"],
                    _opt_err(h["before"]),
                    _err(h["after"]),
                ]
                for h in s["headline"]
            ),
            "llrrr",
        )
        + "\n"
    )
    add(
        '"Before" is the model with the constants it had (catalog 16-bit peaks, cited or '
        'default efficiencies, full line rate); "after" with the fitted ones. Zeus was '
        "already fitted (its errors are those of `models/clock_model.json`).\n"
    )
    add("What the model cannot fit, in short (details per source below):\n")
    ratio = g["ratios_1gpu"]
    vk = g["v100_over_k80_range_by_network"]
    v100s = g["per_gpu_scaling"]["v100"]
    add(
        "- **Throughput ratios across GPU types.** One efficiency per type gives one ratio per "
        "pair of types; Gavel's measured ratios spread over a factor of "
        f"{min(v['measured_range'][1] / v['measured_range'][0] for v in ratio.values()):.1f} "
        f"or more per pair (V100/K80: {ratio['V100/K80']['measured_range'][0]:.2f} to "
        f"{ratio['V100/K80']['measured_range'][1]:.2f}) with the network and the batch size. "
        "Small batches and input-bound networks (Recommendation: V100/K80 "
        f"{vk['Recommendation'][0]:.2f}-{vk['Recommendation'][1]:.2f}) leave fast GPUs idle; "
        "the ratio of memory bandwidths predicts the measured ratios as well as or better than the "
        "fitted FLOP ratio (median errors "
        + ", ".join(
            f"{pair} {_pct(v['error_bandwidth']['median'])} against "
            f"{_pct(v['error_fp32']['median'])}"
            for pair, v in ratio.items()
        )
        + "), and the model has no memory-bound term.\n"
        "- **Multi-GPU losses inside a server (Gavel).** The model's all-reduce over PCIe "
        "mostly hides behind the backward pass, so it predicts near-linear scaling; the measured "
        "per-GPU throughput drops to "
        f"{g['per_gpu_scaling']['p100']['8']['measured_median']:.0%} (P100, 8 GPUs), which is "
        "not communication (input pipelines and host contention; not in the model).\n"
        "- **Intra-node sync on T4 (Pollux).** The model hides in-node all-reduces behind the "
        "backward pass; measured ones are not hidden (BERT on 2 GPUs: "
        f"{pol['bert_two_gpus_one_node_sync_ms'][0]:.1f}-"
        f"{pol['bert_two_gpus_one_node_sync_ms'][1]:.1f} ms of sync at every batch, against "
        f"a modelled {pol['bert_two_gpus_model_allreduce_ms']:.1f} ms all-reduce and "
        f"{pol['bert_backward_s'][0]:.2f}-{pol['bert_backward_s'][1]:.2f} s of backward "
        "pass). Not fitted (an in-node efficiency "
        f"fitted to them comes out at {pol['intra_node_efficiency_diagnostic']:.3f}, a stand-in "
        "for the missing overlap rather than a property of PCIe).\n"
        "- **Two nodes against more (Pollux).** Fitted on rows of one node count at a time, the "
        f"network efficiency is {pol['network_efficiency_by_nodes']['2']:.3f} for 2 nodes and "
        f"{pol['network_efficiency_by_nodes']['3']:.3f} / "
        f"{pol['network_efficiency_by_nodes']['4']:.3f} for 3 / 4 nodes; the ring model has "
        "one.\n"
        "- **Precision.** FP32 measurements (all of Gavel, Pollux's CIFAR-10 and BERT) cannot "
        "calibrate the 16-bit tensor-core efficiency the model uses for P100 and V100, so "
        "those keep their previous values.\n"
        "- **Zeus** (unchanged): time curves more convex than one power law at the lowest "
        "limits; see docs/performance-model.md section 2.\n"
    )

    add("## Gavel: compute efficiency and ratios across GPU types\n")
    add(
        "Data: `data/gavel/isolated_throughputs.csv`, steps/s of seven networks on K80, P100 "
        "and V100 at 1, 2, 4, 8 GPUs, packed on one server or spread. Gavel's `batch_size` is "
        "per GPU and its steps count every worker's iterations, so samples/s = steps/s x "
        "batch (as `solver.generate` reads it). The catalog types are K80 (one GK210), "
        "P100-16GB and V100-16GB (PCIe), as in the generator.\n"
    )
    add("### Mapping onto the model\n")
    gmac_r50 = s["mapping"]["gavel/ResNet-50"]["train_gflops_per_sample"] / 6
    add(
        "The model's compute term is `FLOPs / (peak x efficiency)`. Gavel's training scripts "
        "(stanford-futuredata/gavel `workloads/pytorch`) train in FP32 without mixed precision, "
        "so the peak that applies is the FP32 one (datasheets; TFLOP/s: "
        + ", ".join(f"{t} {v['fp32']:g}" for t, v in s["peak_tflops"].items())
        + "), not the catalog's 16-bit `peak_tflops` ("
        + ", ".join(f"{t} {v['catalog_16bit']:g}" for t, v in s["peak_tflops"].items())
        + "; tensor cores on V100 and T4). Training FLOPs per sample are three forward "
        "passes at 2 FLOPs per multiply-accumulate (the rule behind the model's "
        "`6 x parameters x tokens`), with the multiply-accumulates counted layer by layer in "
        "`solver/calibrate.py`: ResNet-18 for 32x32 CIFAR images "
        f"({s['mapping']['gavel/ResNet-18']['train_gflops_per_sample'] / 6:.3f} GMAC forward), "
        f"ResNet-50 at 224x224 ({gmac_r50:.3f} GMAC), the LM (2-layer LSTM 200/200, "
        "33,278-word decoder) at 35 tokens a sample. "
        "Gavel's Transformer (Multi30k sentence lengths unknown), Recommendation, A3C and "
        "CycleGAN have no established FLOP count: they enter the ratio comparison only.\n"
    )
    add(
        _table(
            ["network", "parameters", "FP32 gradient MB", "training GFLOP / sample", "precision"],
            (
                [
                    k,
                    f"{v['parameters']:,.0f}",
                    f"{v['gradient_mb']:.1f}",
                    "—"
                    if v["train_gflops_per_sample"] is None
                    else f"{v['train_gflops_per_sample']:.3f}",
                    v["precision"] or "— (not used)",
                ]
                for k, v in s["mapping"].items()
            ),
            "lrrrl",
        )
        + "\n"
    )
    add("### Compute efficiency per GPU type\n")
    add(
        "Efficiency rises with the batch size (small batches are bound by kernel launches and "
        "input), while the model's constant stands for large-GEMM training. The fit therefore "
        "takes, per GPU type and precision, each network's largest measured batch and the "
        "geometric mean of their efficiencies (least squares in log space, one point per "
        "network). Pollux's 1-GPU runs give the T4 (its ImageNet run uses apex AMP, so it "
        "measures the tensor-core peak).\n"
    )
    add(
        _table(
            [
                "type",
                "precision",
                "peak TFLOP/s",
                "efficiency per network (largest batch)",
                "fitted",
                "error, fit points",
                "error, every batch",
                "before (as share of this peak)",
                "used",
            ],
            (
                [
                    e["gpu_type"],
                    e["precision"],
                    f"{e['peak_tflops']:g}",
                    ", ".join(
                        f"{n} {v['efficiency']:.3f} (bs {v['batch']})"
                        for n, v in e["networks"].items()
                    ),
                    f"{e['value']:.4f}",
                    _err(e["error_fit"]),
                    _err(e["error_all_batches"]),
                    f"{e['before']:.3f}",
                    "yes" if e["used"] else "no",
                ]
                for e in s["efficiency"]
            ),
            "llrlrrrrl",
        )
        + "\n"
    )
    add(
        '"Before" is the efficiency the uncalibrated model implied for these runs: its '
        "16-bit peak x its cited or default efficiency, as a share of the peak the runs used "
        "(above 1: faster than the hardware can go). A fit is used by the service only where "
        "the runs exercised the arithmetic of the catalog's `peak_tflops`, the peak the "
        "model divides by:\n"
    )
    add(
        "\n".join(
            f"- {e['gpu_type']} ({e['precision']}): "
            + ("used; " if e["used"] else "not used; ")
            + e["reason"]
            + (
                ""
                if e["used"] or e["family"] == "T4"
                else f". It keeps {e['cited']:.2f}; the FP32 runs bound its 16-bit efficiency "
                f"from below only, at {_lower_bound(e, s):.3f}"
            )
            + "."
            for e in s["efficiency"]
        )
        + "\n"
    )
    add(
        "V100's kept value is Megatron-LM's measured 30 % of the tensor peak for transformer "
        "training; P100 keeps the default (no published figure). A single network (T4 mixed "
        "precision: ImageNet) is fitted exactly at its largest batch; its error over every "
        "batch is the batch-size dependence.\n"
    )
    add("### Throughput ratios at 1 GPU\n")
    add(
        "Every workload (network and batch size) measured on both types, "
        f"{ratio['V100/K80']['error_fp32']['points']} per pair. The "
        "model's ratio does not depend on the workload: before calibration it is the ratio of "
        "catalog peaks x efficiencies; after, FP32 peaks x the fitted FP32 efficiencies (the "
        "model applied to FP32 jobs). The ratio of memory bandwidths is shown as a diagnostic: "
        "the model has no term that uses it.\n"
    )
    add(
        _table(
            [
                "pair",
                "measured: median (range)",
                "before: ratio, error",
                "after: ratio, error (every batch)",
                "after, largest batch only",
                "memory bandwidth: ratio, error",
            ],
            (
                [
                    pair,
                    f"{v['measured_median']:.2f} ({v['measured_range'][0]:.2f}-"
                    f"{v['measured_range'][1]:.2f})",
                    f"{v['model_before']:.2f}, {_err(v['error_before'])}",
                    f"{v['model_fp32']:.2f}, {_err(v['error_fp32'])}",
                    _err(v["error_fp32_largest_batch"]),
                    f"{v['bandwidth']:.2f}, {_err(v['error_bandwidth'])}",
                ]
                for pair, v in ratio.items()
            ),
            "lrrrrr",
        )
        + "\n"
    )
    add("Error of the fitted (FP32) ratio per network, over the three pairs and every batch:\n")
    add(
        _table(
            ["network", "points", "median / worst"],
            ([n, v["points"], _err(v)] for n, v in g["ratio_error_by_network"].items()),
        )
        + "\n"
    )
    add(
        "ResNet-50 and CycleGAN, compute-heavy convolutional networks, follow the model "
        f"(median error {_pct(g['ratio_error_by_network']['ResNet-50']['median'])} and "
        f"{_pct(g['ratio_error_by_network']['CycleGAN']['median'])}). Recommendation (an "
        "autoencoder over sparse inputs) runs no faster on a V100 than on a K80 (V100/K80 "
        f"{vk['Recommendation'][0]:.2f}-{vk['Recommendation'][1]:.2f}) and A3C "
        "(reinforcement learning, environment steps on the CPU) gains "
        f"{vk['A3C'][1]:.2f}x: input- and CPU-bound, no compute model fits them. Ratios also "
        "move with the batch size (V100/K80 for ResNet-18 at batch "
        + ", ".join(f"{b}: {v:.2f}" for b, v in g["v100_over_k80_resnet18_by_batch"].items())
        + ") because the GPUs saturate at different batches (the K80's ResNet-18 throughput "
        "peaks at batch 64, the V100's still grows at 256) and small batches leave the faster "
        "GPU idle on kernel launches and data loading; the model has no batch-size "
        "dependence.\n"
    )
    add("![Gavel ratios](img/calibration-gavel-ratios.png)\n")
    add("### Across GPU counts\n")
    add(
        "Packed runs of 2, 4 and 8 GPUs of the networks with a FLOP count. The model: per GPU, "
        "the fitted FP32 compute of one batch plus the exposed ring all-reduce of the FP32 "
        "gradients over the server's PCIe (half of 32 GB/s per direction), less 2/3 of the "
        "compute (`solver.perf`'s terms). Ratio errors at each count:\n"
    )
    add(
        _table(
            ["GPUs", "points", "ratio error median / worst"],
            ([n, v["points"], _err(v)] for n, v in g["ratio_error_by_gpus"].items()),
        )
        + "\n"
    )
    add(
        "The model's longest all-reduce takes "
        f"{g['model_communication']['longest_allreduce_ms']:.1f} ms (ResNet-50's gradients "
        "over PCIe at 8 GPUs) and mostly hides behind the backward pass (it exposes up to "
        f"{_pct(g['model_communication']['largest_exposed_share'])} of a step only for the LM "
        "at its smallest batches), so its per-GPU throughput barely drops with the count. "
        "Measured per-GPU throughput relative to 1 GPU (median over workloads):\n"
    )
    add(
        _table(
            ["type", "GPUs", "measured", "model", "error median / worst"],
            (
                [
                    gpu.upper(),
                    n,
                    f"{v['measured_median']:.3f}",
                    f"{v['model_median']:.3f}",
                    _err(v["error"]),
                ]
                for gpu, per_n in g["per_gpu_scaling"].items()
                for n, v in per_n.items()
            ),
        )
        + "\n"
    )
    add(
        "The measured losses are not communication: they would need all-reduce bandwidths far "
        "below PCIe's, and they do not grow steadily with the count"
        + (
            f" (V100: {v100s['4']['measured_median']:.2f} at 4 GPUs, "
            f"{v100s['8']['measured_median']:.2f} at 8)"
            if v100s["4"]["measured_median"] < v100s["8"]["measured_median"]
            else ""
        )
        + ". The workers' data loaders (2 to 4 processes per GPU in Gavel's scripts) share "
        "one server's CPUs and host links; the model describes neither. The ratios across "
        "counts inherit the 1-GPU ratio errors.\n"
    )
    add(
        "Spread placements (`consolidated = 0`) over packed, median over workloads: "
        + ", ".join(f"{k} {v:.2f}" for k, v in g["spread_over_packed"].items())
        + ". Neither SOURCE.md nor the copied data gives the network or the GPUs per server of "
        "the spread runs, so the model's cross-node term cannot be evaluated against them; "
        "that placement comparison is Pollux's.\n"
    )
    add("![Gavel scaling](img/calibration-gavel-scaling.png)\n")

    add("## Pollux: scaling over GPU count and placement, the network efficiency\n")
    add(
        "Data: `data/pollux/<app>/placements.csv`, step and sync time of five networks for "
        "every placement of up to 16 T4 GPUs on 4-GPU nodes (AWS g4dn.12xlarge, 50 Gbit/s, "
        f"one placement group) at several local batch sizes: {pol['rows_across_nodes']} rows "
        f"across nodes, {pol['rows_one_node']} on one node.\n"
    )
    add("### Mapping onto the model\n")
    add(
        "The networks are not transformers; the model's data-parallel term needs only the "
        "gradient size and the compute time, so they map as follows (approximations marked):\n\n"
        "- Gradient: 4 bytes x parameters (FP32 weights; the ImageNet run's AMP O1 keeps FP32 "
        "weights), parameters as in `solver.generate` (table above). BERT and YOLOv3 counts "
        "are the published architectures', not the exact checkpoints' (approximation).\n"
        "- Compute: the measured 1-GPU step time at the same local batch, less its sync time "
        "(which, without peers, is bookkeeping). It includes the input pipeline and the "
        "optimizer step, which the model would count as compute (approximation).\n"
        "- Sync time: adaptdl measures from the last gradient produced to the end of the "
        "synchronisation (`adaptdl/torch/parallel.py`), i.e. the all-reduce time the backward "
        "pass did not hide: the model's exposed term. Modelled sync = 1-GPU sync + "
        "`max(0, allreduce - 2/3 x compute)`; modelled step = 1-GPU step + the same exposed "
        "time.\n"
        "- All-reduce: ring, `2 (n - 1) / n x gradient / bandwidth`; one node: PCIe, 16 GB/s "
        "per direction; across nodes: `efficiency x 50 Gbit/s / 4` per GPU (the node link "
        "shared by its GPUs, as `solver.perf` assumes for packed jobs). The model sees only "
        "whether a job crosses nodes, not how its GPUs are spread (approximation: spread "
        "placements get the same per-GPU bandwidth).\n"
    )
    add("### Fit\n")
    add(
        "One constant, the network efficiency, by least squares over the rows across nodes of "
        "`(modelled - measured sync) / measured step` (the sync error as a share of the step, "
        "so that small and large networks compare), each application weighing the same; a log "
        "grid on [0.01, 1] then golden-section search. Objective "
        f"{pol['objective_before']:.3f} at the line rate, {pol['objective_after']:.4f} at "
        f"**{eta:.3f}**: a GPU gets {eta * 50 / 4:.1f} Gbit/s of the node's 50.\n"
    )
    by_pl = pol["network_efficiency_by_placement"]
    add(
        "Fitted per placement instead, the efficiency is "
        + ", ".join(f"`{pl}` {v:.3f}" for pl, v in by_pl.items())
        + ": one GPU on each node (`11`, `1111`) gets no more than four GPUs on each (`44`, "
        "`4444`), although it has the node's link to itself. The limit looks per connection, "
        "not the node's 50 Gbit/s: AWS documents up to 10 Gbit/s for one TCP flow inside a "
        "cluster placement group (5 Gbit/s outside). Dividing the node's link by its 4 GPUs, "
        "as the model does, happens to describe that; spreading a job does not speed up its "
        "all-reduce.\n"
    )
    add(
        "The overlap share is the model's structural 2/3 (the backward pass). Refitting the "
        "efficiency at other overlaps:\n"
    )
    add(
        _table(
            ["overlap", "network efficiency", "objective"],
            (
                [o, f"{v['network_efficiency']:.3f}", f"{v['objective']:.4f}"]
                for o, v in pol["overlap_sensitivity"].items()
            ),
        )
        + "\n"
    )
    add(
        "2/3 is at (or next to) the best objective, so the data support the model's overlap "
        "across nodes, and the efficiency moves by less than the spread between placements.\n"
        if min(pol["overlap_sensitivity"].values(), key=lambda v: v["objective"])["objective"]
        >= pol["objective_after"] - 0.005
        else "Another overlap fits better than 2/3; the model keeps its structural value.\n"
    )
    add(
        _table(
            [
                "placements",
                "rows",
                "step before",
                "step after",
                "sync after",
                "sync error / step after",
                "measured sync, median",
            ],
            (
                [
                    cls,
                    v["step_after"]["points"],
                    _err(v["step_before"]),
                    _err(v["step_after"]),
                    _err(v["sync_after"]),
                    _err(v["sync_share_of_step_after"]),
                    f"{v['sync_measured_median_s'] * 1000:.1f} ms",
                ]
                for cls, v in pol["by_class"].items()
            ),
            "lrrrrrr",
        )
        + "\n"
    )
    add(
        '"Packed" fills nodes in turn (the service\'s placements, e.g. 8 GPUs as `44`); '
        '"spread" is every other multi-node placement. Per application, across nodes:\n'
    )
    add(
        _table(
            ["application", "rows", "step error", "sync error / step"],
            (
                [
                    a,
                    v["step_after"]["points"],
                    _err(v["step_after"]),
                    _err(v["sync_share_of_step_after"]),
                ]
                for a, v in pol["by_app_across_nodes"].items()
            ),
        )
        + "\n"
    )
    add("![Pollux step and sync times](img/calibration-pollux.png)\n")
    add("![Pollux scaling](img/calibration-pollux-scaling.png)\n")
    add("What the model cannot fit:\n")
    add(
        "- One node: measured in-node syncs are not hidden behind the backward pass (BERT on "
        f"2 GPUs: {pol['bert_two_gpus_one_node_sync_ms'][0]:.1f}-"
        f"{pol['bert_two_gpus_one_node_sync_ms'][1]:.1f} ms at every local batch, i.e. "
        f"{pol['bert_two_gpus_one_node_gbytes_per_s']:.1f} GB/s of PCIe's 16 per direction, "
        f"although the backward pass takes {pol['bert_backward_s'][0]:.2f}-"
        f"{pol['bert_backward_s'][1]:.2f} s); the model hides them and predicts none, "
        f"{_pct(pol['by_class']['one node']['step_after']['median'])} median step error. "
        "Not fitted: an intra-node efficiency would have to fall to "
        f"{pol['intra_node_efficiency_diagnostic']:.3f} to reproduce these syncs with the "
        "model's overlap, a number that says nothing about PCIe.\n"
        "- Node count: per node count the fitted efficiency is "
        + ", ".join(f"{k} nodes {v:.3f}" for k, v in pol["network_efficiency_by_nodes"].items())
        + "; one constant splits the difference.\n"
        "- Sync times themselves: where the backward pass nearly hides the all-reduce the "
        "measured sync is a few ms and the relative error large (worst "
        f"{pol['by_class']['spread']['sync_after']['worst']:.1f}x), while the step error "
        "stays small: the fit weighs sync errors by the step time on purpose.\n"
        "- Transfer to other fabrics: the fitted value is for TCP between g4dn instances; it "
        f"is applied to {', '.join(c['network_efficiency'])} only. Other types keep the line "
        "rate; their networks (EFA, InfiniBand) are not measured here, and a TCP figure would "
        "understate them.\n"
    )
    add("## Zeus: time and energy over the power limit\n")
    add(
        "Fitted by `scripts/fit_clock_model.py` (docs/performance-model.md section 2: method, "
        "constants, where it misses); the figures here are the model at the constants of "
        "`models/clock_model.json` (`alpha` "
        f"{z['alpha']:.3f}, floor and dynamic power per GPU, compute fraction and epoch time "
        "per workload), against every measured point. Energy per epoch = time x average "
        "power.\n"
    )
    add(
        _table(
            ["GPU", "points", "time", "power", "energy"],
            (
                [name, v["points"], _err(v["time"]), _err(v["power"]), _err(v["energy"])]
                for name, v in [
                    *z["gpus"].items(),
                    ("all", {"points": z["all"]["time"]["points"], **z["all"]}),
                ]
            ),
        )
        + "\n"
    )
    add(
        "As docs/performance-model.md details, the worst time errors are at the lowest limits "
        "of the A40 and RTX 6000 (measured time curves more convex than one power law); the "
        "energy error compounds the time and power errors. The fitted GPUs are not the "
        "catalog's training GPUs: `alpha` and the median `dynamic_fraction` are carried over "
        "to all types.\n"
    )
    add("![Zeus errors](img/calibration-zeus.png)\n")
    add("## What changes in the service\n")
    add(
        "`solver.perf.estimate` at the highest clock, with the constants it had and with the "
        "fitted ones:\n"
    )
    add(
        _table(
            ["job (data parallel)", "samples/s before", "samples/s after", "computing share after"],
            (
                [
                    e["job"],
                    f"{e['samples_per_second_before']:.2f}",
                    f"{e['samples_per_second_after']:.2f}",
                    f"{e['computing_share_after']:.3f}",
                ]
                for e in s["service_examples"]
            ),
            "lrrr",
        )
        + "\n"
    )
    add(
        "Compute-bound jobs change with the efficiency: "
        + ", ".join(
            f"{e['family']} {e['value']:.4f} instead of {e['cited']:.2f} "
            f"({e['value'] / e['cited']:.2f}x the throughput)"
            for e in used
        )
        + f"; cross-node all-reduces of {', '.join(c['network_efficiency'])} jobs get "
        f"{eta:.3f} of the line rate. Every other type is estimated as before.\n"
    )
    add("## Machine-readable summary\n")
    add(
        "Every number above, as `solver.calibrate.summary` computes it "
        "(`tests/test_calibrate.py` recomputes it and compares):\n"
    )
    add(DATA_BEGIN + "\n" + json.dumps(s, indent=1) + "\n" + DATA_END)
    return "\n".join(out) + "\n"


def parse_markdown(text: str) -> dict[str, Any]:
    """The summary embedded in docs/calibration.md."""
    start = text.index(DATA_BEGIN) + len(DATA_BEGIN)
    end = text.index(DATA_END, start)
    doc: dict[str, Any] = json.loads(text[start:end])
    return doc


# ---------------------------------------------------------------- command


def add_commands(subparsers: Any) -> None:
    """Register ``calibrate`` on the ``dsfro`` command's sub-parsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit the performance model's constants to the bundled measurements and report",
        description=(
            "Compare the analytic model with Gavel, Pollux and Zeus measurements, fit its "
            "constants, and write models/calibration.json, docs/calibration.md and "
            "docs/img/calibration-*.png."
        ),
    )
    p.add_argument("--data", type=Path, default=DATA_DIR, help="data folder (default: data/)")
    p.add_argument(
        "--models-out",
        type=Path,
        default=None,
        help="where to write calibration.json (default: the models folder)",
    )
    p.add_argument("--doc", type=Path, default=DOC_PATH, help="report path")
    p.add_argument("--img", type=Path, default=IMG_DIR, help="figure folder")
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the fitted constants differ from the models file",
    )
    p.set_defaults(func=cmd_calibrate)


def _shown(path: Path) -> str:
    """A path relative to the working directory when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def cmd_calibrate(args: argparse.Namespace) -> int:
    data: Path = args.data
    if not (data / "gavel").is_dir():
        print(f"dsfro: error: {data} has no gavel/, pollux/, zeus/ data", file=sys.stderr)
        return 2
    result = run(data)
    s = summary(result)
    doc = calibration_doc(result, s)
    out: Path = args.models_out or models_dir() / perf.CALIBRATION_FILE
    if args.check:
        current = json.loads(out.read_text()) if out.exists() else {}
        same = all(current.get(k) == doc[k] for k in ("compute_efficiency", "network_efficiency"))
        print(f"{'up to date' if same else 'differs'}: {_shown(out)}")
        return 0 if same else 1
    out.write_text(json.dumps(doc, indent=2) + "\n")
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    args.doc.write_text(render_markdown(s))
    paths = write_figures(make_figures(result), args.img)
    print(f"compute efficiency {doc['compute_efficiency']}")
    print(f"network efficiency {doc['network_efficiency']}")
    shown = ", ".join(_shown(p) for p in (out, args.doc))
    print(f"wrote {shown} and {len(paths)} figures in {_shown(args.img)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m solver.calibrate [options]``: the same as ``dsfro calibrate``."""
    parser = argparse.ArgumentParser(prog="python -m solver.calibrate")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["calibrate", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
