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

Power: ``solver.power.gpu_watts`` with the computing share of the step as activity.
docs/performance-model.md gives the derivation, the constants and their sources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from solver.domain import GpuType, ModelSpec, Shape
from solver.power import ClockModel, clock_ratio, gpu_watts

COMPUTE_EFFICIENCY: Mapping[str, float] = {"A100": 0.61, "H100": 0.42, "H200": 0.42, "V100": 0.30}
"""Achieved share of peak_tflops while computing, by GPU family (the name's prefix).

A100: median MFU of MPT-1B/3B/7B/13B at sequence 2048 on 8 A100-80GB (59.9, 62.1, 64.2, 59.6 %),
H100: median of MPT-1B/7B/13B at sequence 2048 on 8 H100-80GB BF16 (41.8, 46.4, 39.8 %), both
from the mosaicml/llm-foundry training benchmarks (scripts/train/benchmarking/README.md);
H200 (same GH100 die) assumed equal to H100. V100: 30 % of peak, the single-GPU baseline of
Shoeybi et al. 2019 (Megatron-LM, 39 TFLOP/s on a V100).
"""
DEFAULT_COMPUTE_EFFICIENCY = 0.30
"""Types without a published figure (K80, P100, T4, A10, L40S): the lowest cited value, V100's."""

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


def compute_efficiency(gpu: GpuType) -> float:
    """COMPUTE_EFFICIENCY of the GPU's family ("A100-80GB" -> "A100"), else the default."""
    name = gpu.name.upper()
    for family, eff in COMPUTE_EFFICIENCY.items():
        if name.startswith(family):
            return eff
    return DEFAULT_COMPUTE_EFFICIENCY


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
    gpu: GpuType,
    shape: Shape,
    ratio: float,
    micro_batch: int,
    gpus_per_node: int,
    network_bandwidth_gbps: float,
) -> tuple[float, float]:
    """(step seconds, computing seconds) of one configuration."""
    tp, pp, dp, n = (
        shape.tensor_parallel,
        shape.pipeline_parallel,
        shape.data_parallel,
        shape.num_gpus,
    )
    m = model.global_batch_size // dp // micro_batch
    tokens = model.global_batch_size * model.sequence_length
    peak = gpu.peak_tflops * 1e12 * compute_efficiency(gpu)
    compute = 6 * model.parameters * tokens / (n * peak) / ratio

    nvlink = gpu.intra_node_bandwidth_gbps / 2 * 1e9  # datasheet figure is bidirectional
    network = network_bandwidth_gbps / 8 * 1e9 / gpus_per_node  # a node's link, shared
    between = nvlink if n <= gpus_per_node else network
    message = ACTIVATION_BYTES * model.sequence_length * micro_batch * model.hidden_size

    tensor = 0.0
    if tp > 1:
        tensor = 4 * (model.layers / pp) * m * 2 * (tp - 1) / tp * message / nvlink
    p2p = 2 * m * message / between if pp > 1 else 0.0
    bubble = (pp - 1) / m * (compute + tensor)
    exposed = 0.0
    if dp > 1:
        grads = 2 * model.parameters / (tp * pp)
        allreduce = 2 * (dp - 1) / dp * grads / between
        exposed = max(0.0, allreduce - (2 / 3) * compute / m)
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
) -> Estimate | None:
    """Throughput, power and memory of ``model`` on ``shape`` at ``sm_clock_mhz``.

    ``check_memory=False`` estimates a shape that is known to run (a job's current allocation)
    even where the memory model, which assumes no activation recomputation, says it can't.

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
    per_replica = model.global_batch_size // shape.data_parallel
    best: tuple[float, float, float] | None = None
    for mb in MICRO_BATCH_SIZES:
        if per_replica % mb:
            continue
        memory = memory_per_gpu_gib(model, shape, mb)
        if check_memory and memory > gpu.memory_gib:
            continue
        step, compute = _step(model, gpu, shape, ratio, mb, gpus_per_node, network_bandwidth_gbps)
        if best is None or step < best[0]:
            best = (step, compute, memory)
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
    if num_gpus < 1:
        raise ValueError(f"num_gpus must be >= 1, got {num_gpus}")
    if not 0.0 <= compute_fraction <= 1.0:
        raise ValueError(f"compute_fraction must be in [0, 1], got {compute_fraction}")
    if samples_per_second <= 0 or watts <= 0:
        raise ValueError("samples_per_second and watts must be positive")
    x_from, x_to = clock_ratio(gpu, from_clock_mhz), clock_ratio(gpu, to_clock_mhz)
    stretched = compute_fraction * x_from / x_to
    rel_step = stretched + (1.0 - compute_fraction)
    activity_to = stretched / rel_step
    per_gpu = watts / num_gpus
    delta = gpu_watts(gpu, to_clock_mhz, activity_to, clock_model) - gpu_watts(
        gpu, from_clock_mhz, compute_fraction, clock_model
    )
    floor = min(per_gpu, gpu.idle_watts)
    return samples_per_second / rel_step, num_gpus * max(per_gpu + delta, floor)


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
