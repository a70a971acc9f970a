"""The analytic model (solver.perfmodel.throughput.estimate) over many (shape, clock) points
at once.

Configuration enumeration evaluates thousands of points per architecture and GPU type; numpy
does them in a few dozen array operations. Every formula repeats perf's arithmetic in the same
order (products and quotients left to right, the clock power law per distinct clock with
math.pow), so each point gets the same float as ``throughput.estimate``; perf stays the reference
and tests/test_configs.py compares the two point by point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from solver.domain import GpuType, ModelSpec
from solver.perfmodel import throughput
from solver.perfmodel.power import ClockModel, load_clock_model

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class GridEstimate:
    """throughput.Estimate's fields per point; where ``valid`` is False it has no estimate."""

    valid: BoolArray
    samples_per_second: FloatArray
    watts: FloatArray
    memory_per_gpu_gib: FloatArray


def estimate_grid(
    model: ModelSpec,
    gpu: GpuType,
    data_parallel: IntArray,
    tensor_parallel: IntArray,
    pipeline_parallel: IntArray,
    sm_clock_mhz: IntArray,
    check_memory: BoolArray,
    *,
    gpus_per_node: int,
    network_bandwidth_gbps: float,
    clock_model: ClockModel | None = None,
    calibration: throughput.Calibration | None = None,
) -> GridEstimate:
    """``throughput.estimate`` of every point i: shape (dp[i], tp[i], pp[i]) on ``gpu`` at clock[i],
    with the memory rule-out applied where check_memory[i]. Invalid splits and shapes with no
    micro-batch that fits are ``valid == False`` (perf returns None)."""
    dp, tp, pp = data_parallel, tensor_parallel, pipeline_parallel
    if min(dp.min(initial=1), tp.min(initial=1), pp.min(initial=1)) < 1:
        raise ValueError("parallel degrees must be >= 1")
    if gpus_per_node < 1 or network_bandwidth_gbps <= 0:
        raise ValueError("gpus_per_node must be >= 1 and network_bandwidth_gbps > 0")
    top = gpu.max_clock_mhz
    if sm_clock_mhz.size and not (sm_clock_mhz.min() > 0 and sm_clock_mhz.max() <= top):
        raise ValueError(f"SM clocks outside (0, {top}] MHz of {gpu.name}")
    cm = clock_model or load_clock_model()
    cal = throughput.load_calibration() if calibration is None else calibration

    B, s, h = model.global_batch_size, model.sequence_length, model.hidden_size
    a, layers, params = model.attention_heads, model.layers, model.parameters
    n = dp * tp * pp
    valid = (a % tp == 0) & (tp <= gpus_per_node) & (layers % pp == 0) & (B % dp == 0)
    ratio = sm_clock_mhz / top
    flops_per_second = gpu.peak_tflops * 1e12 * throughput.compute_efficiency(gpu, cal)
    nvlink = gpu.intra_node_bandwidth_gbps / 2 * 1e9
    network = throughput.link_bandwidth(
        gpu,
        across_nodes=True,
        gpus_per_node=gpus_per_node,
        network_bandwidth_gbps=network_bandwidth_gbps,
        calibration=cal,
    )
    between = np.where(n > gpus_per_node, network, nvlink)
    per_replica = B // dp
    tokens = B * s
    compute = 6 * params * tokens / (n * flops_per_second) / ratio
    state = throughput.BYTES_PER_PARAMETER * params / (tp * pp)
    layers_per_stage = layers / pp
    grads = 2 * params / (tp * pp)
    allreduce = 2 * (dp - 1) / dp * grads / between

    best_step = np.full(n.shape, np.inf)
    best_compute = np.zeros(n.shape)
    best_memory = np.zeros(n.shape)
    best_fits = np.zeros(n.shape, dtype=bool)
    for mb in throughput.MICRO_BATCH_SIZES:
        # throughput.memory_per_gpu_gib
        per_layer = s * mb * h * (34 + 5 * a * s / h) / tp
        micro_batches = per_replica // mb
        activations = per_layer * layers_per_stage * np.minimum(pp, micro_batches)
        memory = (state + activations) / throughput.GIB + throughput.FRAMEWORK_RESERVE_GIB
        # throughput._step; m >= 1 wherever the micro-batch size divides the replica's batch
        m = np.maximum(micro_batches, 1)
        # In floats: int64 wraps silently on huge (invalid) model sizes.
        message = throughput.ACTIVATION_BYTES * np.asarray(s, dtype=np.float64) * mb * h
        tensor = np.where(
            tp > 1, 4 * layers_per_stage * m * 2 * (tp - 1) / tp * message / nvlink, 0.0
        )
        p2p = np.where(pp > 1, 2 * m * message / between, 0.0)
        bubble = (pp - 1) / m * (compute + tensor)
        exposed = np.where(
            dp > 1, np.maximum(0.0, allreduce - throughput.BACKWARD_SHARE * (compute / m)), 0.0
        )
        step = compute + tensor + p2p + bubble + exposed
        # As throughput.estimate: a micro-batch that fits wins over any that doesn't, also
        # where the memory rule-out is off (a shape known to run).
        fitting = memory <= gpu.memory_gib
        usable = (per_replica % mb == 0) & ~((check_memory | best_fits) & ~fitting)
        # strict: the smallest size of equal steps
        better = usable & ((fitting & ~best_fits) | (step < best_step))
        best_step = np.where(better, step, best_step)
        best_compute = np.where(better, compute, best_compute)
        best_memory = np.where(better, memory, best_memory)
        best_fits = best_fits | (better & fitting)

    valid &= np.isfinite(best_step)
    step = np.where(valid, best_step, 1.0)
    activity = best_compute / step
    # power.gpu_watts, with the power law computed once per distinct clock
    clocks, where = np.unique(sm_clock_mhz, return_inverse=True)
    law = np.array([math.pow(int(c) / top, cm.alpha) for c in clocks], dtype=np.float64)
    dynamic = cm.dynamic_fraction * (gpu.tdp_watts - gpu.idle_watts)
    per_gpu = gpu.idle_watts + dynamic * activity * law[where.reshape(-1)].reshape(n.shape)
    return GridEstimate(
        valid=valid,
        samples_per_second=B / step,
        watts=n * per_gpu,
        memory_per_gpu_gib=best_memory,
    )
