"""The sources of the default traces: the Philly converter (solver.simulate.philly) and the
published Acme statistics the LLM-development trace is drawn from (solver.simulate.llm)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from solver.simulate.core import SimulationError
from solver.simulate.llm import load_acme
from solver.simulate.philly import convert, philly_trace
from solver.simulate.scenario import PHILLY_WINDOW
from solver.simulate.trace import read_trace


def test_philly_window_converts_with_relative_times() -> None:
    everything = philly_trace(PHILLY_WINDOW)
    assert len(everything) == 2500
    jobs = philly_trace(PHILLY_WINDOW, start=100, count=50)
    assert len(jobs) == 50
    assert jobs[0].submit_time_s == 0.0
    assert [j.job_id for j in jobs] == [f"philly-{i:05d}" for i in range(100, 150)]
    first = everything[100].submit_time_s
    for j, k in zip(jobs, everything[100:150], strict=True):
        assert j.submit_time_s == pytest.approx(k.submit_time_s - first)
        assert (j.num_gpus, j.duration_s, j.tenant, j.row) == (
            k.num_gpus,
            k.duration_s,
            k.tenant,
            k.row,
        )
    assert all(j.workload == "philly" and j.tenant.startswith("vc-") for j in jobs)
    assert [j.submit_time_s for j in everything] == sorted(j.submit_time_s for j in everything)
    drawn = philly_trace(PHILLY_WINDOW, start=None, count=10, seed=3)
    assert drawn == philly_trace(PHILLY_WINDOW, start=None, count=10, seed=3)


def test_philly_converter_cli(tmp_path: Path) -> None:
    out = tmp_path / "p.csv"
    assert convert([str(PHILLY_WINDOW), str(out), "--start", "5", "--count", "20"]) == 0
    assert read_trace(out) == philly_trace(PHILLY_WINDOW, start=5, count=20)
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,-3,0.5,1,\n")
    assert convert([str(bad), str(tmp_path / "x.csv")]) == 2
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(SimulationError) as e:
        philly_trace(bad)
    assert e.value.problems == [f"{bad}:2:timestamp: not a date and time: 'yesterday'"]
    with pytest.raises(SimulationError) as e:
        philly_trace(PHILLY_WINDOW, start=2400, count=200)
    assert e.value.problems == [
        f"{PHILLY_WINDOW}: start 2400 not in 0..2300 (2500 jobs, count 200)"
    ]


def test_acme_statistics_are_the_published_ones() -> None:
    kalos = load_acme("Kalos")
    assert {t: (s.jobs_pct, s.gpu_time_pct) for t, s in kalos.items()} == {
        "Eval": (92.82, 0.42),
        "Pretrain": (3.22, 95.48),
        "Debug": (2.70, 1.59),
        "Other": (1.26, 2.51),
    }
    assert kalos["Pretrain"].gpus_box == (96, 256, 512, 512, 512)
    assert dict(kalos["Pretrain"].duration_cdf)[262144] == pytest.approx(0.9891)
    assert math.isclose(sum(s.gpu_time_pct for s in kalos.values()), 100, abs_tol=0.01)
