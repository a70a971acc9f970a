"""The ``dsfro`` commands that need the solver here (solver.cli.local): ``export`` writes the
full model as MPS or LP and refuses bad input and unwritable paths, ``serve`` refuses a bad
setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import run, write_request
from tests.factories import make_request


def test_serve_with_a_bad_setting_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "serve", "--port", "abc")
    assert code == 2
    assert "--port must be an integer in [0, 65535], got 'abc'" in err


def test_export_writes_mps_next_to_where_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    request = write_request(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = run(capsys, "export", request)
    assert code == 0, err
    text = (work / "request.mps").read_text()
    assert "ROWS" in text and "COLUMNS" in text and "OBJSENSE" in text
    assert out.startswith("wrote request.mps: ")
    assert " variables, " in out and " rows, maximise" in out


def test_export_lp_to_a_given_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "model.lp"
    code, out, err = run(
        capsys, "export", write_request(tmp_path), "--format", "lp", "--out", str(target)
    )
    assert code == 0, err
    text = target.read_text()
    assert "max" in text and "gang_size(" in text
    assert out.startswith(f"wrote {target}: ")


def test_export_rejects_bad_input_and_unwritable_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = make_request()
    req.jobs[0].max_gpus = 0
    code, _, err = run(capsys, "export", write_request(tmp_path, req))
    assert code == 2 and "jobs[0].max_gpus" in err
    code, _, err = run(capsys, "export", write_request(tmp_path), "--format", "xml")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(
        capsys, "export", write_request(tmp_path), "--out", str(tmp_path / "missing" / "m.mps")
    )
    assert code == 2 and "cannot write" in err and "Traceback" not in err
