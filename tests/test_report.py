"""dsfro report: tables and figures from a results file (figures checked as objects)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from solver.offline import commands as offline_cli
from solver.offline import report
from solver.offline.batch import BatchConfig, run_batch

ROOT = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tiny instances x heuristic, auto x two budgets, with allocations, plus a bad file."""
    d = tmp_path_factory.mktemp("report")
    inputs = d / "instances"
    inputs.mkdir()
    for name in ("tiny-1node.json", "tiny-power.json"):
        shutil.copy(ROOT / "instances" / name, inputs / name)
    (inputs / "broken.json").write_text("{")
    out = d / "results.jsonl"
    run_batch(
        BatchConfig(
            inputs=[str(inputs)],
            out=out,
            backends=["heuristic", "auto"],
            budgets=[0.25, 0.5],
            seeds=[1],
            workers=1,
            allocation_mode="name",
        )
    )
    return out


def records(path: Path) -> list[dict[str, Any]]:
    return report.load_records(path)


def test_report_writes_tables_and_figures(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert offline_cli.main(["report", str(results), "--out", str(out)]) == 0
    for name in ("summary.md", "summary.csv", "runs.csv"):
        assert (out / name).stat().st_size > 0
    for name in ("objective_gap.png", "time_size.png", "allocation.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 1000
    md = (out / "summary.md").read_text()
    assert "| tiny-power | auto | 0.5 |" in md
    assert "## Failed runs" in md and "malformed JSON" in md
    assert "![allocation](allocation.png)" in md
    with (out / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12
    assert {r["ok"] for r in rows} == {"true", "false"}
    with (out / "summary.csv").open() as f:
        summary = list(csv.DictReader(f))
    assert {(r["instance"], r["backend"], r["budget s"]) for r in summary} >= {
        ("tiny-1node", "heuristic", "0.25"),
        ("tiny-power", "auto", "0.5"),
    }


def test_objective_and_gap_figure(results: Path) -> None:
    fig = report.plot_objective_gap(records(results))
    axes = fig.axes
    assert len(axes) == 4  # two instances x (objective, gap)
    assert [a.get_xlabel() for a in axes] == ["time budget (s)"] * 4
    assert [a.get_ylabel() for a in axes] == ["objective", "relative gap (%)"] * 2
    objective_lines = {line.get_label() for line in axes[0].get_lines()}
    assert objective_lines == {"auto", "heuristic"}
    gap_lines = {line.get_label() for line in axes[1].get_lines()}
    assert gap_lines == {"auto", "heuristic"}  # the heuristic reports the aggregated LP's bound
    (auto,) = [line for line in axes[0].get_lines() if line.get_label() == "auto"]
    assert np.asarray(auto.get_xdata()).tolist() == [0.25, 0.5]
    assert axes[0].get_xscale() == "log"


def test_time_over_size_figure_is_log_log(results: Path) -> None:
    fig = report.plot_time_vs_size(records(results))
    (ax,) = fig.axes
    assert ax.get_xlabel() == report.SIZE_LABEL == "instance size: GPUs x jobs"
    assert ax.get_ylabel() == "solve time (s)"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    sizes = {float(x) for c in ax.collections for x in np.asarray(c.get_offsets())[:, 0]}
    assert sizes == {8 * 3, 8 * 1}  # tiny-1node: 8 GPUs x 3 jobs; tiny-power: 8 x 1


def test_allocation_heatmap(results: Path) -> None:
    recs = records(results)
    classes, types, matrix, budget = report.allocation_matrix(recs, "auto")
    assert budget == 0.5
    assert types == ["A100-80GB", "V100-16GB"]
    cells = {(c, t): matrix[i][j] for i, c in enumerate(classes) for j, t in enumerate(types)}
    assert cells[("resnet-50", "V100-16GB")] == 4
    assert cells[("gpt3-1.3b", "A100-80GB")] == 8
    assert "lm" in classes  # queued everywhere: a row of zeros
    fig = report.plot_allocation(recs)
    assert fig is not None
    panels = [a for a in fig.axes if a.get_xlabel() == "GPU type"]
    assert len(panels) == 2
    assert {a.get_ylabel() for a in panels} == {"job class"}


def test_no_heatmap_without_stored_allocations(results: Path, tmp_path: Path) -> None:
    recs = [{k: v for k, v in r.items() if k != "allocation"} for r in records(results)]
    assert report.plot_allocation(recs) is None
    paths = report.write_report(recs, tmp_path / "out")
    assert not (tmp_path / "out" / "allocation.png").exists()
    assert len(paths) == 5


def test_an_incomplete_last_line_is_ignored(results: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    data = results.read_bytes()
    cut.write_bytes(data + data[:50])  # a crash mid-line
    assert len(records(cut)) == len(records(results))


def test_unusable_results_exit_2(tmp_path: Path) -> None:
    assert offline_cli.main(["report", str(tmp_path / "missing.jsonl")]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n" + json.dumps({"schema": 1}) + "\n")
    assert offline_cli.main(["report", str(bad), "--out", str(tmp_path / "r")]) == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert offline_cli.main(["report", str(empty), "--out", str(tmp_path / "r")]) == 2
