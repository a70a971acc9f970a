"""The JCT-energy front (issue 19): DSFRO run again at each energy weight of ``--energy-weights``
with its other settings kept, the points (means over seeds at the equal horizon), which
policies a DSFRO setting dominates, and the figure from ``dsfro simulate``."""

from __future__ import annotations

import argparse
import csv
import dataclasses
from pathlib import Path

import pytest

from solver.cli.main import main
from solver.simulate.cli import with_energy_weights
from solver.simulate.front import (
    FrontPoint,
    dominated,
    energy_weight_arg,
    energy_weight_of,
    front_data,
)
from solver.simulate.metrics import Summary, summarize
from solver.simulate.run_spec import RunSpec
from tests.test_simulate_cli import CLUSTER, GOOD, write_trace
from tests.test_simulate_energy import run


def spec(policy: str, seed: int = 1, **overrides: object) -> RunSpec:
    return RunSpec("philly-a", None, None, None, policy, seed, "out", dict(overrides))


def test_dsfro_runs_again_at_each_weight_keeping_its_other_weights() -> None:
    specs = [spec("fifo"), spec("dsfro", 1, weights={"migration": 0.2}), spec("dsfro", 2)]
    got = with_energy_weights(specs, [10.0, 0.1, 1.0])
    # 0.1 is the default energy weight: the plain dsfro runs already have it
    assert [(s.label, s.seed) for s in got] == [
        ("dsfro-e1", 1), ("dsfro-e10", 1), ("dsfro-e1", 2), ("dsfro-e10", 2),
    ]  # fmt: skip
    assert got[1].overrides["weights"] == {"migration": 0.2, "energy": 10.0}
    assert [energy_weight_of(s.overrides) for s in got] == [1.0, 10.0, 1.0, 10.0]
    assert energy_weight_of(specs[1].overrides) == 0.1
    assert with_energy_weights([spec("dsfro-heuristic")], [1.0]) == []


def test_energy_weights_on_the_command_line_are_finite_and_not_negative() -> None:
    assert energy_weight_arg("2.5") == 2.5 and energy_weight_arg("0") == 0.0
    for bad in ("-1", "nan", "inf", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            energy_weight_arg(bad)


def _at(policy: str, seed: int, jct_s: float, kwh: float) -> Summary:
    return dataclasses.replace(
        summarize(run(policy, seed, 1100.0, 2000.0)), jct_mean_s=jct_s, energy_horizon_kwh=kwh
    )


def test_points_are_means_over_seeds_and_dominance_needs_both_lower() -> None:
    summaries = [
        _at("dsfro", 1, 3600.0, 100.0), _at("dsfro", 2, 7200.0, 120.0),
        _at("dsfro-e10", 1, 10800.0, 80.0), _at("gavel", 1, 14400.0, 100.0),
        _at("fifo", 1, 9000.0, 70.0),
    ]  # fmt: skip
    (points,) = front_data(summaries, {"dsfro": 0.1, "dsfro-e10": 10.0}).values()
    by = {p.label: p for p in points}
    assert by["dsfro"] == FrontPoint("dsfro", 1.5, 110.0, 2, 0.1)
    assert by["gavel"].energy_weight is None and by["gavel"].jct_h == 4.0
    assert dominated(points) == {"gavel": ["dsfro-e10"], "fifo": []}


def test_simulate_sweeps_the_energy_weight_and_draws_the_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, GOOD)
    out = tmp_path / "front"
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--compare"]
    args += ["--policies", "fifo,dsfro", "--seeds", "1", "--workers", "1", "--budget", "0.2s"]
    assert main([*args, "--energy-weights", "10", "--out", str(out)]) == 0
    capsys.readouterr()
    with (out / "trace-comparison.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["seed"] == "1"]
    assert sorted(r["policy"] for r in rows) == ["dsfro", "dsfro-e10", "fifo"]
    assert len({r["horizon_s"] for r in rows}) == 1  # one equal horizon for all three
    assert (out / "trace-dsfro-e10-s1-summary.json").exists()
    assert (out / "trace-front.png").stat().st_size > 0
    assert "trace-front.png" in (out / "trace-comparison.md").read_text()


def test_energy_weights_need_a_comparison_with_dsfro(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, GOOD)
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--energy-weights", "1"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 2
    assert "--energy-weights needs --compare with dsfro" in capsys.readouterr().err
    more = ["--compare", "--policies", "fifo", "--seeds", "1", "--out", str(tmp_path / "b")]
    assert main([*args, *more]) == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
