"""Every number of the report, as JSON (embedded in docs/calibration.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from solver.domain import GpuType
from solver.offline.calibration.comparison import headline, service_examples
from solver.offline.calibration.fit import Result
from solver.offline.calibration.gavel import (
    PAIRS,
    GavelResult,
    GavelWorkload,
    gavel_model_terms,
    pair_name,
)
from solver.offline.calibration.numeric import rel, stats
from solver.offline.calibration.pollux import fit_intra_efficiency, fit_network_efficiency
from solver.offline.calibration.sources import (
    FAMILIES,
    GAVEL_TYPES,
    GRADIENT_BYTES_PER_PARAMETER,
    POLLUX_GPU,
    PRECISION,
    mapping_summary,
    peaks_summary,
)
from solver.offline.generate import GAVEL_PARAMETERS, POLLUX_PARAMETERS
from solver.perfmodel import throughput
from solver.perfmodel.catalog import load_gpu_catalog


def _largest_batches(g: GavelResult) -> set[str]:
    """Labels of each network's largest batch (networks without a batch: their only run)."""
    best: dict[str, GavelWorkload] = {}
    for w in g.workloads:
        if w.network not in best or int(w.batch or 0) > int(best[w.network].batch or 0):
            best[w.network] = w
    return {w.label for w in best.values()}


def summary(r: Result) -> dict[str, Any]:
    """Every number of the report (rounded), as JSON: embedded in docs/calibration.md."""
    catalog = load_gpu_catalog()
    before = {f.gpu_type: throughput.cited_efficiency(catalog[f.gpu_type]) for f in r.efficiency}
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
                "error_fit": stats(f.errors(f.fit_points)),
                "error_all_batches": stats(f.errors(f.all_points)),
                "cited": before[f.gpu_type],
                "before": round(
                    before[f.gpu_type] * catalog[f.gpu_type].peak_tflops / f.peak_tflops, 4
                ),
                "error_before_all_batches": stats(
                    rel(
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
        ratios[pair_name(pair)] = {
            "measured_median": round(float(np.median([p.measured for p in one])), 3),
            "measured_range": [
                round(min(p.measured for p in one), 3),
                round(max(p.measured for p in one), 3),
            ],
            "model_before": round(g.ratio_before[pair], 3),
            "model_fp32": round(g.ratio_fp32[pair], 3),
            "bandwidth": round(g.ratio_bandwidth[pair], 3),
            "error_before": stats(rel(g.ratio_before[pair], p.measured) for p in one),
            "error_fp32": stats(rel(p.model, p.measured) for p in one),
            "error_bandwidth": stats(rel(g.ratio_bandwidth[pair], p.measured) for p in one),
        }
    by_network: dict[str, Any] = {}
    for net in sorted({p.network for p in g.ratios_1gpu}):
        pts = [p for p in g.ratios_1gpu if p.network == net]
        by_network[net] = stats(rel(p.model, p.measured) for p in pts)
    largest = _largest_batches(g)
    for pair in PAIRS:
        pts = [p for p in g.ratios_1gpu if p.pair == pair and p.workload in largest]
        ratios[pair_name(pair)]["error_fp32_largest_batch"] = stats(
            rel(p.model, p.measured) for p in pts
        )
    counts = {
        str(n): stats(rel(p.model, p.measured) for p in g.ratios_n if p.num_gpus == n)
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
                "error": stats(b / a - 1 for a, b in zip(measured, model, strict=True)),
            }
    p = r.pollux
    d = p.data
    classes = np.array(d.placement_class)
    apps = np.array(d.app)
    pol_classes: dict[str, Any] = {}
    for cls in ("one node", "packed", "spread"):
        m = classes == cls
        pol_classes[cls] = {
            "step_before": stats(p.step_before[m] / d.step[m] - 1),
            "step_after": stats(p.step_after[m] / d.step[m] - 1),
            "sync_after": stats(p.sync_after[m] / d.sync[m] - 1),
            "sync_share_of_step_after": stats((p.sync_after[m] - d.sync[m]) / d.step[m]),
            "sync_measured_median_s": round(float(np.median(d.sync[m])), 4),
        }
    pol_apps: dict[str, Any] = {}
    for app in sorted(set(d.app)):
        m = (apps == app) & d.across
        pol_apps[app] = {
            "step_after": stats(p.step_after[m] / d.step[m] - 1),
            "sync_share_of_step_after": stats((p.sync_after[m] - d.sync[m]) / d.step[m]),
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
            "time": stats(z.time_error[i]),
            "power": stats(z.power_error[i]),
            "energy": stats(z.energy_error[i]),
        }
        for i, name in enumerate(z.gpus)
    }
    zeus_all = {
        key: stats(np.concatenate(arrs))
        for key, arrs in (
            ("time", z.time_error),
            ("power", z.power_error),
            ("energy", z.energy_error),
        )
    }
    used_eff = {f.family: f.value for f in r.efficiency if f.used}
    return {
        "mapping": mapping_summary(),
        "peak_tflops": peaks_summary(),
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
                    throughput.allreduce_seconds(
                        GRADIENT_BYTES_PER_PARAMETER * POLLUX_PARAMETERS["bert"],
                        2,
                        t4.intra_node_bandwidth_gbps / 2 * 1e9,
                    )
                )
                * 1000,
                1,
            ),
            "bert_backward_s": [
                round(throughput.BACKWARD_SHARE * min(bert_compute), 2),
                round(throughput.BACKWARD_SHARE * max(bert_compute), 2),
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
        "headline": headline(r, catalog, before),
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


OVERLAP_SENSITIVITY = (0.0, 0.5, throughput.BACKWARD_SHARE, 0.8, 1.0)
"""Overlap shares at which the network efficiency is refitted, to show the fit's sensitivity."""


def _round_pair(pair: tuple[float, float]) -> tuple[float, float]:
    return round(pair[0], 3), round(pair[1], 4)
