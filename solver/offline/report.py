"""``dsfro report``: tables and plots of a batch's results file (``solver.offline.batch``).

Writes to the output directory:

- ``summary.md`` / ``summary.csv``: per instance, backend and time budget: runs, failures,
  terminations, best and mean objective, mean gap, mean time to first and final plan;
  ``summary.md`` also lists the failed runs and shows the figures;
- ``runs.csv``: every run, one row each (the result line flattened);
- ``objective_gap.png``: objective and relative gap over the time budget, one line per backend,
  one row of panels per instance (means over seeds; the gap only where a bound was proven);
- ``time_size.png``: solve time (final plan: the solve's wall time; first plan: hollow markers)
  over instance size, log-log, size = installed GPUs x jobs;
- ``allocation.png``: GPUs by GPU type and job class, one panel per backend, from the runs at
  each backend's largest budget (summed over instances, mean over seeds). Needs results written
  with ``dsfro batch --store-allocation``; without them it is left out.

The plotting functions return matplotlib Figures (Agg canvas, no display needed).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from solver import extras
from solver.extras import new_figure
from solver.files import write_png, write_text
from solver.offline.batch import (
    TIMING_KEY,
    Record,
    ResultsFileError,
    format_errors,
    latest_by_key,
    read_results,
    summarize,
    summary_cells,
    summary_header,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE_LABEL = "instance size: GPUs x jobs"
MIN_SECONDS = 1e-4
"""Times below this are drawn at it (log axes)."""

RUN_COLUMNS = (
    "file",
    "instance",
    "sha256",
    "backend",
    "budget_s",
    "seed",
    "ok",
    "error_kind",
    "error_message",
    "termination",
    "backend_used",
    "objective",
    "throughput",
    "energy",
    "migration",
    "locality",
    "deadline",
    "bound",
    "gap",
    "gpus_used",
    "power_w",
    "jobs_running",
    "jobs_queued",
    "nodes",
    "gpus",
    "jobs",
    "configurations",
    "first_plan_s",
    "wall_s",
)


class ReportError(Exception):
    """An unusable results file: exit 2."""


def load_records(path: str | Path, warn: TextIO | None = None) -> list[Record]:
    """The latest line of each run of a results file (an unterminated last line is ignored)."""
    if not Path(path).is_file():
        raise ReportError(f"{path}: no such file")
    try:
        results = read_results(path)
    except (OSError, ResultsFileError) as e:
        raise ReportError(str(e)) from e
    if results.truncated and warn is not None:
        print(f"dsfro report: {path}: ignoring an incomplete last line", file=warn)
    return list(latest_by_key(results.records).values())


# ---------------------------------------------------------------- tables


def csv_cell(value: Any) -> str:
    """A value as a CSV cell: empty for None, true/false, floats exactly (repr)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def run_row(r: Record) -> list[str]:
    o = r.get("objective") or {}
    size = r.get("size") or {}
    error = r.get("error") or {}
    timing = r.get(TIMING_KEY) or {}
    values: dict[str, Any] = {
        **{k: r.get(k) for k in RUN_COLUMNS if k in r},
        "error_kind": error.get("kind"),
        "error_message": error.get("message"),
        "objective": o.get("total"),
        **{k: o.get(k) for k in ("throughput", "energy", "migration", "locality", "deadline")},
        **{k: size.get(k) for k in ("nodes", "gpus", "jobs")},
        "first_plan_s": timing.get("first_plan_s"),
        "wall_s": timing.get("wall_s"),
    }
    return [csv_cell(values.get(c)) for c in RUN_COLUMNS]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(_md_escape(h) for h in header) + " |"]
    lines.append("|" + "|".join(" --- " for _ in header) + "|")
    lines.extend("| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def write_tables(records: Sequence[Record], out: Path) -> list[Path]:
    """summary.csv and runs.csv; returns the paths written."""
    rows = summarize(records, by_budget=True)
    header = summary_header(rows)
    per_budget = "budget s" in header
    summary_csv = write_text(
        out / "summary.csv", csv_text(header, (summary_cells(r, per_budget) for r in rows))
    )
    runs_csv = write_text(out / "runs.csv", csv_text(RUN_COLUMNS, (run_row(r) for r in records)))
    return [summary_csv, runs_csv]


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A CSV table as text (the csv module's default dialect), for an atomic write."""
    buffer = io.StringIO()
    w = csv.writer(buffer)
    w.writerow(header)
    w.writerows(rows)
    return buffer.getvalue()


def summary_markdown(records: Sequence[Record], source: str, figures: Sequence[Path]) -> str:
    rows = summarize(records, by_budget=True)
    header = summary_header(rows)
    per_budget = "budget s" in header
    failed = [r for r in records if not r["ok"]]
    parts = [
        "# Batch report",
        "",
        f"Results: `{source}`: {len(records)} runs, {len(failed)} failed, "
        f"{len({r['instance'] for r in records})} instances, "
        f"backends {', '.join(sorted({str(r['backend']) for r in records}))}.",
        "",
        "Means are over seeds (and instances where several share a row); gaps only where a "
        "solver proved a bound; times are the solve's wall time (final plan) and the time to "
        "its first plan.",
        "",
        markdown_table(header, (summary_cells(r, per_budget) for r in rows)),
    ]
    if failed:
        parts += ["", "## Failed runs", "", "```", format_errors(records, limit=100), "```"]
    if figures:
        parts += ["", "## Figures", ""]
        parts += [f"![{p.stem}]({p.name})" for p in figures]
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------- plots


def _figure(width: float, height: float) -> Figure:
    return new_figure(width, height)  # matplotlib: the ``plot`` extra


def _ok(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if r.get("ok") and r.get("objective") is not None]


def _sorted_backends(records: Iterable[Record]) -> list[str]:
    return sorted({str(r["backend"]) for r in records})


def plot_objective_gap(records: Sequence[Record]) -> Figure:
    """Objective and relative gap over the time budget, per backend; a row per instance."""
    ok = _ok(records)
    instances = sorted({str(r["instance"]) for r in ok}) or ["(no results)"]
    backends = _sorted_backends(ok)
    fig = _figure(10, 2.8 * len(instances) + 0.6)
    from matplotlib.ticker import NullLocator  # present: _figure needs matplotlib

    axes = fig.subplots(len(instances), 2, squeeze=False)
    for row, instance in enumerate(instances):
        ax_obj, ax_gap = axes[row]
        budgets_seen: set[float] = set()
        for backend in backends:
            runs = [
                r
                for r in ok
                if r["instance"] == instance
                and r["backend"] == backend
                and r["budget_s"] is not None
            ]
            objective: dict[float, list[float]] = defaultdict(list)
            gap: dict[float, list[float]] = defaultdict(list)
            for r in runs:
                objective[r["budget_s"]].append(r["objective"]["total"])
                if r["gap"] is not None:
                    gap[r["budget_s"]].append(r["gap"])
            budgets_seen.update(objective)
            if objective:
                xs = sorted(objective)
                ax_obj.plot(
                    xs,
                    [sum(objective[x]) / len(objective[x]) for x in xs],
                    marker="o",
                    label=backend,
                )
            if gap:
                xs = sorted(gap)
                ax_gap.plot(
                    xs, [100 * sum(gap[x]) / len(gap[x]) for x in xs], marker="o", label=backend
                )
        ticks = sorted(budgets_seen)
        for ax in (ax_obj, ax_gap):
            if len(ticks) > 1 and ticks[0] > 0:
                ax.set_xscale("log")
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.set_xlabel("time budget (s)")
            ax.grid(True, alpha=0.3)
        gaps = [y for line in ax_gap.lines for y in line.get_ydata()]
        ax_gap.set_ylim(0, max([1.0, *(1.15 * float(g) for g in gaps)]))
        ax_obj.set_ylabel("objective")
        ax_obj.set_title(f"{instance}: objective (mean over seeds)")
        ax_gap.set_ylabel("relative gap (%)")
        ax_gap.set_title(f"{instance}: gap to the proven bound")
        if ax_obj.lines:
            ax_obj.legend(title="backend", fontsize="small")
        if ax_gap.lines:
            ax_gap.legend(title="backend", fontsize="small")
        else:
            ax_gap.text(
                0.5, 0.5, "no proven bound", ha="center", va="center", transform=ax_gap.transAxes
            )
    return fig


def instance_size(r: Record) -> int | None:
    """GPUs x jobs of a run's instance."""
    size = r.get("size") or {}
    if not size.get("gpus") or not size.get("jobs"):
        return None
    return int(size["gpus"]) * int(size["jobs"])


def plot_time_vs_size(records: Sequence[Record]) -> Figure:
    """Time to final plan (filled) and first plan (hollow) over instance size, log-log."""
    fig = _figure(7, 5)
    ax = fig.subplots()
    ok = _ok(records)
    markers = "osD^v<>pPX*h"
    for i, backend in enumerate(_sorted_backends(ok)):
        points: list[tuple[int, float, float | None]] = []
        for r in ok:
            size = instance_size(r)
            timing = r.get(TIMING_KEY) or {}
            if r["backend"] == backend and size is not None and timing.get("wall_s") is not None:
                points.append((size, timing["wall_s"], timing.get("first_plan_s")))
        if not points:
            continue
        color = f"C{i % 10}"
        marker = markers[i % len(markers)]
        ax.scatter(
            [p[0] for p in points],
            [max(p[1], MIN_SECONDS) for p in points],
            marker=marker,
            color=color,
            label=f"{backend}: final plan",
        )
        first = [p for p in points if p[2] is not None]
        ax.scatter(
            [p[0] for p in first],
            [max(p[2] or 0.0, MIN_SECONDS) for p in first],
            marker=marker,
            facecolors="none",
            edgecolors=color,
            label=f"{backend}: first plan",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(SIZE_LABEL)
    ax.set_ylabel("solve time (s)")
    ax.set_title("Solve time over instance size")
    ax.grid(True, which="both", alpha=0.3)
    if ax.collections:
        ax.legend(fontsize="small")
    return fig


def allocation_matrix(
    records: Sequence[Record], backend: str
) -> tuple[list[str], list[str], list[list[float]], float | None]:
    """(job classes, GPU types, GPUs[class][type], budget) for one backend: its runs at its
    largest budget with stored allocations, summed over instances, mean over seeds."""
    runs = [r for r in _ok(records) if r["backend"] == backend and r.get("allocation")]
    budgets = [r["budget_s"] for r in runs if r["budget_s"] is not None]
    budget = max(budgets) if budgets else None
    runs = [r for r in runs if r["budget_s"] == budget]
    per_instance: dict[str, int] = defaultdict(int)
    for r in runs:
        per_instance[r["file"]] += 1
    cells: dict[tuple[str, str], float] = defaultdict(float)
    for r in runs:
        for row in r["allocation"]["running"]:
            cells[(row["job_class"], row["gpu_type"])] += row["gpus"] / per_instance[r["file"]]
    classes = sorted(
        {c for c, _ in cells} | {c for r in runs for c in r["allocation"].get("queued", {})}
    )
    types = sorted({t for _, t in cells})
    matrix = [[cells.get((c, t), 0.0) for t in types] for c in classes]
    return classes, types, matrix, budget


def plot_allocation(records: Sequence[Record]) -> Figure | None:
    """Heatmap of GPUs by GPU type (columns) and job class (rows), a panel per backend; None
    without stored allocations."""
    backends = [
        b
        for b in _sorted_backends(_ok(records))
        if any(r.get("allocation") for r in records if r["backend"] == b)
    ]
    if not backends:
        return None
    data = {b: allocation_matrix(records, b) for b in backends}
    n_classes = max(len(d[0]) for d in data.values())
    n_types = max(len(d[1]) for d in data.values())
    fig = _figure(max(4.5, 1.1 * n_types + 3) * len(backends), max(3.5, 0.35 * n_classes + 1.8))
    axes = fig.subplots(1, len(backends), squeeze=False)[0]
    for ax, backend in zip(axes, backends, strict=True):
        classes, types, matrix, budget = data[backend]
        if types and classes:
            image = ax.imshow(matrix, aspect="auto", cmap="viridis")
            top = max((max(row) for row in matrix), default=0.0)
            for i, row in enumerate(matrix):
                for j, value in enumerate(row):
                    if value:
                        ax.text(
                            j,
                            i,
                            f"{value:g}",
                            ha="center",
                            va="center",
                            fontsize="small",
                            color="black" if value > 0.6 * top else "white",
                        )
            fig.colorbar(image, ax=ax, label="GPUs")
        ax.set_xticks(range(len(types)), types, rotation=30, ha="right")
        ax.set_yticks(range(len(classes)), classes)
        ax.set_xlabel("GPU type")
        ax.set_ylabel("job class")
        budget_text = "" if budget is None else f", budget {budget:g} s"
        ax.set_title(f"{backend}{budget_text}", fontsize="medium")
    fig.suptitle("GPUs by GPU type and job class (summed over instances, mean over seeds)")
    return fig


# ---------------------------------------------------------------- the report


def write_report(records: Sequence[Record], out: Path, source: str = "results") -> list[Path]:
    """Every table and figure into `out` (created); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = write_tables(records, out)
    figures: list[Path] = []
    for name, fig in (
        ("objective_gap.png", plot_objective_gap(records)),
        ("time_size.png", plot_time_vs_size(records)),
        ("allocation.png", plot_allocation(records)),
    ):
        if fig is None:
            continue
        path = out / name
        write_png(path, fig, dpi=120)
        figures.append(path)
    md = write_text(out / "summary.md", summary_markdown(records, source, figures))
    return [*written, md, *figures]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results", help="JSON Lines results file of `dsfro batch`")
    parser.add_argument(
        "--out", type=Path, default=Path("report"), help="output directory (default ./report)"
    )


def command(args: argparse.Namespace) -> int:
    """``dsfro report``: 0 written, 2 for an unusable results file."""
    if (why := extras.missing("plot", "the report's figures")) is not None:
        print(f"dsfro report: error: {why}", file=sys.stderr)
        return 2
    try:
        records = load_records(args.results, warn=sys.stderr)
    except ReportError as e:
        print(f"dsfro report: error: {e}", file=sys.stderr)
        return 2
    if not records:
        print(f"dsfro report: error: {args.results}: no results", file=sys.stderr)
        return 2
    try:
        paths = write_report(records, args.out, source=Path(args.results).name)
    except OSError as e:
        print(f"dsfro report: error: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0
