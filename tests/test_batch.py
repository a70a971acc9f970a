"""dsfro batch: resumable JSON Lines results, failures recorded and skipped, exit codes.

Interruptions are simulated deterministically (--max-runs, or a results file cut mid-line);
results are compared without their "timing" part, so no test depends on the clock.
"""

from __future__ import annotations

import io
import json
import shutil
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from solver.app.profile import load_profile
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.offline import batch
from solver.offline import commands as offline_cli
from solver.offline.batch import (
    BatchConfig,
    BatchError,
    ResultsFileError,
    job_class,
    parse_results,
    read_results,
    run_batch,
    strip_timing,
)
from solver.offline.batch.records import key_of
from solver.runtime.pools import OFFLINE_RETRIES, LocalExecutor, Stop, WorkerLost

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
R = TypeVar("R")


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    d = tmp_path / "instances"
    d.mkdir()
    for name in ("tiny-1node.json", "tiny-power.json"):
        shutil.copy(ROOT / "instances" / name, d / name)
    return d


def config(inputs: Path, out: Path, **kw: Any) -> BatchConfig:
    base: dict[str, Any] = dict(
        inputs=[str(inputs)],
        out=out,
        backends=["heuristic", "auto"],
        budgets=[0.5],
        seeds=[1],
        workers=1,
        allocation_mode="name",
    )
    base.update(kw)
    return BatchConfig(**base)


def lines(path: Path) -> list[dict[str, Any]]:
    return [strip_timing(json.loads(x)) for x in path.read_text().splitlines()]


class CountingExecutor:
    """Runs tasks inline, as N workers would be given them (to test chunking)."""

    name = "counting"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.calls: list[int] = []

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        self.calls.append(len(items))
        return [fn(x) for x in items]

    def close(self) -> None:
        pass


def test_uninterrupted_batch_writes_one_line_per_run(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "full.jsonl"
    outcome = run_batch(config(inputs, out))
    assert outcome.exit_code == 0
    records = lines(out)
    assert [(r["instance"], r["backend"], r["budget_s"], r["seed"]) for r in records] == [
        ("tiny-1node", "heuristic", 0.5, 1),
        ("tiny-1node", "auto", 0.5, 1),
        ("tiny-power", "heuristic", 0.5, 1),
        ("tiny-power", "auto", 0.5, 1),
    ]
    by = {(r["instance"], r["backend"]): r for r in records}
    assert by[("tiny-1node", "auto")]["termination"] == "OPTIMAL"
    assert by[("tiny-1node", "auto")]["objective"]["total"] == pytest.approx(3.9)
    assert by[("tiny-1node", "heuristic")]["backend_used"] == "HEURISTIC"
    r = by[("tiny-1node", "auto")]
    assert (r["gpus_used"], r["jobs_running"], r["jobs_queued"]) == (8, 2, 1)
    assert r["size"] == {"nodes": 1, "gpus": 8, "jobs": 3}
    assert r["power_w"] > 0 and r["gap"] is not None and r["bound"] >= r["objective"]["total"]
    assert r["allocation"]["running"] == [
        {"gpu_type": "V100-16GB", "job_class": "resnet-50", "jobs": 1, "gpus": 4},
        {"gpu_type": "V100-16GB", "job_class": "transformer", "jobs": 1, "gpus": 4},
    ]
    assert r["allocation"]["queued"] == {"lm": 1}
    sha = {x["sha256"] for x in records if x["instance"] == "tiny-power"}
    assert len(sha) == 1 and len(sha.pop()) == 64
    raw = json.loads(out.read_text().splitlines()[0])
    assert set(raw["timing"]) == {"first_plan_s", "wall_s", "detail", "finished_at"}


def test_interrupted_and_resumed_equals_uninterrupted(inputs: Path, tmp_path: Path) -> None:
    full = tmp_path / "full.jsonl"
    run_batch(config(inputs, full))
    part = tmp_path / "part.jsonl"
    first = run_batch(config(inputs, part, max_runs=3))
    assert (first.new_runs, first.remaining) == (3, 1)
    assert len(lines(part)) == 3
    with pytest.raises(BatchError, match="--resume"):
        run_batch(config(inputs, part))  # an existing file is never appended to by accident
    second = run_batch(config(inputs, part, resume=True))
    assert (second.new_runs, second.skipped, second.remaining) == (1, 3, 0)
    assert lines(part) == lines(full)
    again = run_batch(config(inputs, part, resume=True))  # nothing left to do
    assert again.new_runs == 0 and len(again.records) == 4
    assert lines(part) == lines(full)


def test_a_resume_refuses_runs_made_with_another_profile_or_tuning(
    inputs: Path, tmp_path: Path
) -> None:
    """A resumed file would mix lines of two setups under one summary: refused, file kept."""
    out = tmp_path / "part.jsonl"
    run_batch(config(inputs, out, max_runs=2))
    kept = out.read_bytes()
    energy = tmp_path / "energy.toml"
    energy.write_text("[weights]\nenergy = 5.0\n")
    with pytest.raises(BatchError, match=r"2 finished run.*another request or settings"):
        run_batch(config(inputs, out, resume=True, profile=load_profile(energy)))
    tuned = Solver(SolverSettings(first_plan_seconds=0.01))
    with pytest.raises(BatchError, match="--overwrite"):
        run_batch(config(inputs, out, resume=True, solver=tuned))
    assert out.read_bytes() == kept
    resumed = run_batch(config(inputs, out, resume=True))
    assert (resumed.new_runs, resumed.skipped) == (2, 2)
    setups = {json.loads(line)["setup_sha256"] for line in out.read_text().splitlines()}
    assert len(setups) == 4  # one per run: the backend is in the request


def test_a_line_cut_by_a_crash_is_dropped_and_redone(inputs: Path, tmp_path: Path) -> None:
    full = tmp_path / "full.jsonl"
    run_batch(config(inputs, full))
    data = full.read_bytes()
    second_newline = data.index(b"\n", data.index(b"\n") + 1)
    crashed = tmp_path / "crashed.jsonl"
    crashed.write_bytes(data[: second_newline + 40])  # two lines and part of the third
    parsed = read_results(crashed)
    assert len(parsed.records) == 2 and parsed.truncated
    outcome = run_batch(config(inputs, crashed, resume=True))
    assert outcome.dropped_partial
    assert outcome.new_runs == 2
    assert lines(crashed) == lines(full)


def test_a_corrupt_complete_line_is_not_guessed_at(inputs: Path, tmp_path: Path) -> None:
    with pytest.raises(ResultsFileError, match=":2: not a JSON line"):
        parse_results(b'{"schema": 1}\n{"schema": 1, oops\n{"schema": 1}\n')
    with pytest.raises(ResultsFileError, match="not a dsfro batch result"):
        parse_results(b"[1, 2]\n")
    out = tmp_path / "bad.jsonl"
    out.write_text('{"schema": 1, oops\n')
    with pytest.raises(BatchError, match="not a JSON line"):
        run_batch(config(inputs, out, resume=True))


def test_corrupt_and_invalid_files_are_recorded_and_skipped(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (inputs / "corrupt.json").write_text('{"cluster": {"nodes": [')
    request = json.loads((inputs / "tiny-1node.json").read_text())
    request["jobs"][1]["max_gpus"] = 0
    (inputs / "invalid.json").write_text(json.dumps(request))
    out = tmp_path / "r.jsonl"
    code = offline_cli.main(
        [
            "batch",
            str(inputs),
            "--backends",
            "heuristic,auto",
            "--budgets",
            "0.5s",
            "--seeds",
            "1",
            "--workers",
            "1",
            "--quiet",
            "--out",
            str(out),
        ]
    )
    assert code == 1
    records = lines(out)
    assert len(records) == 8
    failed = {r["instance"]: r for r in records if not r["ok"]}
    assert set(failed) == {"corrupt", "invalid"}
    assert failed["corrupt"]["error"]["kind"] == "read"
    assert "malformed JSON" in failed["corrupt"]["error"]["message"]
    invalid = failed["invalid"]["error"]
    assert invalid["kind"] == "invalid"
    assert [v["field"] for v in invalid["violations"]] == ["jobs[1].max_gpus"]
    assert all(r["ok"] for r in records if r["instance"].startswith("tiny"))
    captured = capsys.readouterr()
    assert "jobs[1].max_gpus" in captured.err
    assert "tiny-power" in captured.out  # the summary table
    # Resuming reports the same failures (exit 1) without redoing anything.
    code = offline_cli.main(["batch", str(inputs), "--backends", "heuristic,auto", "--budgets",
                             "0.5s", "--seeds", "1", "--workers", "1", "--quiet", "--resume",
                             "--out", str(out)])  # fmt: skip
    assert code == 1
    assert len(lines(out)) == 8


@pytest.mark.parametrize(
    "argv",
    [
        ["--backends", "gurobi"],
        ["--budgets", "fast"],
        ["--seeds", "-1"],
        ["--workers", "0"],
        ["--resume", "--overwrite"],
        ["--store-allocation", "tenant"],
    ],
)
def test_bad_arguments_exit_2(inputs: Path, tmp_path: Path, argv: list[str]) -> None:
    out = tmp_path / "r.jsonl"
    assert offline_cli.main(["batch", str(inputs), "--out", str(out), *argv]) == 2
    assert not out.exists()


def test_nothing_matched_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.jsonl"
    code = offline_cli.main(["batch", str(tmp_path / "none-*.json"), "--out", str(out)])
    assert code == 2
    assert "no instance files" in capsys.readouterr().err


def test_existing_results_need_resume_or_overwrite(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    run_batch(config(inputs, out, backends=["heuristic"]))
    args = ["batch", str(inputs), "--backends", "heuristic", "--budgets", "0.5s", "--seeds",
            "1", "--workers", "1", "--quiet", "--out", str(out)]  # fmt: skip
    assert offline_cli.main(args) == 2
    assert offline_cli.main([*args, "--overwrite"]) == 0
    assert len(lines(out)) == 2


def test_runs_default_to_each_requests_own_settings(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    run_batch(config(inputs, out, backends=None, budgets=None, seeds=None))
    assert {(r["backend"], r["budget_s"], r["seed"]) for r in lines(out)} == {("auto", 5.0, 0)}


def test_profile_fills_what_the_files_leave_unset(inputs: Path, tmp_path: Path) -> None:
    from solver.app.profile import profile_from_dict

    profile = profile_from_dict({"solver": {"backend": "heuristic", "seed": 4}})
    out = tmp_path / "r.jsonl"
    run_batch(config(inputs, out, backends=None, seeds=None, profile=profile))
    assert {(r["backend"], r["seed"]) for r in lines(out)} == {("heuristic", 4)}


def test_chunks_keep_the_file_in_plan_order(inputs: Path, tmp_path: Path) -> None:
    (inputs / "corrupt.json").write_text("{")
    out = tmp_path / "r.jsonl"
    executor = CountingExecutor(workers=3)
    outcome = run_batch(config(inputs, out, seeds=[1, 2]), executor=executor)
    assert executor.calls == [3, 3, 2]  # 8 solves, 3 at a time; error lines ride along
    assert [r["instance"] for r in lines(out)] == ["corrupt"] * 4 + ["tiny-1node"] * 4 + [
        "tiny-power"
    ] * 4
    assert outcome.failed == 4


def test_local_process_pool_gives_the_same_results(inputs: Path, tmp_path: Path) -> None:
    inline = tmp_path / "inline.jsonl"
    run_batch(config(inputs, inline))
    pooled = tmp_path / "pooled.jsonl"
    executor = LocalExecutor(2)
    try:
        run_batch(config(inputs, pooled), executor=executor)
    finally:
        executor.close()
    assert lines(pooled) == lines(inline)


class LosesAWorkerForGood(CountingExecutor):
    """Runs inline, but the run of ``doomed`` (a task index of the first map) loses its
    worker every time, as the local pool reports it once the retries are spent."""

    def __init__(self, workers: int, doomed: int) -> None:
        super().__init__(workers)
        self.doomed: Any = doomed
        self.retries: list[int] = []

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        self.retries.append(retries)
        if isinstance(self.doomed, int):  # the first map: name the doomed run by its key
            self.doomed = items[self.doomed].key  # type: ignore[attr-defined]
        keys = [x.key for x in items]  # type: ignore[attr-defined]
        if self.doomed in keys:
            k = keys.index(self.doomed)
            raise WorkerLost(f"task {k + 1} of {len(items)} lost its worker 2 times", task=k)
        return super().map(fn, items, stop, retries)


def test_a_run_that_loses_its_worker_for_good_is_a_failed_line_and_the_batch_goes_on(
    inputs: Path, tmp_path: Path
) -> None:
    full = tmp_path / "full.jsonl"
    run_batch(config(inputs, full))
    out = tmp_path / "lost.jsonl"
    executor = LosesAWorkerForGood(workers=4, doomed=1)
    outcome = run_batch(config(inputs, out), executor=executor)
    assert outcome.exit_code == 1 and outcome.failed == 1
    assert set(executor.retries) == {OFFLINE_RETRIES} and OFFLINE_RETRIES >= 1
    got, expected = lines(out), lines(full)
    assert [key_of(r) for r in got] == [key_of(r) for r in expected]  # the plan's order
    assert got[1]["ok"] is False and "lost its worker 2 times" in got[1]["error"]["message"]
    assert got[:1] + got[2:] == expected[:1] + expected[2:]  # the others solved as always


def test_progress_is_one_updating_line_on_a_terminal(inputs: Path, tmp_path: Path) -> None:
    tty = io.StringIO()
    run_batch(config(inputs, tmp_path / "a.jsonl"), progress=tty, tty=True)
    text = tty.getvalue()
    assert text.count("\r") == 4 and text.count("\n") == 1 and "[4/4]" in text
    plain = io.StringIO()
    run_batch(config(inputs, tmp_path / "b.jsonl"), progress=plain, tty=False)
    assert "\r" not in plain.getvalue()
    assert len(plain.getvalue().splitlines()) == 4


def test_summary_is_per_instance_and_backend(inputs: Path, tmp_path: Path) -> None:
    outcome = run_batch(config(inputs, tmp_path / "r.jsonl", seeds=[1, 2]))
    rows = batch.summarize(outcome.records)
    assert [(r.instance, r.backend, r.runs) for r in rows] == [
        ("tiny-1node", "auto", 2),
        ("tiny-1node", "heuristic", 2),
        ("tiny-power", "auto", 2),
        ("tiny-power", "heuristic", 2),
    ]
    assert rows[0].terminations == "OPTIMAL 2"
    text = batch.format_summary(rows)
    assert text.splitlines()[0].startswith("instance")


@pytest.mark.parametrize(
    ("name", "kind", "mode", "expected"),
    [
        ("j0002-gavel-transformer-bs64", "profile", "name", "gavel-transformer"),
        ("j0005-pollux-ncf-lbs725", "profile", "name", "pollux-ncf"),
        ("j0001-gpt3-1.3b", "model", "name", "gpt3-1.3b"),
        ("resnet-50-bs64", "profile", "name", "resnet-50"),
        ("llm", "model", "name", "llm"),
        ("j0001-gpt3-1.3b", "model", "workload", "model"),
    ],
)
def test_job_class(name: str, kind: str, mode: str, expected: str) -> None:
    assert job_class(name, kind, mode) == expected


def test_a_ray_cluster_that_cannot_be_joined_is_named_not_an_internal_error(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.jsonl"
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    code = offline_cli.main(["batch", str(inputs), "--budgets", "0.5s", "--quiet",
                             "--ray-address", address, "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"dsfro batch: error: no Ray cluster answers at {address}")
    assert "continue with --resume" in err


def test_more_workers_than_memory_holds_is_exit_2_naming_the_flag(
    inputs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limit = tmp_path / "memory.max"
    limit.write_text(f"{256 * 2**20}\n")  # 8 workers of this test's process do not fit
    monkeypatch.setattr("solver.runtime.memory.MEMORY_LIMITS", (str(limit),))
    monkeypatch.setattr("solver.runtime.pools.available_cores", lambda: 2)  # as on CI
    out = tmp_path / "r.jsonl"
    code = offline_cli.main(["batch", str(inputs), "--budgets", "0.5s", "--seeds", "1,2,3,4",
                             "--workers", "64", "--quiet", "--out", str(out)])  # fmt: skip
    assert code == 2
    # 8 runs (2 files x 4 seeds): no more workers than runs are started
    assert capsys.readouterr().err.startswith("dsfro batch: error: --workers: 8 worker processes")
