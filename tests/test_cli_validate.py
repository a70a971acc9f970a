"""``dsfro validate`` (solver.cli.main), and exit code 2 without a traceback for input the
commands cannot use: invalid snapshots, unreadable or missing files, usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import run, write_request
from tests.factories import make_request


def test_validate_a_good_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", write_request(tmp_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "OK: 3 jobs, 3 nodes, 2 GPU types"
    assert [line.split()[0] for line in lines[1:4]] == ["llm", "bert", "resnet"]
    assert all(" configurations, best " in line for line in lines[1:4])
    assert lines[4:] == [
        "GPU types:",
        "  A100-80GB  efficiency 0.61 (A100), MIG geometry of A100-80GB",
        "  H100-SXM   efficiency 0.42 (H100), MIG geometry of H100-80GB",
    ]


def test_validate_a_bad_file_exits_2_with_the_field_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = make_request()
    req.jobs[2].max_gpus = 1
    req.cluster.nodes[0].rack = ""
    code, out, err = run(capsys, "validate", write_request(tmp_path, req))
    assert code == 2
    assert out == ""
    assert err.splitlines()[:2] == [
        "cluster.nodes[0].rack: must not be empty",
        "jobs[2].max_gpus: must be >= min_gpus (2), got 1",
    ]
    assert "2 problem(s)" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"cluster": {"nodes": [}', "malformed JSON"),
        ('{"cluster": {"colour": "red"}}', 'no field named "colour"'),
        ('{"jobs": [{"minGpus": "many"}]}', "not a valid SolveRequest"),
    ],
)
@pytest.mark.parametrize("command", ["solve", "validate"])
def test_unreadable_input_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out, err = run(capsys, command, str(path))
    assert code == 2
    assert out == ""
    assert err.startswith(f"dsfro: error: {path}")
    assert message in err
    assert "Traceback" not in err


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", str(tmp_path / "none.json"))
    assert code == 2
    assert "cannot read" in err


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "solve", write_request(tmp_path), "--time-budget", "soon")
    assert code == 2
    assert "invalid duration 'soon'" in err
    assert run(capsys, "frobnicate")[0] == 2
    assert run(capsys, "--help")[0] == 0


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """`dsfro validate f | head -1`: the closed pipe was "dsfro: internal error:
    BrokenPipeError" (exit 1); now nothing on stderr and exit 141, as a shell tool's."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "solver.cli.main", "validate", "instances/medium.json"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


def test_a_full_device_on_stdout_is_named_not_an_internal_error() -> None:
    """`dsfro validate f > /dev/full` was "dsfro: internal error: OSError: [Errno 28] ..."."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "solver.cli.main", "validate", "instances/medium.json"],
            cwd=root,
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert err == "dsfro: error: cannot write the output: No space left on device\n"
