"""``dsfro simulate`` as a user runs it: files in, files and a summary out; bad input is exit 2
with one line per problem and nothing written."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

from solver.cli.main import main
from solver.runtime.pools import OFFLINE_RETRIES, InlineExecutor, Stop, WorkerLost
from solver.runtime.ray import RayConnectionError
from solver.service.security import TlsFiles
from tests.factories import running_server
from tests.tls_certs import Pki

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "instances" / "sim" / "philly-a-cluster.json"
POWER = ROOT / "instances" / "sim" / "philly-a-power.json"
T = TypeVar("T")
R = TypeVar("R")
HEADER = "job_id,submit_time_s,tenant,workload,num_gpus,duration_s,deadline_s\n"


def write_trace(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(header + "".join(r + "\n" for r in rows))
    return path


GOOD = [
    "a,0,t1,philly,1,600,",
    "b,30,t1,llama2-7b,8,1200,7200",
    "c,60,t2,philly,2,900,",
    "d,90,t2,bert-large,4,300,",
]


def test_one_run_writes_its_files_and_prints_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, GOOD)
    out = tmp_path / "out"
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER)]
    args += ["--power-schedule", str(POWER), "--policy", "dsfro-heuristic", "--seed", "3"]
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "trace / dsfro-heuristic / seed 3" in printed and "jct_mean_s" in printed
    summary = json.loads((out / "trace-dsfro-heuristic-s3-summary.json").read_text())
    assert summary["jobs_total"] == 4 and summary["jobs_finished"] == 4
    with (out / "trace-dsfro-heuristic-s3-jobs.csv").open() as f:
        jobs = list(csv.DictReader(f))
    assert [j["job_id"] for j in jobs] == ["a", "b", "c", "d"]
    assert all(float(j["finish_s"]) > float(j["submit_s"]) for j in jobs)
    assert (out / "trace-dsfro-heuristic-s3-power.csv").stat().st_size > 0


def test_compare_writes_one_table_with_every_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, GOOD)
    out = tmp_path / "cmp"
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--compare"]
    args += ["--policies", "fifo,dsfro-heuristic", "--seeds", "1", "--workers", "1"]
    assert main([*args, "--out", str(out)]) == 0
    capsys.readouterr()
    table = (out / "trace-comparison.csv").read_text()
    assert "fifo" in table and "dsfro-heuristic" in table
    assert sorted(p.name for p in out.glob("*.png"))


class _LosesTheSecondRun(InlineExecutor):
    """Runs inline, or fails as the local pool does once a run has lost its worker too often."""

    workers = 2  # both runs in one map, as a pool of two runs them

    def __init__(self, lose: bool) -> None:
        self.lose = lose
        self.retries: list[int] = []

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        self.retries.append(retries)
        if self.lose and len(items) > 1:
            raise WorkerLost("task 2 of 2 lost its worker 2 times: killed by SIGKILL", task=1)
        return super().map(fn, items, stop, retries)


@pytest.mark.parametrize("lose", [False, True])
def test_compare_reruns_a_run_whose_worker_died_and_names_it_if_it_dies_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, lose: bool
) -> None:
    executor = _LosesTheSecondRun(lose)
    monkeypatch.setattr("solver.simulate.cli.make_executor", lambda *_: executor)
    trace = write_trace(tmp_path, GOOD)
    out = tmp_path / "cmp"
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--compare"]
    args += ["--policies", "fifo,dsfro-heuristic", "--seeds", "1", "--workers", "2"]
    assert main([*args, "--out", str(out)]) == (1 if lose else 0)
    assert executor.retries == [OFFLINE_RETRIES] and OFFLINE_RETRIES >= 1
    err = capsys.readouterr().err
    if lose:
        assert "dsfro-heuristic seed 1 lost its worker 2 times" in err
        assert "no comparison was written" in err
        assert not (out / "trace-comparison.csv").exists()
    else:
        assert "dsfro-heuristic" in (out / "trace-comparison.csv").read_text()


class _ClusterGoesAway(InlineExecutor):
    """Runs inline until its Ray cluster goes away, as RayExecutor then raises."""

    workers = 1

    def map(
        self,
        fn: Callable[[T], R],
        items: Sequence[T],
        stop: Stop | None = None,
        retries: int = 0,
    ) -> list[R]:
        raise RayConnectionError("lost the Ray cluster: no Ray cluster answers at h:1")


def test_compare_whose_ray_cluster_goes_away_says_so_and_writes_no_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("solver.simulate.cli.make_executor", lambda *_: _ClusterGoesAway())
    out = tmp_path / "cmp"
    args = ["simulate", "--trace", str(write_trace(tmp_path, GOOD)), "--cluster", str(CLUSTER)]
    args += ["--compare", "--policies", "fifo", "--seeds", "1", "--out", str(out)]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "dsfro simulate: lost the Ray cluster: no Ray cluster answers at h:1" in err
    assert "no comparison was written" in err and not (out / "trace-comparison.csv").exists()


@pytest.mark.parametrize(
    ("rows", "header", "expected"),
    [
        (
            ["a,0,t1,philly,1,600"],
            "job_id,submit_time_s,tenant,workload,num_gpus\n",
            ":1:duration_s:",
        ),
        (["a,-5,t1,philly,1,600,"], HEADER, ":2:submit_time_s:"),
        (["a,0,t1,philly,0,600,"], HEADER, ":2:num_gpus:"),
        (["a,0,t1,no-such-model,1,600,"], HEADER, ":2:workload:"),
        (["a,0,t1,philly,4096,600,"], HEADER, ":2:num_gpus:"),
    ],
)
def test_bad_input_is_exit_2_naming_file_row_and_column_and_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rows: list[str],
    header: str,
    expected: str,
) -> None:
    trace = write_trace(tmp_path, rows, header)
    out = tmp_path / "out"
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{trace}{expected}" in err
    assert not out.exists()


def test_a_scenario_or_files_but_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate"]) == 2
    assert main(["simulate", "--scenario", "philly-a", "--trace", "x.csv"]) == 2
    assert main(["simulate", "--trace", "x.csv"]) == 2
    assert "--cluster" in capsys.readouterr().err


@pytest.mark.parametrize("interval", ["1ms", "29s"])
def test_a_round_interval_shorter_than_the_round_spacing_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], interval: str
) -> None:
    """A millisecond's interval made a run of hundreds of millions of rounds that never ended."""
    out = tmp_path / "out"
    args = ["simulate", "--scenario", "philly-a", "--policies", "gavel", "--interval", interval]
    assert main([*args, "--out", str(out)]) == 2
    assert "--interval must be at least 30 s" in capsys.readouterr().err
    assert not out.exists()


TOKEN = "s3cr3t-token-for-simulate-tests"


def test_over_grpc_with_tls_and_a_token_as_dsfro_solve_server(
    pki: Pki,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DSFRO_TOKEN", raising=False)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    trace = write_trace(tmp_path, GOOD)
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER)]
    args += ["--policy", "dsfro-heuristic", "--seed", "2"]
    with running_server(tls=TlsFiles(pki.server.cert, pki.server.key), token=TOKEN) as srv:
        remote = ["--server", f"localhost:{srv.port}", "--tls-ca", str(pki.ca)]
        with_token = ["--token-file", str(token_file)]
        assert main([*args, *remote, *with_token, "--out", str(tmp_path / "a")]) == 0
        assert "jobs_finished             4" in capsys.readouterr().out
        # No token: the service refuses, and the run says so (never retried).
        assert main([*args, *remote, "--out", str(tmp_path / "b")]) == 1
        err = capsys.readouterr().err
        assert f"the DSFRO service at localhost:{srv.port}" in err and "UNAUTHENTICATED" in err
        monkeypatch.setenv("DSFRO_TOKEN", TOKEN)
        assert main([*args, *remote, "--out", str(tmp_path / "c")]) == 0
    assert main([*args, "--out", str(tmp_path / "here")]) == 0
    jobs = "trace-dsfro-heuristic-s2-jobs.csv"
    for remote_run in ("a", "c"):  # over gRPC the same plans as in this process
        assert (tmp_path / remote_run / jobs).read_text() == (tmp_path / "here" / jobs).read_text()


def test_connection_flags_need_the_server_and_go_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = write_trace(tmp_path, GOOD)
    out = tmp_path / "x"
    args = ["simulate", "--trace", str(trace), "--cluster", str(CLUSTER), "--out", str(out)]
    assert main([*args, "--tls", "--token-file", "t"]) == 2
    assert "--tls, --token-file only apply with --server" in capsys.readouterr().err
    assert main([*args, "--server", "127.0.0.1:1", "--tls-cert", "c"]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    assert not out.exists()
