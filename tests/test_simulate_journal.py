"""``dsfro simulate --compare --resume`` (solver.simulate.journal): the runs of a comparison cut
short are kept as each finishes, and the comparison continued runs only the others, with the
outputs an uninterrupted one writes. Before, every finished run was lost with the comparison."""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from solver.cli.main import main
from solver.runtime.pools import InlineExecutor, Stop, WorkerLost
from solver.simulate import journal
from solver.simulate.run_spec import RunSpec
from tests.test_simulate_cli import CLUSTER, GOOD, write_trace

T = TypeVar("T")
R = TypeVar("R")
POLICIES = "fifo,dsfro-heuristic,las"


class _Counting(InlineExecutor):
    """Runs inline, one run a map; records each run's policy; fails as told at the n-th run."""

    workers = 1

    def __init__(self, fail_at: int | None = None, error: BaseException | None = None) -> None:
        self.ran: list[str] = []
        self.fail_at, self.error = fail_at, error

    def map(
        self, fn: Callable[[T], R], items: Sequence[T], stop: Stop | None = None, retries: int = 0
    ) -> list[R]:
        if self.error is not None and len(self.ran) == self.fail_at:
            raise self.error
        self.ran += [item.policy for item in items if isinstance(item, RunSpec)]
        return super().map(fn, items, stop, retries)


def _compare(
    tmp_path: Path, out: Path, executor: _Counting, monkeypatch: pytest.MonkeyPatch, *more: str
) -> int:
    monkeypatch.setattr("solver.simulate.cli.make_executor", lambda *_: executor)
    args = ["simulate", "--trace", str(tmp_path / "trace.csv"), "--cluster", str(CLUSTER)]
    args += ["--compare", "--policies", POLICIES, "--seeds", "1", "--out", str(out), *more]
    return main(args)


@pytest.mark.parametrize(
    ("error", "code"),
    [(WorkerLost("task 1 of 1 lost its worker 2 times", task=0), 1), (KeyboardInterrupt(), 130)],
)
def test_a_comparison_cut_short_continues_with_only_the_runs_it_lacks(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    error: BaseException,
    code: int,
) -> None:
    write_trace(tmp_path, GOOD)
    whole = _Counting()
    assert _compare(tmp_path, tmp_path / "whole", whole, monkeypatch) == 0
    cut = _Counting(fail_at=2, error=error)
    out = tmp_path / "cut"
    assert _compare(tmp_path, out, cut, monkeypatch) == code
    err = capsys.readouterr().err
    assert "are kept (--compare --resume runs the others)" in err
    assert cut.ran == ["fifo", "dsfro-heuristic"]
    assert not (out / "trace-comparison.csv").exists()
    resumed = _Counting()
    assert _compare(tmp_path, out, resumed, monkeypatch, "--resume") == 0
    assert resumed.ran == ["las"]
    assert _table(out) == _table(tmp_path / "whole")


def _table(out: Path) -> list[dict[str, str]]:
    """The comparison's rows but the solvers' measured times (never the same twice)."""
    with (out / "trace-comparison.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows and "solver_p99_budget_ratio" in rows[0]
    return [{k: v for k, v in r.items() if not k.startswith("solver_")} for r in rows]


@pytest.fixture
def compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The output folder of one finished comparison of GOOD."""
    write_trace(tmp_path, GOOD)
    out = tmp_path / "out"
    assert _compare(tmp_path, out, _Counting(), monkeypatch) == 0
    return out


def test_without_resume_or_with_other_inputs_every_run_runs_again(
    compared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    again = _Counting()
    assert _compare(tmp_path, compared, again, monkeypatch) == 0
    assert again.ran == POLICIES.split(",")
    write_trace(tmp_path, GOOD[:3])  # another trace: kept runs are not its runs
    other = _Counting()
    assert _compare(tmp_path, compared, other, monkeypatch, "--resume") == 0
    assert other.ran == POLICIES.split(",")


def test_a_kept_run_that_cannot_be_read_runs_again(
    compared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = sorted((compared / journal.FOLDER).glob("*.pickle"))
    assert len(kept) == 3
    kept[0].write_bytes(b"not a pickle")
    resumed = _Counting()
    assert _compare(tmp_path, compared, resumed, monkeypatch, "--resume") == 0
    assert len(resumed.ran) == 1
