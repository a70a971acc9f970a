"""dsfro sweep: the weight grid, the Pareto front (non-dominated), the changes table."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from solver.offline import commands as offline_cli
from solver.offline.sweep import (
    MAX_SWEEP_POINTS,
    JobChoice,
    SweepOutcome,
    SweepPoint,
    dominates,
    front_changes,
    grid_size,
    pareto_front,
    parse_weight_spec,
    plot_sweep,
    prepare,
    run_sweep,
    weight_grid,
    write_outputs,
)
from solver.runtime.pools import InlineExecutor

ROOT = Path(__file__).resolve().parent.parent
TINY_POWER = str(ROOT / "instances" / "tiny-power.json")
ENERGY = [0.0, 0.5, 1.0, 2.0]


def point(index: int, throughput: float, power: float, **kw: object) -> SweepPoint:
    return SweepPoint(index, {"energy": float(index)}, {}, "OPTIMAL", 0.0, throughput, power,
                      **kw)  # type: ignore[arg-type]  # fmt: skip


@pytest.fixture(scope="module")
def outcome() -> SweepOutcome:
    req = prepare(TINY_POWER, time_budget=0.5, seed=1)
    return run_sweep(req, [("energy", ENERGY)], executor=InlineExecutor(), title="tiny-power")


def test_parse_weight_spec() -> None:
    assert parse_weight_spec("energy=0,0.05, 0.1") == ("energy", [0.0, 0.05, 0.1])
    for bad in ("energy", "power=1", "energy=1,x", "energy=-1", "energy=1,1", "energy=inf"):
        with pytest.raises(ValueError):
            parse_weight_spec(bad)
    with pytest.raises(ValueError, match="from 0 to 1000, got 5000"):  # found at point 1, late
        parse_weight_spec("energy=1,5000")


def test_weight_grid_is_the_product() -> None:
    grid = weight_grid([("energy", [0.0, 1.0]), ("migration", [0.0, 0.5, 1.0])])
    assert len(grid) == 6
    assert grid[0] == {"energy": 0.0, "migration": 0.0}
    assert grid[-1] == {"energy": 1.0, "migration": 1.0}
    with pytest.raises(ValueError):
        weight_grid([("energy", [0.0]), ("energy", [1.0])])


def test_a_grid_past_its_limit_is_refused_before_any_point_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three axes of 1,000 values filled 5 GiB in 15 s before the first solve."""
    values = ",".join(str(i / 1000) for i in range(1000))
    axes = [(name, [i / 1000 for i in range(1000)]) for name in ("energy", "migration", "locality")]
    assert grid_size(axes[:1]) == 1000
    with pytest.raises(ValueError, match=r"1,000,000,000 points \(1,000 x 1,000 x 1,000\)"):
        grid_size(axes)
    out = tmp_path / "out"
    argv = ["sweep", TINY_POWER, "--out", str(out), "--quiet"]
    argv += [arg for name, _ in axes for arg in ("--weight", f"{name}={values}")]
    assert offline_cli.main(argv) == 2
    assert f"at most {MAX_SWEEP_POINTS:,}: give fewer values" in capsys.readouterr().err
    assert not out.exists()


def test_pareto_front_of_known_points() -> None:
    points = [
        point(1, 0.9, 100.0),
        point(2, 0.8, 120.0),  # dominated by 1
        point(3, 0.5, 50.0),
        point(4, 0.9, 100.0),  # same place as 1: counted once
        point(5, 0.95, 100.0),  # dominates 1 and 4
        SweepPoint(6, {}, {}, "INFEASIBLE"),  # no plan: no place
        SweepPoint(7, {}, {}, error="boom"),
    ]
    front = pareto_front(points)
    assert [points[i].index for i in front] == [3, 5]
    assert dominates(points[4], points[0]) and not dominates(points[0], points[3])


def test_sweep_front_is_non_dominated(outcome: SweepOutcome) -> None:
    points = outcome.points
    assert [p.swept["energy"] for p in points] == ENERGY
    assert all(p.error is None for p in points)
    front = [points[i] for i in outcome.front]
    assert len(front) >= 2
    for f in front:
        assert not any(dominates(p, f) for p in points if p.placed)
    for i, p in enumerate(points):
        if p.placed and i not in outcome.front:
            assert any(dominates(f, p) or f.throughput == p.throughput for f in front)
    assert [f.power_w for f in front] == sorted(f.power_w for f in front)
    # More weight on energy never buys more power.
    by_weight = sorted(points, key=lambda p: p.swept["energy"])
    assert all(a.power_w >= b.power_w for a, b in itertools.pairwise(by_weight))
    assert points[0].throughput == pytest.approx(points[0].objective)  # one job, weight 1


def test_changes_between_neighbours_on_the_front(outcome: SweepOutcome) -> None:
    changes = front_changes(outcome.points, outcome.front)
    assert changes == outcome.changes
    assert changes, "tiny-power's front moves the job's clock or shape"
    assert {c.job for c in changes} == {"gpt3-1.3b"}
    for c in changes:
        assert c.before.describe() != c.after.describe()
        assert "->" in " ".join(c.cells()[2:])


def test_changes_ignore_placement_only() -> None:
    a = JobChoice("j", "RUNNING", "A100", "8x1x1", 1410, 8, 2000.0)
    points = [point(1, 0.5, 100.0, jobs=(a,)), point(2, 0.9, 200.0, jobs=(a,))]
    assert front_changes(points, [0, 1]) == []


def test_figure_and_files(outcome: SweepOutcome, tmp_path: Path) -> None:
    fig = plot_sweep(outcome)
    (ax,) = fig.axes
    assert ax.get_xlabel() == "power drawn by running jobs (kW)"
    assert "throughput" in ax.get_ylabel()
    legend = ax.get_legend()
    assert legend is not None
    labels = [t.get_text() for t in legend.get_texts()]
    assert "Pareto front" in labels
    (front_line,) = [line for line in ax.get_lines() if line.get_label() == "Pareto front"]
    assert len(np.asarray(front_line.get_xdata())) == len(outcome.front)
    paths = write_outputs(outcome, tmp_path, "sweep")
    assert [p.name for p in paths] == ["sweep.png", "sweep.md", "sweep.csv"]
    assert paths[0].read_bytes().startswith(b"\x89PNG")
    md = paths[1].read_text()
    assert "## Changes along the front" in md and "gpt3-1.3b" in md
    with paths[2].open() as f:
        rows = list(csv.DictReader(f))
    assert [float(r["energy"]) for r in rows] == ENERGY
    assert sum(r["on_front"] == "yes" for r in rows) == len(outcome.front)


def test_sweep_command(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["sweep", TINY_POWER, "--weight", "energy=0,1,2", "--time-budget", "0.5s",
            "--workers", "1", "--quiet", "--out", str(out)]  # fmt: skip
    assert offline_cli.main(argv) == 0
    names = {p.name for p in out.iterdir()}
    assert names == {"sweep.png", "sweep.md", "sweep.csv", "sweep-points.jsonl"}


@pytest.mark.parametrize(
    "extra",
    [
        ["--weight", "power=1"],
        ["--weight", "energy=1", "--weight", "energy=2"],
        ["--weight", "energy=1", "--backend", "fast"],
        ["--weight", "energy=1", "--time-budget", "0s"],
        ["--weight", "energy=1", "--energy-basis", "joules"],
        ["--weight", "energy=1", "--prefix", "../escaped"],
        ["--weight", "energy=1", "--prefix", ""],
    ],
)
def test_bad_sweep_arguments_exit_2(tmp_path: Path, extra: list[str]) -> None:
    out = tmp_path / "out"
    assert offline_cli.main(["sweep", TINY_POWER, "--out", str(out), "--quiet", *extra]) == 2
    assert not out.exists()


def test_unreadable_instance_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert offline_cli.main(["sweep", str(bad), "--weight", "energy=1", "--quiet"]) == 2


def test_the_energy_basis_is_set_for_every_point() -> None:
    """WASTE at every point: the base request carries it, and under it a job's most efficient
    configuration is free of energy charge, so the energy term of every point is lower than
    under DRAW at the same weight."""
    from solver._proto.dsfro.v1 import scheduler_pb2 as pb

    waste = prepare(TINY_POWER, time_budget=0.5, seed=1, energy_basis="waste")
    draw = prepare(TINY_POWER, time_budget=0.5, seed=1)
    assert waste.weights.energy_basis == pb.ENERGY_BASIS_WASTE
    assert draw.weights.energy_basis != pb.ENERGY_BASIS_WASTE
    axes = [("energy", [1.0, 2.0])]
    under = {
        name: run_sweep(req, axes, executor=InlineExecutor(), title=name).points
        for name, req in (("waste", waste), ("draw", draw))
    }
    for w, d in zip(under["waste"], under["draw"], strict=True):
        assert w.objective > d.objective  # the same plans charge less, the best is at least that


class _Interrupted(InlineExecutor):
    """Runs points inline; Ctrl-C arrives at point `at` (counted from 1), as a user's would."""

    def __init__(self, at: int | None) -> None:
        self.at, self.solved = at, 0

    def map(self, fn: Any, items: Any, stop: Any = None, retries: int = 0) -> list[Any]:
        if self.at is not None and self.solved + 1 >= self.at:
            raise KeyboardInterrupt
        self.solved += len(items)
        return super().map(fn, items, stop, retries)


def test_a_sweep_cut_short_resumes_with_only_the_points_it_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each point is journaled as it comes back: Ctrl-C at the third of four points keeps two,
    and --resume solves the other two; the outputs are those of a sweep never cut short."""
    argv = ["sweep", TINY_POWER, "--weight", "energy=0,0.5,1,2", "--time-budget", "0.5s",
            "--seed", "1", "--workers", "1", "--quiet"]  # fmt: skip
    executors = iter([_Interrupted(3), _Interrupted(None), _Interrupted(None)])
    used: list[_Interrupted] = []

    def make(*_: object) -> _Interrupted:
        used.append(next(executors))
        return used[-1]

    monkeypatch.setattr("solver.offline.sweep.cli.make_batch_executor", make)
    cut, whole = tmp_path / "cut", tmp_path / "whole"
    assert offline_cli.main([*argv, "--out", str(cut)]) == 130
    assert "continue with --resume" in capsys.readouterr().err
    assert len((cut / "sweep-points.jsonl").read_text().splitlines()) == 2
    assert not (cut / "sweep.csv").exists()
    assert offline_cli.main([*argv, "--out", str(cut), "--resume"]) == 0
    assert used[1].solved == 2
    assert offline_cli.main([*argv, "--out", str(whole)]) == 0
    assert used[2].solved == 4
    assert (cut / "sweep.csv").read_text() == (whole / "sweep.csv").read_text()
    assert len((cut / "sweep-points.jsonl").read_text().splitlines()) == 4
    # without --resume the journal starts over: every point is solved again
    executors = iter([_Interrupted(None)])
    assert offline_cli.main([*argv, "--out", str(cut)]) == 0
    assert used[-1].solved == 4
    # points of other solver settings are not reused: the [tuning] decides answers too
    executors = iter([_Interrupted(None), _Interrupted(None)])
    monkeypatch.setenv("DSFRO_TUNING_FIRST_PLAN_SECONDS", "0.01")
    assert offline_cli.main([*argv, "--out", str(cut), "--resume"]) == 0
    assert used[-1].solved == 4
    assert offline_cli.main([*argv, "--out", str(cut), "--resume"]) == 0
    assert used[-1].solved == 0
