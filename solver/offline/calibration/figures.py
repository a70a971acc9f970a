"""The report's figures (matplotlib, imported only when a figure is made)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from solver.extras import new_figure
from solver.files import write_png
from solver.offline.calibration.fit import Result
from solver.offline.calibration.gavel import PAIRS, pair_name
from solver.offline.calibration.sources import GAVEL_TYPES, POLLUX_GPUS_PER_NODE
from solver.offline.generate import packed_placement

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
    return new_figure(width, height)  # matplotlib: the ``plot`` extra


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
        ax.set_title(f"{pair_name(pair)} at 1 GPU")
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
        write_png(path, fig, dpi=dpi, metadata={"Software": None})
        out.append(path)
    return out
