"""The output files of a sweep: ``<prefix>.png`` (the figure), ``<prefix>.md`` (the points and
the changes along the front) and ``<prefix>.csv`` (one row per point)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from solver.app.profile import WEIGHT_KEYS
from solver.files import write_png, write_text
from solver.offline.report import csv_text, markdown_table
from solver.offline.sweep.figure import plot_sweep
from solver.offline.sweep.front import same_place
from solver.offline.sweep.grid import SweepPoint
from solver.offline.sweep.run import SweepOutcome

CSV_HEADER = (
    "point",
    *WEIGHT_KEYS,
    "termination",
    "objective",
    "throughput_normalised",
    "power_w",
    "gpus_used",
    "jobs_running",
    "on_front",
    "same_as",
    "error",
)


def _same_as(points: Sequence[SweepPoint], i: int) -> str:
    p = points[i]
    for q in points[:i]:
        if q.placed and p.placed and same_place(p, q):
            return f"#{q.index}"
    return ""


def csv_rows(outcome: SweepOutcome) -> list[list[str]]:
    front = set(outcome.front)
    rows = []
    for i, p in enumerate(outcome.points):
        rows.append(
            [
                str(p.index),
                *(repr(p.weights[k]) if k in p.weights else "" for k in WEIGHT_KEYS),
                p.termination,
                repr(p.objective),
                repr(p.throughput),
                repr(p.power_w),
                str(p.gpus_used),
                str(sum(1 for j in p.jobs if j.state == "RUNNING")),
                "yes" if i in front else "no",
                _same_as(outcome.points, i),
                p.error or "",
            ]
        )
    return rows


def sweep_markdown(outcome: SweepOutcome, figure_name: str) -> str:
    points = outcome.points
    front = set(outcome.front)
    swept = list(points[0].swept) if points else []
    header = [
        "point",
        *swept,
        "termination",
        "objective",
        "throughput (norm.)",
        "power (W)",
        "GPUs",
        "front",
    ]
    rows = []
    for i, p in enumerate(points):
        same = _same_as(points, i)
        mark = "yes" if i in front else (f"same as {same}" if same else "no")
        if p.error:
            mark = f"error: {p.error}"
        rows.append(
            [
                f"#{p.index}",
                *(f"{p.swept[k]:g}" for k in swept),
                p.termination or "-",
                f"{p.objective:.6g}",
                f"{p.throughput:.4f}",
                f"{p.power_w:.0f}",
                str(p.gpus_used),
                mark,
            ]
        )
    parts = [
        f"# {outcome.title or 'Weight sweep'}",
        "",
        f"![trade-off]({figure_name})",
        "",
        "Throughput is `sum_j w_j u_j / sum_j w_j` (1: every job at its best speed); power is "
        "the watts of the running jobs. The front is the set of plans no other plan beats in "
        "both.",
        "",
        "## Points",
        "",
        markdown_table(header, rows),
        "",
        "## Changes along the front (lowest power first)",
        "",
    ]
    if outcome.changes:
        parts.append(
            markdown_table(
                ["step", "job", "state", "GPU type", "dp x tp x pp", "clock (MHz)"],
                (c.cells() for c in outcome.changes),
            )
        )
    elif len(outcome.front) < 2:
        parts.append("The front has a single plan: no changes.")
    else:
        parts.append("Neighbouring plans differ only in placement.")
    return "\n".join(parts) + "\n"


def write_outputs(outcome: SweepOutcome, out: Path, prefix: str = "sweep") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    png, md, table = out / f"{prefix}.png", out / f"{prefix}.md", out / f"{prefix}.csv"
    write_png(png, plot_sweep(outcome), dpi=120)
    write_text(md, sweep_markdown(outcome, png.name))
    write_text(table, csv_text(CSV_HEADER, csv_rows(outcome)))
    return [png, md, table]
