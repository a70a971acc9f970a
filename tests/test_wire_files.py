"""Request files (solver.wire.files): protobuf JSON or the binary wire format, told apart by
name and bytes; what cannot be read says so with the file's name. The CLI, batches and sweeps
read their instance files here."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.cli.main import main
from solver.offline.batch.runs import expand_inputs
from solver.wire import RequestFileError, SolveRequest, load_request_json
from solver.wire.files import load_request_file
from tests.backend_helpers import ROOT

SMALL = ROOT / "instances" / "small.json"


def small() -> SolveRequest:
    return load_request_json(SMALL)


def test_json_and_binary_files_read_as_the_same_request(tmp_path: Path) -> None:
    request = small()
    data = request.SerializeToString()
    assert data[:1] != b"{"
    assert load_request_file(SMALL) == request
    for name in ("snap.binpb", "snap.pb", "snap.bin", "snap"):  # by the bytes, not the name
        (tmp_path / name).write_bytes(data)
        assert load_request_file(tmp_path / name) == request, name
    (tmp_path / "json.binpb").write_text(SMALL.read_text())
    assert load_request_file(tmp_path / "json.binpb") == request


def test_a_binary_request_whose_bytes_read_as_json_text_is_still_read(tmp_path: Path) -> None:
    # A tiny request of ASCII bytes: its first field's tag is a newline, its length a "{".
    request = SolveRequest()
    request.cluster.gpu_types.add(name="x" * 119)  # the cluster: 2 + 2 + 119 = 123 bytes, "{"
    data = request.SerializeToString()
    assert data.decode("ascii").lstrip().startswith("{")
    (tmp_path / "ascii.req").write_bytes(data)
    assert load_request_file(tmp_path / "ascii.req") == request


def test_what_cannot_be_read_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "jobs": [\n')
    with pytest.raises(RequestFileError, match=r"bad\.json:3:1: malformed JSON"):
        load_request_file(bad)
    with pytest.raises(RequestFileError, match=r"missing\.json: cannot read"):
        load_request_file(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_text("  \n")
    with pytest.raises(RequestFileError, match=r"empty\.json: empty file"):
        load_request_file(tmp_path / "empty.json")
    (tmp_path / "snap.yaml").write_text("cluster:\n  nodes: []\n")
    with pytest.raises(RequestFileError, match=r"snap\.yaml: neither protobuf JSON"):
        load_request_file(tmp_path / "snap.yaml")
    (tmp_path / "cut.binpb").write_bytes(small().SerializeToString()[:-7])
    with pytest.raises(RequestFileError, match=r"cut\.binpb: neither protobuf JSON"):
        load_request_file(tmp_path / "cut.binpb")


def test_the_cli_and_batches_take_binary_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "small.binpb"
    binary.write_bytes(small().SerializeToString())
    (tmp_path / "notes.txt").write_text("not an instance")
    assert main(["validate", str(binary)]) == 0
    assert capsys.readouterr().out.startswith(f"OK: {len(small().jobs)} jobs")
    (tmp_path / "copy.json").write_text(SMALL.read_text())
    found = expand_inputs([str(tmp_path)])
    assert [Path(f).name for f in found] == ["copy.json", "small.binpb"]
