"""solver.wire, the public path of the wire contract: every message and enum of dsfro.v1,
requests read from Python data, JSON text and files with errors that name what is wrong, and
the client taking any of those forms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from solver import wire
from solver._proto.dsfro.v1 import scheduler_pb2
from solver.client import Client
from solver.service.server import SchedulerServer
from tests.factories import make_request

ROOT = Path(__file__).resolve().parent.parent


def test_every_message_enum_and_the_service_stub_are_public() -> None:
    d = scheduler_pb2.DESCRIPTOR
    names = {*d.message_types_by_name, *d.enum_types_by_name}
    assert names <= set(wire.__all__)
    for name in names:
        assert getattr(wire, name) is getattr(scheduler_pb2, name)
    assert d.services_by_name["SchedulerService"].full_name == wire.SERVICE_NAME
    assert {n for n in wire.__all__ if not hasattr(wire, n)} == set()


def _as_dict() -> dict[str, object]:
    data: dict[str, object] = json_format.MessageToDict(make_request())
    return data


def test_a_request_from_python_data_or_json_text_is_the_message() -> None:
    request = make_request()
    data = _as_dict()
    assert wire.request_from_dict(data) == request
    assert wire.request_from_json(json.dumps(data)) == request
    assert wire.request_from_json(json.dumps(data).encode()) == request
    assert wire.message_from_dict({"job": "a"}, wire.JobAssignment).job == "a"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"jobs": [{"nam": "x"}]}', "not a valid SolveRequest: Failed to parse jobs field"),
        ('{"jobs": [{"nam": "x"}]}', '"nam"'),
        ('{"cluster": {}, "cluster": {}}', 'duplicate key "cluster"'),
        ("[1, 2]", "expected a JSON object (a SolveRequest)"),
        ('{"jobs": [', "request:1:11: malformed JSON"),
        ('{"options": {"timeBudget": "soon"}}', "options"),
    ],
)
def test_a_bad_request_names_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(wire.RequestFileError) as e:
        wire.request_from_json(text)
    assert says in str(e.value)
    assert isinstance(e.value, ValueError)


def test_a_request_file_error_names_the_file_and_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "jobs": [\n')
    with pytest.raises(wire.RequestFileError, match=r"bad\.json:3:1: malformed JSON"):
        wire.load_request_json(bad)
    with pytest.raises(wire.RequestFileError, match=r"missing\.json: cannot read"):
        wire.load_request_json(tmp_path / "missing.json")
    assert wire.load_request_json(ROOT / "instances" / "small.json").jobs


def test_the_client_takes_python_data_json_text_and_messages(server: SchedulerServer) -> None:
    data = _as_dict()
    with Client(f"127.0.0.1:{server.port}") as client:
        answers = [client.solve(x) for x in (data, json.dumps(data), make_request())]
        jobs = [sorted(a.job for a in r.plan.assignments) for r in answers]
        assert jobs == [sorted(j.name for j in make_request().jobs)] * 3
        plan = json_format.MessageToDict(answers[0].plan)
        assert client.evaluate(data, plan).valid
        assert client.validate(json.dumps(data)).valid
        with pytest.raises(ValueError, match="nam"):
            client.solve({"jobs": [{"nam": "x"}]})
        with pytest.raises(TypeError, match="expected a SolveRequest, a mapping or JSON text"):
            client.solve(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: t.encode("utf-8"),
        lambda t: b"\xef\xbb\xbf" + t.encode("utf-8"),  # Notepad's UTF-8
        lambda t: t.encode("utf-16"),  # PowerShell's `>`: UTF-16 LE with its mark
        lambda t: b"\xfe\xff" + t.encode("utf-16-be"),
        lambda t: t.encode("utf-32"),
    ],
    ids=["utf-8", "utf-8-bom", "utf-16-le", "utf-16-be", "utf-32"],
)
def test_a_request_file_reads_as_editors_save_it(encode: Any, tmp_path: Path) -> None:
    """A UTF-8 byte-order mark was "malformed JSON: Unexpected UTF-8 BOM", UTF-16 "cannot
    read"; each now reads as the plain file does."""
    text = wire.message_to_json(make_request())
    path = tmp_path / "req.json"
    path.write_bytes(encode(text))
    assert wire.read_text(path) == text
    assert wire.load_request_json(path) == make_request()


def test_text_of_no_known_encoding_is_a_decode_error() -> None:
    with pytest.raises(UnicodeDecodeError):
        wire.decode_text(b"\xff\xff\xff token")


def test_a_token_file_with_a_byte_order_mark_holds_the_token(tmp_path: Path) -> None:
    """The server refused it at start ("token 1 is not printable ASCII") and the client sent
    the mark with the token."""
    from solver.client.security import TokenFile
    from solver.service.security import TokenSource

    path = tmp_path / "token"
    path.write_bytes(b"\xef\xbb\xbfs3cr3t-token-0123456789\n")
    assert TokenFile(path).token() == "s3cr3t-token-0123456789"
    assert TokenSource(token_file=path).accepts("s3cr3t-token-0123456789")
