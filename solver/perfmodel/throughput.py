"""Analytic Megatron-LM style throughput, memory and power of a transformer training job.

One step trains ``global_batch_size`` sequences on ``data x tensor x pipeline`` GPUs with 1F1B
pipelining and ``m`` micro-batches per data-parallel replica. Step time per GPU:

- compute: 6 * parameters * tokens / (GPUs * peak * efficiency), stretched by f_max / f;
- tensor parallel: 4 activation all-reduces per layer and micro-batch inside the node;
- pipeline: point-to-point activations and gradients, plus the bubble (pp - 1) / m of the
  per-micro-batch work (compute and tensor all-reduces);
- data parallel: a gradient all-reduce of 2 * parameters / (tp * pp) bytes, overlapped with the
  backward pass of the last micro-batch, over NVLink/PCIe when the job fits in one node and
  over the node network otherwise.

Power: ``solver.perfmodel.power.gpu_watts`` with the computing share of the step as activity.
docs/performance-model.md gives the derivation, the constants and their sources.

Fitted constants come from ``models/calibration.json`` (written by ``dsfro calibrate``,
docs/calibration.md): the compute efficiency of the GPU families that measured data covers in
the precision ``peak_tflops`` counts, and the achieved share of the node network's line rate.
Families without a fitted value keep the cited efficiency (or the default) and the full line rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from solver.domain import GpuType, ModelSpec, Shape
from solver.perfmodel.catalog import CatalogError, models_dir, read_json
from solver.perfmodel.families import family_of
from solver.perfmodel.power import (
    ClockModel,
    clock_ratio,
    gpu_watts,
    load_clock_model,
    watts_at_ratio,
)

CALIBRATION_FILE = "calibration.json"

COMPUTE_EFFICIENCY: Mapping[str, float] = {"A100": 0.61, "H100": 0.42, "H200": 0.42, "V100": 0.30}
"""Achieved share of peak_tflops while computing, by GPU family (the name's prefix).

A100: median MFU of MPT-1B/3B/7B/13B at sequence 2048 on 8 A100-80GB (59.9, 62.1, 64.2, 59.6 %),
H100: median of MPT-1B/7B/13B at sequence 2048 on 8 H100-80GB BF16 (41.8, 46.4, 39.8 %), both
from the mosaicml/llm-foundry training benchmarks (scripts/train/benchmarking/README.md);
H200 (same GH100 die) assumed equal to H100. V100: 30 % of peak, the single-GPU baseline of
Shoeybi et al. 2019 (Megatron-LM, 39 TFLOP/s on a V100).
"""
DEFAULT_COMPUTE_EFFICIENCY = 0.30
"""Types with neither a fitted nor a published figure (P100, A10, L40S): V100's cited value."""
BACKWARD_SHARE = 2 / 3
"""Share of a micro-batch's compute (the backward pass) that the gradient all-reduce overlaps."""

DEFAULT_COMPUTE_FRACTION = 0.705
"""Median fitted compute fraction of the Zeus workloads (models/clock_model.json)."""

BYTES_PER_PARAMETER = 16
"""bf16 weights (2) and gradients (2), fp32 master weights (4) and Adam moments (8)."""
ACTIVATION_BYTES = 2
"""bf16 activations, the size of tensor and pipeline messages per element."""
FRAMEWORK_RESERVE_GIB = 2.0
"""Assumed (not measured) memory for the CUDA context, NCCL buffers and allocator slack."""
MICRO_BATCH_SIZES = (1, 2, 4, 8)
GIB = 2.0**30


@dataclass(frozen=True)
class Estimate:
    samples_per_second: float
    watts: float
    """All of the job's GPUs together."""
    memory_per_gpu_gib: float
    step_seconds: float
    compute_fraction: float
    """Share of the step spent computing at the estimate's clock (the power model's activity)."""


@dataclass(frozen=True)
class Calibration:
    """Fitted constants of ``models/calibration.json``, by GPU family
    (``solver.perfmodel.families``)."""

    compute_efficiency: Mapping[str, float]
    """Fitted share of peak_tflops; replaces COMPUTE_EFFICIENCY for these families."""
    network_efficiency: Mapping[str, float]
    """Achieved share of the node network's line rate in the gradient all-reduce (else 1)."""


UNCALIBRATED = Calibration(compute_efficiency={}, network_efficiency={})
"""No fitted constants: cited efficiencies, the default, the full line rate."""


def _by_family(name: str, table: Mapping[str, float]) -> float | None:
    """The value of the name's family in the table ("NVIDIA-A100-SXM4-80GB" -> "A100";
    ``solver.perfmodel.families``)."""
    family = family_of(name, table)
    return None if family is None else table[family]


def cited_efficiency(gpu: GpuType) -> float:
    """COMPUTE_EFFICIENCY of the GPU's family, else the default (no fitted constants)."""
    eff = _by_family(gpu.name, COMPUTE_EFFICIENCY)
    return DEFAULT_COMPUTE_EFFICIENCY if eff is None else eff


def efficiency_family(gpu: GpuType, calibration: Calibration | None = None) -> str | None:
    """The family whose efficiency ``compute_efficiency`` takes: fitted, else cited; None: the
    default."""
    cal = load_calibration() if calibration is None else calibration
    return family_of(gpu.name, cal.compute_efficiency) or family_of(gpu.name, COMPUTE_EFFICIENCY)


def compute_efficiency(gpu: GpuType, calibration: Calibration | None = None) -> float:
    """The fitted efficiency of the GPU's family, else the cited one, else the default."""
    cal = load_calibration() if calibration is None else calibration
    fitted = _by_family(gpu.name, cal.compute_efficiency)
    return cited_efficiency(gpu) if fitted is None else fitted


def network_efficiency(gpu: GpuType, calibration: Calibration | None = None) -> float:
    """Fitted share of the network line rate the GPU family's all-reduce achieves, else 1."""
    cal = load_calibration() if calibration is None else calibration
    fitted = _by_family(gpu.name, cal.network_efficiency)
    return 1.0 if fitted is None else fitted


def link_bandwidth(
    gpu: GpuType,
    *,
    across_nodes: bool,
    gpus_per_node: int,
    network_bandwidth_gbps: float,
    calibration: Calibration | None = None,
) -> float:
    """Bytes/s per GPU and direction of a data-parallel (or pipeline) transfer.

    Inside one node: half the datasheet's bidirectional NVLink/PCIe figure. Across nodes: the
    node's network link shared by its ``gpus_per_node`` GPUs, at the fitted network efficiency.
    """
    if not across_nodes:
        return gpu.intra_node_bandwidth_gbps / 2 * 1e9
    share = network_bandwidth_gbps / 8 * 1e9 / gpus_per_node
    return network_efficiency(gpu, calibration) * share


def allreduce_seconds(message_bytes: float, ranks: int, bandwidth: float) -> float:
    """Ring all-reduce of ``message_bytes`` over ``ranks``: 2 (k - 1) / k messages a rank."""
    if ranks <= 1:
        return 0.0
    return 2 * (ranks - 1) / ranks * message_bytes / bandwidth


def exposed_sync_seconds(allreduce: float, micro_batch_compute: float) -> float:
    """The part of the gradient all-reduce the last micro-batch's backward pass does not hide."""
    return max(0.0, allreduce - BACKWARD_SHARE * micro_batch_compute)


def load_calibration() -> Calibration:
    """The fitted constants of ``models/calibration.json`` (read once per models folder)."""
    return _load_calibration(models_dir())


@lru_cache(maxsize=4)
def _load_calibration(folder: Path) -> Calibration:
    doc = read_json(CALIBRATION_FILE)
    where = folder / CALIBRATION_FILE
    tables: dict[str, dict[str, float]] = {}
    for field in ("compute_efficiency", "network_efficiency"):
        raw = doc.get(field) if isinstance(doc, dict) else None
        if not isinstance(raw, dict):
            raise CatalogError(f"{where}: field {field!r} must map GPU families to numbers")
        table: dict[str, float] = {}
        for family, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise CatalogError(f"{where}: {field}.{family} must be a number, got {value!r}")
            if not (math.isfinite(value) and 0 < value <= 1):
                raise CatalogError(f"{where}: {field}.{family} must be in (0, 1], got {value}")
            table[family] = float(value)
        tables[field] = table
    return Calibration(
        compute_efficiency=tables["compute_efficiency"],
        network_efficiency=tables["network_efficiency"],
    )


def memory_per_gpu_gib(model: ModelSpec, shape: Shape, micro_batch: int) -> float:
    """Model state, 1F1B activations of the first pipeline stage and the framework reserve."""
    tp, pp = shape.tensor_parallel, shape.pipeline_parallel
    state = BYTES_PER_PARAMETER * model.parameters / (tp * pp)
    s, h, a = model.sequence_length, model.hidden_size, model.attention_heads
    per_layer = s * micro_batch * h * (34 + 5 * a * s / h) / tp
    micro_batches = model.global_batch_size // shape.data_parallel // micro_batch
    in_flight = min(pp, micro_batches)
    activations = per_layer * (model.layers / pp) * in_flight
    return (state + activations) / GIB + FRAMEWORK_RESERVE_GIB


def _valid_split(model: ModelSpec, shape: Shape, gpus_per_node: int) -> bool:
    tp, pp, dp = shape.tensor_parallel, shape.pipeline_parallel, shape.data_parallel
    return (
        model.attention_heads % tp == 0
        and tp <= gpus_per_node
        and model.layers % pp == 0
        and model.global_batch_size % dp == 0
    )


def _step(
    model: ModelSpec,
    shape: Shape,
    ratio: float,
    micro_batch: int,
    flops_per_second: float,
    nvlink: float,
    between: float,
) -> tuple[float, float]:
    """(step seconds, computing seconds) of one configuration.

    ``flops_per_second``: one GPU's peak x efficiency; ``nvlink``: bytes/s inside the node;
    ``between``: bytes/s of data-parallel and pipeline transfers (``link_bandwidth``).
    """
    tp, pp, dp, n = (
        shape.tensor_parallel,
        shape.pipeline_parallel,
        shape.data_parallel,
        shape.num_gpus,
    )
    m = model.global_batch_size // dp // micro_batch
    tokens = model.global_batch_size * model.sequence_length
    compute = 6 * model.parameters * tokens / (n * flops_per_second) / ratio

    message = ACTIVATION_BYTES * model.sequence_length * micro_batch * model.hidden_size

    tensor = 0.0
    if tp > 1:
        tensor = 4 * (model.layers / pp) * m * 2 * (tp - 1) / tp * message / nvlink
    p2p = 2 * m * message / between if pp > 1 else 0.0
    bubble = (pp - 1) / m * (compute + tensor)
    exposed = 0.0
    if dp > 1:
        grads = 2 * model.parameters / (tp * pp)
        exposed = exposed_sync_seconds(allreduce_seconds(grads, dp, between), compute / m)
    return compute + tensor + p2p + bubble + exposed, compute


def estimate(
    model: ModelSpec,
    gpu: GpuType,
    shape: Shape,
    sm_clock_mhz: int,
    *,
    gpus_per_node: int,
    network_bandwidth_gbps: float,
    clock_model: ClockModel | None = None,
    check_memory: bool = True,
    calibration: Calibration | None = None,
) -> Estimate | None:
    """Throughput, power and memory of ``model`` on ``shape`` at ``sm_clock_mhz``.

    ``check_memory=False`` estimates a shape that is known to run (a job's current allocation)
    even where the memory model, which assumes no activation recomputation, says it can't.
    ``calibration`` defaults to the fitted constants of ``models/calibration.json``.

    None when the split is invalid (tensor degree not dividing the heads or larger than a node,
    pipeline degree not dividing the layers, data degree not dividing the global batch) or no
    micro-batch size fits in memory. Of the micro-batch sizes that fit, the fastest is taken.
    """
    if shape.gpu_type != gpu.name:
        raise ValueError(f"shape is for {shape.gpu_type}, GPU type is {gpu.name}")
    if min(shape.data_parallel, shape.tensor_parallel, shape.pipeline_parallel) < 1:
        raise ValueError(f"parallel degrees must be >= 1: {shape}")
    if gpus_per_node < 1 or network_bandwidth_gbps <= 0:
        raise ValueError("gpus_per_node must be >= 1 and network_bandwidth_gbps > 0")
    ratio = clock_ratio(gpu, sm_clock_mhz)
    if not _valid_split(model, shape, gpus_per_node):
        return None
    cal = load_calibration() if calibration is None else calibration
    flops_per_second = gpu.peak_tflops * 1e12 * compute_efficiency(gpu, cal)
    nvlink = gpu.intra_node_bandwidth_gbps / 2 * 1e9  # link_bandwidth inside one node
    between = nvlink
    if shape.num_gpus > gpus_per_node:
        between = link_bandwidth(
            gpu,
            across_nodes=True,
            gpus_per_node=gpus_per_node,
            network_bandwidth_gbps=network_bandwidth_gbps,
            calibration=cal,
        )
    per_replica = model.global_batch_size // shape.data_parallel
    best: tuple[float, float, float] | None = None
    fits = False
    for mb in MICRO_BATCH_SIZES:
        if per_replica % mb:
            continue
        memory = memory_per_gpu_gib(model, shape, mb)
        if memory > gpu.memory_gib and (check_memory or fits):
            continue
        # Without the check, a micro-batch that fits still wins over any that doesn't: a shape
        # known to run keeps the operating point it was placed at (before, its fastest one,
        # over the memory, and a plan moving it was refused for memory it never needed).
        step, compute = _step(model, shape, ratio, mb, flops_per_second, nvlink, between)
        fitting = memory <= gpu.memory_gib
        if best is None or (fitting and not fits) or step < best[0]:
            best = (step, compute, memory)
            fits = fits or fitting
    if best is None:
        return None
    step, compute, memory = best
    activity = compute / step
    watts = shape.num_gpus * gpu_watts(gpu, sm_clock_mhz, activity, clock_model)
    return Estimate(
        samples_per_second=model.global_batch_size / step,
        watts=watts,
        memory_per_gpu_gib=memory,
        step_seconds=step,
        compute_fraction=activity,
    )


def rescale_clock(
    samples_per_second: float,
    watts: float,
    num_gpus: int,
    gpu: GpuType,
    from_clock_mhz: int,
    to_clock_mhz: int,
    compute_fraction: float = DEFAULT_COMPUTE_FRACTION,
    clock_model: ClockModel | None = None,
) -> tuple[float, float]:
    """Carry a throughput and power measured at one clock to another with the clock model.

    ``compute_fraction`` is the share of the step spent computing at ``from_clock_mhz``; only
    that share stretches by from / to. Each GPU's power changes by the model's difference
    between the two clocks and never drops below the GPU's idle power (or the measured power,
    when that is lower still).
    """
    return rescale_clocks(
        samples_per_second,
        watts,
        num_gpus,
        gpu,
        from_clock_mhz,
        [to_clock_mhz],
        compute_fraction,
        clock_model,
    )[0]


def rescale_clocks(
    samples_per_second: float,
    watts: float,
    num_gpus: int,
    gpu: GpuType,
    from_clock_mhz: int,
    to_clocks_mhz: Iterable[int],
    compute_fraction: float = DEFAULT_COMPUTE_FRACTION,
    clock_model: ClockModel | None = None,
) -> list[tuple[float, float]]:
    """``rescale_clock`` to each of several clocks, the measured clock's part computed once."""
    if num_gpus < 1:
        raise ValueError(f"num_gpus must be >= 1, got {num_gpus}")
    if not 0.0 <= compute_fraction <= 1.0:
        raise ValueError(f"compute_fraction must be in [0, 1], got {compute_fraction}")
    if samples_per_second <= 0 or watts <= 0:
        raise ValueError("samples_per_second and watts must be positive")
    m = clock_model or load_clock_model()
    x_from = clock_ratio(gpu, from_clock_mhz)
    per_gpu = watts / num_gpus
    watts_from = watts_at_ratio(gpu, x_from, compute_fraction, m)
    floor = min(per_gpu, gpu.idle_watts)
    out: list[tuple[float, float]] = []
    for to_clock_mhz in to_clocks_mhz:
        x_to = clock_ratio(gpu, to_clock_mhz)
        stretched = compute_fraction * x_from / x_to
        rel_step = stretched + (1.0 - compute_fraction)
        activity_to = stretched / rel_step  # in [0, 1] for a compute fraction in [0, 1]
        delta = watts_at_ratio(gpu, x_to, activity_to, m) - watts_from
        out.append((samples_per_second / rel_step, num_gpus * max(per_gpu + delta, floor)))
    return out


def interpolate_clock(
    points: Sequence[tuple[int, float, float]], to_clock_mhz: int
) -> tuple[float, float]:
    """(samples/s, watts) at ``to_clock_mhz``, linear between measured (clock, samples/s, watts).

    Raises ValueError outside the measured clocks (no extrapolation), for no points, or for
    one clock measured twice with different values.
    """
    if not points:
        raise ValueError("no measured points")
    by_clock: dict[int, tuple[float, float]] = {}
    for clock, sps, w in points:
        if by_clock.get(clock, (sps, w)) != (sps, w):
            raise ValueError(f"clock {clock} MHz measured twice with different values")
        by_clock[clock] = (sps, w)
    clocks = sorted(by_clock)
    if not clocks[0] <= to_clock_mhz <= clocks[-1]:
        raise ValueError(
            f"clock {to_clock_mhz} MHz is outside the measured {clocks[0]}-{clocks[-1]} MHz"
        )
    if to_clock_mhz in by_clock:
        return by_clock[to_clock_mhz]
    hi = next(c for c in clocks if c > to_clock_mhz)
    lo = max(c for c in clocks if c < to_clock_mhz)
    t = (to_clock_mhz - lo) / (hi - lo)
    (s0, w0), (s1, w1) = by_clock[lo], by_clock[hi]
    return s0 + t * (s1 - s0), w0 + t * (w1 - w0)
