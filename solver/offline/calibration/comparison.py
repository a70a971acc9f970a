"""Before and after the fit: the error per source, and what the service estimates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from solver.domain import GpuType
from solver.offline.calibration.efficiency import EfficiencyFit
from solver.offline.calibration.fit import Result
from solver.offline.calibration.gavel import PAIRS
from solver.offline.calibration.numeric import rel, stats
from solver.offline.calibration.sources import FAMILIES, POLLUX_GPU
from solver.perfmodel import throughput
from solver.perfmodel.catalog import load_gpu_catalog


def headline(
    r: Result, catalog: Mapping[str, GpuType], before: Mapping[str, float]
) -> list[dict[str, Any]]:
    """The error table per source: (source, what, before, after) with median/worst/points."""
    g, p, z = r.gavel, r.pollux, r.zeus
    d = p.data

    def eff_rows(fits: Iterable[EfficiencyFit]) -> tuple[dict[str, float], dict[str, float]]:
        pts = [(f, q) for f in fits for q in f.all_points]
        b = stats(
            rel(before[f.gpu_type] * catalog[f.gpu_type].peak_tflops, q.efficiency * q.peak_tflops)
            for f, q in pts
        )
        return b, stats(rel(f.value, q.efficiency) for f, q in pts)

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
            "before": stats(rel(g.ratio_before[q.pair], q.measured) for q in one),
            "after": stats(rel(q.model, q.measured) for q in one),
        },
        {
            "source": "Gavel",
            "what": "throughput ratio between types at 2, 4, 8 packed GPUs",
            "before": None,
            "after": stats(rel(q.model, q.measured) for q in g.ratios_n),
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
            "before": stats(p.step_before[across] / d.step[across] - 1),
            "after": stats(p.step_after[across] / d.step[across] - 1),
        },
        {
            "source": "Pollux",
            "what": "sync time, placements across nodes",
            "before": stats(p.sync_before[across] / d.sync[across] - 1),
            "after": stats(p.sync_after[across] / d.sync[across] - 1),
        },
        {
            "source": "Pollux",
            "what": "step time, placements on one node (not fitted)",
            "before": stats(p.step_before[~across] / d.step[~across] - 1),
            "after": stats(p.step_after[~across] / d.step[~across] - 1),
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
                "after": stats(np.concatenate(errors)),
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
    """``solver.perfmodel.throughput.estimate`` at the top clock, uncalibrated and with the fitted
    constants."""
    from solver.domain import Shape
    from solver.perfmodel.catalog import load_architectures

    catalog, archs = load_gpu_catalog(), load_architectures()
    fitted = throughput.Calibration(
        compute_efficiency={f.family: f.value for f in r.efficiency if f.used},
        network_efficiency={FAMILIES[POLLUX_GPU]: r.pollux.network_efficiency},
    )
    out = []
    for arch, gpu_name, dp, per_node, network in SERVICE_EXAMPLES:
        gpu = catalog[gpu_name]
        values = []
        for cal in (throughput.UNCALIBRATED, fitted):
            e = throughput.estimate(
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
