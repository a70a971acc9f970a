"""The Pollux section of docs/calibration.md: scaling, placements, the network efficiency."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from solver.offline.calibration.markdown import err, pct, table


def pollux_section(s: Mapping[str, Any], add: Callable[[str], None]) -> None:
    """The Pollux section, from the summary ``s``."""
    c = s["constants"]
    pol = s["pollux"]
    eta = pol["network_efficiency"]
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
        "weights), parameters as in `solver.offline.generate` (table above). "
        "BERT and YOLOv3 counts "
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
        "shared by its GPUs, as `solver.perfmodel.throughput` assumes for packed jobs). "
        "The model sees only "
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
        table(
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
        table(
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
                    err(v["step_before"]),
                    err(v["step_after"]),
                    err(v["sync_after"]),
                    err(v["sync_share_of_step_after"]),
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
        table(
            ["application", "rows", "step error", "sync error / step"],
            (
                [
                    a,
                    v["step_after"]["points"],
                    err(v["step_after"]),
                    err(v["sync_share_of_step_after"]),
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
        f"{pct(pol['by_class']['one node']['step_after']['median'])} median step error. "
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
