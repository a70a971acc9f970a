"""Helpers of the CLI tests (tests/test_cli_*.py): an instance file written from a SolveRequest,
and ``dsfro`` run in-process with its exit code and captured output."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.cli.main import main
from solver.core.solver import Solver
from tests.factories import make_request


def write_request(tmp_path: Path, req: pb.SolveRequest | None = None) -> str:
    path = tmp_path / "request.json"
    path.write_text(json_format.MessageToJson(req if req is not None else make_request()))
    return str(path)


def run(
    capsys: pytest.CaptureFixture[str], *argv: str, solver: Solver | None = None
) -> tuple[int, str, str]:
    code = main(list(argv), solver=solver)
    out, err = capsys.readouterr()
    return code, out, err
