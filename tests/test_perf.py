"""The analytic performance model: values, rule-outs, clock behaviour, profile helpers."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from solver.domain import GpuType, ModelSpec, Shape
from solver.perfmodel.catalog import load_architectures, load_gpu_catalog
from solver.perfmodel.power import gpu_watts
from solver.perfmodel.throughput import (
    DEFAULT_COMPUTE_EFFICIENCY,
    DEFAULT_COMPUTE_FRACTION,
    FRAMEWORK_RESERVE_GIB,
    GIB,
    UNCALIBRATED,
    Calibration,
    Estimate,
    allreduce_seconds,
    cited_efficiency,
    compute_efficiency,
    estimate,
    exposed_sync_seconds,
    interpolate_clock,
    link_bandwidth,
    memory_per_gpu_gib,
    network_efficiency,
    rescale_clock,
)

ROOT = Path(__file__).resolve().parent.parent
GPUS = load_gpu_catalog()
ARCHS = load_architectures()
A100 = GPUS["A100-80GB"]
GPT13 = ARCHS["gpt3-1.3b"]


def run(
    model: ModelSpec,
    gpu: GpuType,
    dp: int,
    tp: int = 1,
    pp: int = 1,
    clock: int | None = None,
    *,
    per_node: int = 8,
    network: float = 200.0,
) -> Estimate | None:
    return estimate(
        model,
        gpu,
        Shape(gpu.name, dp, tp, pp),
        clock or gpu.max_clock_mhz,
        gpus_per_node=per_node,
        network_bandwidth_gbps=network,
    )


def must(e: Estimate | None) -> Estimate:
    assert e is not None
    return e


def test_gpt3_xl_on_eight_a100_is_compute_bound_at_the_cited_efficiency() -> None:
    e = must(run(GPT13, A100, 8))
    tokens = GPT13.global_batch_size * GPT13.sequence_length
    compute = 6 * GPT13.parameters * tokens / (8 * 312e12 * 0.61)
    # The gradient all-reduce (2.6 GB over NVLink) hides behind the last backward pass.
    assert e.step_seconds == pytest.approx(compute, rel=1e-12)
    assert e.samples_per_second == pytest.approx(512 / compute, rel=1e-12)
    assert e.compute_fraction == pytest.approx(1.0)
    per_gpu_tokens = e.samples_per_second * GPT13.sequence_length / 8
    assert 20_000 < per_gpu_tokens < 26_000  # llm-foundry measured 20.5k for MPT-1B
    assert e.watts == pytest.approx(8 * gpu_watts(A100, 1410, 1.0))
    assert 8 * A100.idle_watts < e.watts < 8 * A100.tdp_watts


def test_memory_formula() -> None:
    shape = Shape(A100.name, 8, 1, 1)
    per_layer = 2048 * 2048 * (34 + 5 * 16 * 2048 / 2048)
    state = 16 * 1.3e9
    expected = (state + per_layer * 24 * 1) / GIB + FRAMEWORK_RESERVE_GIB
    assert memory_per_gpu_gib(GPT13, shape, 1) == pytest.approx(expected)
    shape = Shape(A100.name, 1, 2, 4)  # 512 micro-batches, 4 in flight, 6 layers a stage
    expected = (state / 8 + per_layer / 2 * 6 * 4) / GIB + FRAMEWORK_RESERVE_GIB
    assert memory_per_gpu_gib(GPT13, shape, 1) == pytest.approx(expected)
    assert must(run(GPT13, A100, 1, 2, 4)).memory_per_gpu_gib == pytest.approx(expected)


def test_memory_rules_out() -> None:
    assert run(ARCHS["llama2-70b"], A100, 1) is None
    v100 = GPUS["V100-16GB"]
    assert run(GPT13, v100, 8) is None  # 19.4 GiB of model state alone
    assert run(GPT13, v100, 2, 2, 2) is not None
    # Without activation recomputation a 70B model needs more than 80 GB per GPU.
    assert run(ARCHS["llama2-70b"], A100, 4, 8, 4) is None
    assert run(ARCHS["llama2-70b"], GPUS["H200"], 4, 8, 4) is not None


def test_a_shape_known_to_run_keeps_the_micro_batch_that_fits() -> None:
    """Without the memory rule-out (a running job's own shape), a micro-batch that fits still
    wins: gpt3-1.3b at 8 x 2 x 1 on an A100-40GB runs at 33.1 GiB a GPU, as when it was
    placed. Before, the fastest size was taken whatever its memory (54.4 GiB on a 40 GB GPU):
    a running job looked faster than the same shape elsewhere, and a baseline that restarted it
    in that shape on other GPUs was refused for memory it never needed."""
    def at_top(spec: ModelSpec, gpu: GpuType, shape: Shape, check: bool) -> Estimate | None:
        clock = gpu.max_clock_mhz
        return estimate(
            spec, gpu, shape, clock, gpus_per_node=8, network_bandwidth_gbps=200.0,
            check_memory=check,
        )  # fmt: skip

    a40 = GPUS["A100-40GB"]
    kept = at_top(GPT13, a40, Shape(a40.name, 8, 2, 1), False)
    assert kept == at_top(GPT13, a40, Shape(a40.name, 8, 2, 1), True) and kept is not None
    assert kept.memory_per_gpu_gib == pytest.approx(33.06, abs=0.01)
    # Where nothing fits, the shape still runs (it does), at its fastest size.
    over = at_top(ARCHS["llama2-70b"], A100, Shape(A100.name, 4, 8, 4), False)
    assert over is not None and over.memory_per_gpu_gib > A100.memory_gib


@pytest.mark.parametrize(
    ("arch", "dp", "tp", "pp", "per_node"),
    [
        ("gpt2-xl", 1, 2, 1, 8),  # 25 heads
        ("gpt3-1.3b", 1, 8, 1, 4),  # tensor group larger than a node
        ("gpt3-1.3b", 1, 1, 5, 8),  # 24 layers
        ("gpt3-1.3b", 3, 1, 1, 8),  # global batch 512
    ],
)
def test_invalid_splits(arch: str, dp: int, tp: int, pp: int, per_node: int) -> None:
    assert run(ARCHS[arch], A100, dp, tp, pp, per_node=per_node) is None


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="shape is for"):
        estimate(GPT13, A100, Shape("T4", 1, 1, 1), 1410, gpus_per_node=8, network_bandwidth_gbps=1)
    with pytest.raises(ValueError, match="outside"):
        run(GPT13, A100, 8, clock=1500)
    with pytest.raises(ValueError, match="gpus_per_node"):
        run(GPT13, A100, 8, per_node=0)


def test_lower_clock_is_slower_and_draws_less() -> None:
    for shape in ((8, 1, 1), (2, 2, 2), (1, 8, 1)):
        es = [must(run(GPT13, A100, *shape, clock=c)) for c in A100.sm_clocks_mhz]
        for lo, hi in pairwise(es):
            assert lo.samples_per_second < hi.samples_per_second
            assert lo.watts < hi.watts


def test_energy_per_sample_is_lowest_below_the_top_clock() -> None:
    """The Zeus finding: for a compute-bound job the energy-optimal clock is an inner one."""
    clocks = A100.sm_clocks_mhz
    energy = [
        e.watts / e.samples_per_second for e in (must(run(GPT13, A100, 8, clock=c)) for c in clocks)
    ]
    best = clocks[energy.index(min(energy))]
    assert clocks[0] < best < clocks[-1]
    assert min(energy) < 0.9 * energy[-1]


def test_communication_costs() -> None:
    single = must(run(GPT13, A100, 8))
    two_nodes = must(run(GPT13, A100, 16))
    assert two_nodes.samples_per_second / 16 < single.samples_per_second / 8
    assert two_nodes.compute_fraction < single.compute_fraction
    faster_net = must(run(GPT13, A100, 16, network=800.0))
    assert two_nodes.samples_per_second < faster_net.samples_per_second
    tensor = must(run(GPT13, A100, 1, 8))
    pipeline = must(run(GPT13, A100, 1, 1, 8))
    assert tensor.samples_per_second < pipeline.samples_per_second < single.samples_per_second
    # PCIe tensor parallelism costs more than NVLink's.
    l40s = GPUS["L40S"]
    assert (
        must(run(GPT13, l40s, 2, 4)).compute_fraction
        < must(run(GPT13, A100, 2, 4)).compute_fraction
    )


def test_efficiency_by_family() -> None:
    assert compute_efficiency(A100) == 0.61
    assert compute_efficiency(GPUS["H200"]) == 0.42
    other = GpuType("H100-SXM", 80, 989, 3350, 900, 700, 70, (1980,))
    assert compute_efficiency(other) == 0.42
    # Fitted families (models/calibration.json) replace the cited value or the default.
    fitted = json.loads((ROOT / "models" / "calibration.json").read_text())["compute_efficiency"]
    assert compute_efficiency(GPUS["T4"]) == fitted["T4"] != DEFAULT_COMPUTE_EFFICIENCY
    assert compute_efficiency(GPUS["K80"]) == fitted["K80"]
    assert cited_efficiency(GPUS["T4"]) == DEFAULT_COMPUTE_EFFICIENCY
    assert compute_efficiency(GPUS["T4"], UNCALIBRATED) == DEFAULT_COMPUTE_EFFICIENCY
    assert compute_efficiency(GPUS["P100-16GB"]) == DEFAULT_COMPUTE_EFFICIENCY
    assert compute_efficiency(GPUS["V100-32GB"]) == 0.30
    # A family is a token the name starts with, not followed by a digit (A10 is not an A1;
    # solver.perfmodel.families); the longest wins.
    families = {"A1": 0.1, "A10": 0.2, "A100": 0.5}
    cal = Calibration(compute_efficiency=families, network_efficiency={})
    assert compute_efficiency(A100, cal) == 0.5
    assert compute_efficiency(GPUS["A10"], cal) == 0.2
    only_a1 = Calibration(compute_efficiency={"A1": 0.1}, network_efficiency={})
    assert compute_efficiency(GPUS["A10"], only_a1) == DEFAULT_COMPUTE_EFFICIENCY


def test_network_efficiency_scales_the_cross_node_all_reduce() -> None:
    t4, bert = GPUS["T4"], ARCHS["bert-large"]
    full = Calibration(compute_efficiency={}, network_efficiency={})
    slow = Calibration(compute_efficiency={}, network_efficiency={"T4": 0.25})
    assert network_efficiency(t4, full) == 1.0 and network_efficiency(t4, slow) == 0.25
    assert network_efficiency(A100, slow) == 1.0

    def t4_estimate(dp: int, cal: Calibration) -> Estimate:
        shape = Shape("T4", dp, 1, 1)
        return must(
            estimate(
                bert,
                t4,
                shape,
                1590,
                gpus_per_node=4,
                network_bandwidth_gbps=50.0,
                calibration=cal,
            )
        )

    assert t4_estimate(8, slow).step_seconds > t4_estimate(8, full).step_seconds
    # Inside one node the network is not used.
    assert t4_estimate(4, slow) == t4_estimate(4, full)
    assert link_bandwidth(
        t4, across_nodes=True, gpus_per_node=4, network_bandwidth_gbps=50.0, calibration=slow
    ) == pytest.approx(0.25 * 50e9 / 8 / 4)
    assert link_bandwidth(
        t4, across_nodes=False, gpus_per_node=4, network_bandwidth_gbps=50.0, calibration=slow
    ) == pytest.approx(16e9)


def test_ring_allreduce_and_overlap() -> None:
    assert allreduce_seconds(1e9, 1, 1e9) == 0.0
    assert allreduce_seconds(1e9, 2, 1e9) == pytest.approx(1.0)
    assert allreduce_seconds(1e9, 8, 1e9) == pytest.approx(1.75)
    assert exposed_sync_seconds(1.0, 0.9) == pytest.approx(0.4)
    assert exposed_sync_seconds(1.0, 3.0) == 0.0


# ---------------------------------------------------------------- profiles


def test_default_compute_fraction_is_the_fitted_median() -> None:
    fit = json.loads((ROOT / "models" / "clock_model.json").read_text())
    assert fit["compute_fraction"]["median"] == DEFAULT_COMPUTE_FRACTION


def test_rescale_reproduces_the_model() -> None:
    top, low = must(run(GPT13, A100, 8)), must(run(GPT13, A100, 8, clock=900))
    sps, watts = rescale_clock(
        top.samples_per_second, top.watts, 8, A100, 1410, 900, top.compute_fraction
    )
    assert sps == pytest.approx(low.samples_per_second, rel=1e-9)
    assert watts == pytest.approx(low.watts, rel=1e-9)
    # With a pipeline the bubble also stretches with the clock: agreement within 1 %.
    top, low = must(run(GPT13, A100, 2, 2, 2)), must(run(GPT13, A100, 2, 2, 2, clock=900))
    sps, watts = rescale_clock(
        top.samples_per_second, top.watts, 8, A100, 1410, 900, top.compute_fraction
    )
    assert sps == pytest.approx(low.samples_per_second, rel=0.01)
    assert watts == pytest.approx(low.watts, rel=0.01)


def test_rescale_values() -> None:
    assert rescale_clock(10.0, 2000.0, 8, A100, 1410, 1410) == pytest.approx((10.0, 2000.0))
    sps, watts = rescale_clock(10.0, 2000.0, 8, A100, 1410, 705, compute_fraction=0.5)
    assert sps == pytest.approx(10.0 / 1.5)
    delta = gpu_watts(A100, 705, 1 / 1.5) - gpu_watts(A100, 1410, 0.5)
    assert watts == pytest.approx(2000.0 + 8 * delta)
    assert rescale_clock(10.0, 2000.0, 8, A100, 1410, 705, compute_fraction=0.0)[0] == 10.0
    # Never below the idle power of the GPUs.
    assert rescale_clock(10.0, 8 * 80.0, 8, A100, 1410, 210)[1] >= 8 * A100.idle_watts
    with pytest.raises(ValueError, match="outside"):
        rescale_clock(10.0, 2000.0, 8, A100, 1410, 1500)
    with pytest.raises(ValueError, match="compute_fraction"):
        rescale_clock(10.0, 2000.0, 8, A100, 1410, 705, compute_fraction=1.5)


def test_rescale_lower_clock_lowers_both() -> None:
    prev = (10.0, 3000.0)
    for c in reversed(A100.sm_clocks_mhz[:-1]):
        cur = rescale_clock(10.0, 3000.0, 8, A100, 1410, c)
        assert cur[0] < prev[0] and cur[1] < prev[1]
        prev = cur


def test_interpolate_clock() -> None:
    pts = [(1410, 100.0, 3000.0), (1000, 80.0, 2000.0), (1200, 90.0, 2500.0)]
    assert interpolate_clock(pts, 1100) == pytest.approx((85.0, 2250.0))
    assert interpolate_clock(pts, 1305) == pytest.approx((95.0, 2750.0))
    assert interpolate_clock(pts, 1000) == (80.0, 2000.0)
    assert interpolate_clock([(1410, 1.0, 2.0)], 1410) == (1.0, 2.0)
    with pytest.raises(ValueError, match="outside"):
        interpolate_clock(pts, 990)
    with pytest.raises(ValueError, match="outside"):
        interpolate_clock(pts, 1425)
    with pytest.raises(ValueError, match="no measured"):
        interpolate_clock([], 1000)
    with pytest.raises(ValueError, match="twice"):
        interpolate_clock([*pts, (1000, 81.0, 2000.0)], 1100)
