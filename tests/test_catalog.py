"""The GPU and architecture catalogs: figures, measured clock tables, loader errors."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from solver.domain import ModelSpec
from solver.perfmodel.catalog import (
    MODELS_DIR_ENV,
    CatalogError,
    load_architectures,
    load_gpu_catalog,
    models_dir,
)

ROOT = Path(__file__).resolve().parent.parent
EXPECTED_GPUS = {
    "K80",
    "P100-16GB",
    "V100-16GB",
    "V100-32GB",
    "A100-40GB",
    "A100-80GB",
    "H100-80GB",
    "H200",
    "L40S",
    "A10",
    "T4",
}
MEASURED = {
    "A100": ("A100-40GB", "A100-80GB"),
    "H100": ("H100-80GB",),
    "V100": ("V100-16GB", "V100-32GB"),
}


def measured_clocks() -> dict[str, tuple[int, ...]]:
    """Per GPU of data/dvfs: the clocks at the memory clock of its highest entry, deduplicated."""
    rows: dict[str, list[tuple[int, int]]] = {}
    with (ROOT / "data" / "dvfs" / "supported_clocks.csv").open(newline="") as f:
        for r in csv.DictReader(f):
            rows.setdefault(r["gpu"], []).append(
                (int(r["mem_clock_mhz"]), int(r["graphics_clock_mhz"]))
            )
    out = {}
    for gpu, pairs in rows.items():
        top_mem = max(pairs, key=lambda p: (p[1], p[0]))[0]
        out[gpu] = tuple(sorted({g for m, g in pairs if m == top_mem}))
    return out


def test_default_models_dir_is_the_repository_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODELS_DIR_ENV, raising=False)
    assert models_dir() == ROOT / "models"


def test_catalog_has_the_required_types_with_sources() -> None:
    catalog = load_gpu_catalog()
    assert set(catalog) == EXPECTED_GPUS
    raw = json.loads((ROOT / "models" / "gpus.json").read_text())["gpus"]
    assert all(len(e["source"]) > 40 for e in raw)
    for gpu in catalog.values():
        assert 0 < gpu.idle_watts < gpu.tdp_watts
        assert list(gpu.sm_clocks_mhz) == sorted(set(gpu.sm_clocks_mhz))


def test_datasheet_figures_spot_check() -> None:
    c = load_gpu_catalog()
    a100 = c["A100-80GB"]
    assert (a100.memory_gib, a100.peak_tflops, a100.memory_bandwidth_gbps) == (80, 312, 2039)
    assert (a100.intra_node_bandwidth_gbps, a100.tdp_watts) == (600, 400)
    h100 = c["H100-80GB"]
    assert (h100.peak_tflops, h100.memory_bandwidth_gbps, h100.tdp_watts) == (989, 3350, 700)
    assert c["H200"].memory_gib == 141 and c["H200"].memory_bandwidth_gbps == 4800
    assert (c["T4"].tdp_watts, c["T4"].peak_tflops) == (70, 65)
    assert c["V100-32GB"].peak_tflops == 112 and c["V100-32GB"].tdp_watts == 250
    assert c["K80"].peak_tflops == pytest.approx(8.73 / 2)
    assert c["L40S"].peak_tflops == pytest.approx(362.05)


def test_measured_clock_tables_are_the_csv() -> None:
    catalog = load_gpu_catalog()
    measured = measured_clocks()
    assert len(measured["A100"]) == 81 and len(measured["V100"]) == 167
    assert len(measured["H100"]) == 97 and max(measured["H100"]) == 1785
    for source, names in MEASURED.items():
        for name in names:
            assert catalog[name].sm_clocks_mhz == measured[source]


def test_unmeasured_types_have_only_datasheet_clocks() -> None:
    catalog = load_gpu_catalog()
    measured = {n for names in MEASURED.values() for n in names}
    for name, gpu in catalog.items():
        if name in measured:
            continue
        assert len(gpu.sm_clocks_mhz) <= 2, name
    assert catalog["T4"].sm_clocks_mhz == (585, 1590)
    assert catalog["H200"].sm_clocks_mhz == (1980,)


def test_idle_watts_follow_the_clock_fit() -> None:
    """V100 and P100: the fitted Zeus floor; the rest: the fitted floor fraction x TDP."""
    fit = json.loads((ROOT / "models" / "clock_model.json").read_text())
    catalog = load_gpu_catalog()
    for name in ("V100-16GB", "V100-32GB"):
        assert catalog[name].idle_watts == pytest.approx(
            fit["gpus"]["v100"]["floor_watts"], abs=0.05
        )
    assert catalog["P100-16GB"].idle_watts == pytest.approx(
        fit["gpus"]["p100"]["floor_watts"], abs=0.05
    )
    for name in EXPECTED_GPUS - {"V100-16GB", "V100-32GB", "P100-16GB"}:
        gpu = catalog[name]
        assert gpu.idle_watts == pytest.approx(fit["floor_fraction"] * gpu.tdp_watts, abs=0.05)


def test_architectures_load() -> None:
    archs = load_architectures()
    assert archs["gpt3-1.3b"] == ModelSpec(1.3e9, 24, 2048, 16, 2048, 512)
    assert archs["llama2-70b"].layers == 80 and archs["llama2-70b"].attention_heads == 64
    assert {"gpt3-2.7b", "gpt3-6.7b", "gpt3-13b", "llama2-7b", "llama2-13b"} <= set(archs)
    assert {"bert-large", "gpt2-xl"} <= set(archs)
    for spec in archs.values():
        assert spec.hidden_size % spec.attention_heads == 0


# ---------------------------------------------------------------- loader errors


def _copy_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "models"
    shutil.copytree(ROOT / "models", folder)
    monkeypatch.setenv(MODELS_DIR_ENV, str(folder))
    return folder


def _edit_gpu(folder: Path, gpu: str, **changes: object) -> None:
    path = folder / "gpus.json"
    doc = json.loads(path.read_text())
    entry = next(e for e in doc["gpus"] if e["name"] == gpu)
    for k, v in changes.items():
        if v is None:
            del entry[k]
        else:
            entry[k] = v
    path.write_text(json.dumps(doc))


def test_env_var_overrides_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy_models(tmp_path, monkeypatch)
    _edit_gpu(folder, "T4", tdp_watts=75)
    assert models_dir() == folder
    assert load_gpu_catalog()["T4"].tdp_watts == 75


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"peak_tflops": None}, "missing field(s) peak_tflops"),
        ({"peak_tflops": "fast"}, "field 'peak_tflops' must be a finite number"),
        ({"memory_gib": -16}, "field 'memory_gib' must be positive"),
        ({"idle_watts": 80}, "field 'idle_watts' must be below tdp_watts"),
        ({"sm_clocks_mhz": []}, "field 'sm_clocks_mhz' must be a non-empty list"),
        ({"sm_clocks_mhz": [585, 585]}, "must not repeat a clock"),
        ({"sm_clocks_mhz": [585.5]}, "must hold positive integers"),
        ({"boost": 1}, "unknown field(s) boost"),
    ],
)
def test_bad_gpu_entry_names_file_entry_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changes: dict[str, object], message: str
) -> None:
    folder = _copy_models(tmp_path, monkeypatch)
    _edit_gpu(folder, "T4", **changes)
    with pytest.raises(CatalogError) as err:
        load_gpu_catalog()
    assert str(folder / "gpus.json") in str(err.value)
    assert "'T4'" in str(err.value)
    assert message in str(err.value)


def test_duplicate_gpu_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy_models(tmp_path, monkeypatch)
    _edit_gpu(folder, "A10", name="T4")
    with pytest.raises(CatalogError, match="duplicate name 'T4'"):
        load_gpu_catalog()


def test_missing_and_malformed_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path))
    with pytest.raises(CatalogError, match=r"gpus\.json: file not found"):
        load_gpu_catalog()
    (tmp_path / "gpus.json").write_text("{not json")
    with pytest.raises(CatalogError, match=r"gpus\.json: invalid JSON"):
        load_gpu_catalog()
    (tmp_path / "architectures.json").write_text(json.dumps({"architectures": {}}))
    with pytest.raises(CatalogError, match="list 'architectures'"):
        load_architectures()


def test_bad_architecture_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copy_models(tmp_path, monkeypatch)
    path = folder / "architectures.json"
    doc = json.loads(path.read_text())
    doc["architectures"][0]["attention_heads"] = 15
    path.write_text(json.dumps(doc))
    with pytest.raises(CatalogError, match=r"entry 0 \('gpt3-1.3b'\): field 'hidden_size'"):
        load_architectures()
    doc["architectures"][0]["attention_heads"] = 16
    doc["architectures"][0]["layers"] = 2.5
    path.write_text(json.dumps(doc))
    with pytest.raises(CatalogError, match="field 'layers' must be a positive integer"):
        load_architectures()
