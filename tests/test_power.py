"""The clock power model and its fit to the Zeus power-limit sweeps."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from itertools import pairwise
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from solver.perfmodel.catalog import MODELS_DIR_ENV, CatalogError, load_gpu_catalog
from solver.perfmodel.power import ClockModel, clock_ratio, gpu_watts, load_clock_model

ROOT = Path(__file__).resolve().parent.parent
FIT = json.loads((ROOT / "models" / "clock_model.json").read_text())


def fit_script() -> ModuleType:
    path = ROOT / "scripts" / "fit_clock_model.py"
    spec = importlib.util.spec_from_file_location("fit_clock_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def assert_close(got: object, want: object) -> None:
    """Equal structure; numbers within what rounding in the last printed digit can move."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys()
        for k in want:
            assert_close(got[k], want[k])
    elif isinstance(want, float):
        assert got == pytest.approx(want, abs=2e-3, rel=1e-3)
    else:
        assert got == want


def test_clock_model_matches_the_file() -> None:
    m = load_clock_model()
    assert m == ClockModel(
        alpha=FIT["alpha"],
        dynamic_fraction=FIT["dynamic_fraction"],
        compute_fraction=FIT["compute_fraction"]["median"],
    )
    assert 1.0 < m.alpha < 4.0
    assert 0.5 < m.dynamic_fraction <= 1.0
    assert load_clock_model() is m  # cached


def test_watts_values() -> None:
    m = ClockModel(alpha=2.0, dynamic_fraction=0.8, compute_fraction=0.7)
    a100 = load_gpu_catalog()["A100-80GB"]
    idle, tdp = a100.idle_watts, a100.tdp_watts
    assert gpu_watts(a100, 1410, 0.0, m) == pytest.approx(idle)
    assert gpu_watts(a100, 1410, 1.0, m) == pytest.approx(idle + 0.8 * (tdp - idle))
    half = 705
    assert gpu_watts(a100, half, 0.5, m) == pytest.approx(idle + 0.8 * (tdp - idle) * 0.5 * 0.25)


def test_watts_monotone_and_bounded() -> None:
    for gpu in load_gpu_catalog().values():
        clocks = gpu.sm_clocks_mhz
        for a in (0.2, 0.7, 1.0):
            w = [gpu_watts(gpu, c, a) for c in clocks]
            assert all(x < y for x, y in pairwise(w))
            assert gpu.idle_watts < w[0] and w[-1] <= gpu.tdp_watts
        top = gpu.max_clock_mhz
        assert gpu_watts(gpu, top, 0.3) < gpu_watts(gpu, top, 0.6) < gpu_watts(gpu, top, 0.9)


def test_bad_inputs_raise() -> None:
    a100 = load_gpu_catalog()["A100-80GB"]
    with pytest.raises(ValueError, match="activity"):
        gpu_watts(a100, 1410, 1.2)
    with pytest.raises(ValueError, match="outside"):
        gpu_watts(a100, 1500, 0.5)
    with pytest.raises(ValueError, match="outside"):
        clock_ratio(a100, 0)


def test_bad_clock_model_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "models"
    shutil.copytree(ROOT / "models", folder)
    monkeypatch.setenv(MODELS_DIR_ENV, str(folder))
    doc = dict(FIT, alpha=-1)
    (folder / "clock_model.json").write_text(json.dumps(doc))
    with pytest.raises(CatalogError, match="field 'alpha'"):
        load_clock_model()
    del doc["dynamic_fraction"]
    (folder / "clock_model.json").write_text(json.dumps(doc))
    with pytest.raises(CatalogError, match="dynamic_fraction"):
        load_clock_model()


# ---------------------------------------------------------------- the fit


def test_fit_file_is_what_the_script_produces() -> None:
    """Re-run the fit on the bundled data; the checked-in constants must match."""
    fit = fit_script()
    doc = fit.summarise(fit.fit(fit.load_zeus()))
    assert doc["alpha"] == pytest.approx(FIT["alpha"], abs=1e-3)
    assert doc["dynamic_fraction"] == pytest.approx(FIT["dynamic_fraction"], abs=1e-3)
    assert doc["floor_fraction"] == pytest.approx(FIT["floor_fraction"], abs=1e-3)
    assert_close(doc["compute_fraction"], FIT["compute_fraction"])
    for name, g in FIT["gpus"].items():
        assert doc["gpus"][name]["floor_watts"] == pytest.approx(g["floor_watts"], abs=0.05)
        assert doc["gpus"][name]["dynamic_watts"] == pytest.approx(g["dynamic_watts"], abs=0.05)
    assert_close(doc["gpus"], FIT["gpus"])
    assert_close(doc["overall"], FIT["overall"])
    # The fit follows the data closely at the median; worst cases are documented.
    assert doc["overall"]["time_relative_error"]["median"] < 0.05
    assert doc["overall"]["power_relative_error"]["median"] < 0.05


def test_fit_recovers_known_constants() -> None:
    """Synthetic sweeps made by the model itself: the fit must find the constants again."""
    fit = fit_script()
    alpha, floor, dyn, cap = 2.6, 40.0, 170.0, 250.0
    limits = np.arange(100.0, cap + 1, 25.0)
    cs = np.array([0.1, 0.4, 0.7, 0.9, 1.0])
    x = fit.clock_ratio(limits, floor, dyn, alpha)
    rel, power = fit.predict(x[None, :], cs[:, None], floor, dyn, alpha)
    time = 100.0 * rel
    shape = time.shape
    g = fit.GpuData(
        name="synthetic",
        keys=tuple(("d", "n", i, "o") for i in range(len(cs))),
        limit=np.broadcast_to(limits, shape).copy(),
        log_time=np.log(time),
        log_power=np.log(power),
        mask=np.ones(shape),
        max_limit=cap,
    )
    result = fit.fit([g])
    assert result.alpha == pytest.approx(alpha, abs=0.02)
    assert result.fits[0].floor_watts == pytest.approx(floor, abs=1.0)
    assert result.fits[0].dynamic_watts == pytest.approx(dyn, abs=2.0)
    assert result.fits[0].compute_fraction == pytest.approx(cs, abs=0.011)
