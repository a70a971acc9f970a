"""The calibration: reproducible fits, the report's numbers, the figures, the service's use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

from solver.domain import Shape
from solver.offline import calibration
from solver.offline.calibration import Result
from solver.perfmodel import throughput
from solver.perfmodel.catalog import (
    MODELS_DIR_ENV,
    CatalogError,
    load_architectures,
    load_gpu_catalog,
)

ROOT = Path(__file__).resolve().parent.parent
MODELS_FILE = ROOT / "models" / "calibration.json"
DOC = ROOT / "docs" / "calibration.md"


@pytest.fixture(scope="module")
def result() -> Result:
    return calibration.run()


@pytest.fixture(scope="module")
def summary(result: Result) -> dict[str, Any]:
    return calibration.summary(result)


@pytest.fixture(scope="module")
def figures(result: Result) -> dict[str, Figure]:
    return calibration.make_figures(result)


def assert_close(got: object, want: object, where: str = "") -> None:
    """Equal structure; numbers within what the last printed digit can move."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for k in want:
            assert_close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        if np.isnan(want):
            assert isinstance(got, float) and np.isnan(got), where
        else:
            assert got == pytest.approx(want, abs=2e-3, rel=1e-3), where
    else:
        assert got == want, where


# ---------------------------------------------------------------- reproducible


def test_refit_gives_the_constants_of_the_models_file(
    result: Result, summary: dict[str, Any]
) -> None:
    stored = json.loads(MODELS_FILE.read_text())
    fresh = calibration.calibration_doc(result, summary)
    assert_close(fresh, stored)
    assert set(stored["compute_efficiency"]) == {"K80", "T4"}
    assert 0.05 < stored["compute_efficiency"]["T4"] < 0.15
    assert 0.1 < stored["compute_efficiency"]["K80"] < 0.3
    assert 0.2 < stored["network_efficiency"]["T4"] < 0.5
    # Provenance: data, method and error of every fit.
    for fit in stored["fits"]["compute_efficiency"]["fits"]:
        assert fit["data"].startswith("data/") and "error_fit" in fit
    net = stored["fits"]["network_efficiency"]
    assert net["data"].startswith("data/pollux") and net["method"] and net["error"]


def test_the_clock_constants_are_the_clock_model_file(summary: dict[str, Any]) -> None:
    clock = json.loads((ROOT / "models" / "clock_model.json").read_text())
    assert summary["constants"]["alpha"] == clock["alpha"]
    for key in ("time", "power"):
        overall = clock["overall"][f"{key}_relative_error"]
        assert summary["zeus"]["all"][key]["median"] == pytest.approx(overall["median"], abs=1e-3)
        assert summary["zeus"]["all"][key]["worst"] == pytest.approx(overall["worst"], abs=1e-3)


def test_flop_counts_match_the_published_figures() -> None:
    # torchvision ResNet-50 at 224x224: 4.09 GMAC; CIFAR ResNet-18 (kuangliu): 0.56 GMAC.
    resnet50, resnet18 = calibration.RESNET50_MACS / 1e9, calibration.RESNET18_CIFAR_MACS / 1e9
    assert resnet50 == pytest.approx(4.09, abs=0.01)
    assert resnet18 == pytest.approx(0.556, abs=0.002)
    # LSTM LM: 2 layers of 4 x 200 x 400 plus a 200 x 33,278 decoder per token.
    assert calibration.LM_MACS_PER_TOKEN == 2 * 4 * 200 * 400 + 200 * 33_278


def test_network_fit_recovers_a_known_efficiency(result: Result) -> None:
    """Sync and step times made by the model itself at 0.4: the fit must find 0.4 again."""
    d = result.pollux.data
    t4 = load_gpu_catalog()["T4"]
    sync, step = calibration.pollux_predict(d, t4, 0.4)
    synthetic = calibration.PolluxData(
        app=d.app,
        placement=d.placement,
        local_batch=d.local_batch,
        num_gpus=d.num_gpus,
        nodes=d.nodes,
        step=step,
        sync=sync,
        step_1=d.step_1,
        sync_1=d.sync_1,
        gradient_bytes=d.gradient_bytes,
    )
    eta, objective = calibration.fit_network_efficiency(synthetic, t4)
    assert eta == pytest.approx(0.4, abs=1e-3)
    assert objective == pytest.approx(0.0, abs=1e-9)


def test_vectorised_pollux_model_is_perfs(result: Result) -> None:
    """The calibration evaluates solver.perfmodel.throughput's own data-parallel terms."""
    d = result.pollux.data
    t4 = load_gpu_catalog()["T4"]
    eta = result.pollux.network_efficiency
    cal = throughput.Calibration(compute_efficiency={}, network_efficiency={"T4": eta})
    sync, _ = calibration.pollux_predict(d, t4, eta)
    for i in range(0, len(d.app), 397):
        bandwidth = throughput.link_bandwidth(
            t4,
            across_nodes=bool(d.nodes[i] > 1),
            gpus_per_node=4,
            network_bandwidth_gbps=50.0,
            calibration=cal,
        )
        allreduce = throughput.allreduce_seconds(
            float(d.gradient_bytes[i]), int(d.num_gpus[i]), bandwidth
        )
        exposed = throughput.exposed_sync_seconds(allreduce, float(d.step_1[i] - d.sync_1[i]))
        assert sync[i] == pytest.approx(d.sync_1[i] + exposed, rel=1e-12)


def test_only_fits_in_the_models_precision_are_used(result: Result) -> None:
    used = {(f.gpu_type, f.precision): f.used for f in result.efficiency}
    assert used == {
        ("K80", "fp32"): True,
        ("P100-16GB", "fp32"): False,
        ("V100-16GB", "fp32"): False,
        ("T4", "fp32"): False,
        ("T4", "mixed"): True,
    }


# ---------------------------------------------------------------- the report


def test_report_numbers_are_what_the_code_computes(summary: dict[str, Any]) -> None:
    text = DOC.read_text()
    embedded = calibration.parse_markdown(text)
    assert_close(embedded, json.loads(json.dumps(summary)))
    # Every table and sentence is rendered from that block.
    assert text == calibration.render_markdown(embedded)


def test_report_headline_errors(summary: dict[str, Any]) -> None:
    assert {h["source"] for h in summary["headline"]} == {"Gavel", "Pollux", "Zeus"}
    for h in summary["headline"]:
        assert h["after"]["points"] > 0
        assert 0 <= h["after"]["median"] <= h["after"]["worst"]

    def row(source: str, what: str) -> dict[str, Any]:
        rows: list[dict[str, Any]] = [
            h for h in summary["headline"] if h["source"] == source and what in h["what"]
        ]
        (h,) = rows
        return h

    # The fit improves what it fits.
    step = row("Pollux", "step time, placements across nodes")
    assert step["after"]["median"] < step["before"]["median"] / 2
    t4 = row("Pollux", "1-GPU samples/s")
    assert t4["after"]["median"] < t4["before"]["median"] / 5
    ratio = row("Gavel", "1-GPU throughput ratio")
    assert ratio["after"]["median"] < ratio["before"]["median"]


# ---------------------------------------------------------------- figures


def test_figures_have_the_expected_axes(figures: dict[str, Figure]) -> None:
    expected = {
        "calibration-gavel-ratios.png": (3, "throughput ratio", "log"),
        "calibration-gavel-scaling.png": (3, "samples/s per GPU / 1-GPU samples/s", "linear"),
        "calibration-pollux.png": (2, "model step time (s)", "log"),
        "calibration-pollux-scaling.png": (5, "samples/s", "linear"),
        "calibration-zeus.png": (3, "model / measured - 1", "linear"),
    }
    assert list(figures) == list(calibration.FIGURES) and set(figures) == set(expected)
    for name, fig in figures.items():
        count, ylabel, yscale = expected[name]
        axes = fig.get_axes()
        assert len(axes) == count, name
        assert axes[0].get_ylabel() == ylabel, name
        assert axes[0].get_yscale() == yscale, name
        assert all(ax.get_xlabel() and ax.get_title() for ax in axes), name
        assert all(ax.has_data() for ax in axes), name
    pollux = figures["calibration-pollux.png"].get_axes()
    assert [ax.get_xlabel() for ax in pollux] == [
        "measured step time (s)",
        "measured sync time (s)",
    ]


def test_figures_are_written_and_committed(figures: dict[str, Figure], tmp_path: Path) -> None:
    paths = calibration.write_figures(figures, tmp_path, dpi=30)  # low resolution: fast
    assert [p.name for p in paths] == list(calibration.FIGURES)
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 2_000
        committed = ROOT / "docs" / "img" / p.name
        assert committed.exists() and committed.stat().st_size > 10_000
        assert f"(img/{p.name})" in DOC.read_text()


# ---------------------------------------------------------------- the service uses them


def _copy_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    shutil.copytree(ROOT / "models", folder)
    monkeypatch.setenv(MODELS_DIR_ENV, str(folder))
    return folder


def _edit(folder: Path, **tables: dict[str, object]) -> None:
    path = folder / "calibration.json"
    doc = json.loads(path.read_text())
    doc.update(tables)
    path.write_text(json.dumps(doc))


def _t4_bert(dp: int) -> throughput.Estimate:
    t4, bert = load_gpu_catalog()["T4"], load_architectures()["bert-large"]
    e = throughput.estimate(
        bert,
        t4,
        Shape("T4", dp, 1, 1),
        t4.max_clock_mhz,
        gpus_per_node=4,
        network_bandwidth_gbps=50.0,
    )
    assert e is not None
    return e


def test_perf_reads_the_fitted_constants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stored = json.loads(MODELS_FILE.read_text())
    t4 = load_gpu_catalog()["T4"]
    assert throughput.load_calibration() == throughput.Calibration(
        compute_efficiency=stored["compute_efficiency"],
        network_efficiency=stored["network_efficiency"],
    )
    assert throughput.compute_efficiency(t4) == stored["compute_efficiency"]["T4"]
    one_node, two_nodes = _t4_bert(4), _t4_bert(8)

    folder = _copy_models(tmp_path, monkeypatch)
    _edit(folder, compute_efficiency={"K80": 0.2, "T4": 2 * stored["compute_efficiency"]["T4"]})
    faster = _t4_bert(4)
    assert faster.step_seconds == pytest.approx(one_node.step_seconds / 2, rel=1e-9)

    folder = _copy_models(tmp_path / "b", monkeypatch)
    _edit(folder, network_efficiency={"T4": 1.0})
    assert _t4_bert(8).step_seconds < two_nodes.step_seconds
    assert _t4_bert(4) == one_node

    folder = _copy_models(tmp_path / "c", monkeypatch)
    _edit(folder, compute_efficiency={}, network_efficiency={})
    # the fallback
    assert throughput.compute_efficiency(t4) == throughput.DEFAULT_COMPUTE_EFFICIENCY


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ({"compute_efficiency": {"T4": 0}}, r"compute_efficiency\.T4 must be in \(0, 1\]"),
        ({"network_efficiency": {"T4": "fast"}}, "must be a number"),
        ({"network_efficiency": [0.3]}, "'network_efficiency' must map"),
    ],
)
def test_bad_calibration_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tables: dict[str, Any], message: str
) -> None:
    folder = _copy_models(tmp_path, monkeypatch)
    _edit(folder, **tables)
    with pytest.raises(CatalogError, match=message):
        throughput.load_calibration()


def test_check_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert calibration.main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out
    stale = tmp_path / "calibration.json"
    stale.write_text(json.dumps({"compute_efficiency": {}, "network_efficiency": {}}))
    assert calibration.main(["--check", "--models-out", str(stale)]) == 1
    assert calibration.main(["--data", str(tmp_path)]) == 2


def test_performance_model_doc_quotes_the_fitted_constants() -> None:
    text = (ROOT / "docs" / "performance-model.md").read_text()
    stored = json.loads(MODELS_FILE.read_text())
    for table in ("compute_efficiency", "network_efficiency"):
        for family, value in stored[table].items():
            assert f"| {family} | {value} |" in text or f"is {value} for {family}" in text
