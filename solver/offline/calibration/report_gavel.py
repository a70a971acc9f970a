"""The Gavel section of docs/calibration.md: compute efficiency and ratios across GPU types."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from solver.offline.calibration.markdown import err, pct, table


def _lower_bound(e: Mapping[str, Any], s: Mapping[str, Any]) -> float:
    """An FP32 efficiency as a share of the type's 16-bit peak: mixed precision is no slower."""
    value: float = e["value"] * e["peak_tflops"]
    return value / float(s["peak_tflops"][e["gpu_type"]]["catalog_16bit"])


def gavel_section(s: Mapping[str, Any], add: Callable[[str], None]) -> None:
    """The Gavel section, from the summary ``s``."""
    g = s["gavel"]
    ratio = g["ratios_1gpu"]
    vk = g["v100_over_k80_range_by_network"]
    v100s = g["per_gpu_scaling"]["v100"]
    add("## Gavel: compute efficiency and ratios across GPU types\n")
    add(
        "Data: `data/gavel/isolated_throughputs.csv`, steps/s of seven networks on K80, P100 "
        "and V100 at 1, 2, 4, 8 GPUs, packed on one server or spread. Gavel's `batch_size` is "
        "per GPU and its steps count every worker's iterations, so samples/s = steps/s x "
        "batch (as `solver.offline.generate` reads it). The catalog types are K80 (one GK210), "
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
        "`solver/offline/calibration/sources.py`: ResNet-18 for 32x32 CIFAR images "
        f"({s['mapping']['gavel/ResNet-18']['train_gflops_per_sample'] / 6:.3f} GMAC forward), "
        f"ResNet-50 at 224x224 ({gmac_r50:.3f} GMAC), the LM (2-layer LSTM 200/200, "
        "33,278-word decoder) at 35 tokens a sample. "
        "Gavel's Transformer (Multi30k sentence lengths unknown), Recommendation, A3C and "
        "CycleGAN have no established FLOP count: they enter the ratio comparison only.\n"
    )
    add(
        table(
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
        table(
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
                    err(e["error_fit"]),
                    err(e["error_all_batches"]),
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
        table(
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
                    f"{v['model_before']:.2f}, {err(v['error_before'])}",
                    f"{v['model_fp32']:.2f}, {err(v['error_fp32'])}",
                    err(v["error_fp32_largest_batch"]),
                    f"{v['bandwidth']:.2f}, {err(v['error_bandwidth'])}",
                ]
                for pair, v in ratio.items()
            ),
            "lrrrrr",
        )
        + "\n"
    )
    add("Error of the fitted (FP32) ratio per network, over the three pairs and every batch:\n")
    add(
        table(
            ["network", "points", "median / worst"],
            ([n, v["points"], err(v)] for n, v in g["ratio_error_by_network"].items()),
        )
        + "\n"
    )
    add(
        "ResNet-50 and CycleGAN, compute-heavy convolutional networks, follow the model "
        f"(median error {pct(g['ratio_error_by_network']['ResNet-50']['median'])} and "
        f"{pct(g['ratio_error_by_network']['CycleGAN']['median'])}). Recommendation (an "
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
        "compute (`solver.perfmodel.throughput`'s terms). Ratio errors at each count:\n"
    )
    add(
        table(
            ["GPUs", "points", "ratio error median / worst"],
            ([n, v["points"], err(v)] for n, v in g["ratio_error_by_gpus"].items()),
        )
        + "\n"
    )
    add(
        "The model's longest all-reduce takes "
        f"{g['model_communication']['longest_allreduce_ms']:.1f} ms (ResNet-50's gradients "
        "over PCIe at 8 GPUs) and mostly hides behind the backward pass (it exposes up to "
        f"{pct(g['model_communication']['largest_exposed_share'])} of a step only for the LM "
        "at its smallest batches), so its per-GPU throughput barely drops with the count. "
        "Measured per-GPU throughput relative to 1 GPU (median over workloads):\n"
    )
    add(
        table(
            ["type", "GPUs", "measured", "model", "error median / worst"],
            (
                [
                    gpu.upper(),
                    n,
                    f"{v['measured_median']:.3f}",
                    f"{v['model_median']:.3f}",
                    err(v["error"]),
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
