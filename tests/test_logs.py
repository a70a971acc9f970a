"""Request ids and access logs, in process and from server.py's JSON output."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1.scheduler_pb2_grpc import SchedulerServiceStub as Stub
from solver.service.config import ServerConfig
from solver.service.logs import (
    REQUEST_ID_HEADER,
    ServerLogHandler,
    TextFormatter,
    accepted_request_id,
    configure_logging,
    json_formatter,
)
from solver.service.server import build_server, main
from tests.factories import make_request
from tests.fakes import RequestIds, records
from tests.service_helpers import kill, server_py

ROOT = Path(__file__).resolve().parents[1]
WAIT = 30.0


def _record(message: str, rid: str | None) -> logging.LogRecord:
    record = logging.LogRecord("solver.test", logging.INFO, __file__, 1, message, (), None)
    record.request_id = rid
    return record


def test_a_callers_request_id_is_kept_only_when_it_is_safe_to_log() -> None:
    assert accepted_request_id([(REQUEST_ID_HEADER, "round-42.a:b_c")]) == "round-42.a:b_c"
    for bad in ("", "a b", "x" * 129, 'quote"', "é"):
        fresh = accepted_request_id([(REQUEST_ID_HEADER, bad)])
        assert re.fullmatch(r"[0-9a-f]{32}", fresh)
    assert accepted_request_id([]) != accepted_request_id([])


def test_formats_carry_the_request_id() -> None:
    line = json.loads(json_formatter().format(_record("solved", "r-1")))
    assert line["message"] == "solved" and line["request_id"] == "r-1"
    assert line["level"] == "INFO" and line["logger"] == "solver.test" and "time" in line
    assert TextFormatter().format(_record("solved", "r-1")).endswith("solver.test [r-1]: solved")
    assert TextFormatter().format(_record("idle", None)).endswith("solver.test: idle")


def test_every_call_gets_a_request_id_that_reaches_the_solve_and_its_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen = tmp_path / "ids.jsonl"
    config = ServerConfig(host="127.0.0.1", port=0, max_concurrent_solves=1)
    srv = build_server(config, RequestIds(seen))
    srv.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch, caplog.at_level("INFO"):
            stub = Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated
            _, call = stub.Solve.with_call(
                make_request(), timeout=WAIT, metadata=((REQUEST_ID_HEADER, "round-7"),)
            )
            assert (REQUEST_ID_HEADER, "round-7") in call.initial_metadata()
            _, call = stub.Solve.with_call(make_request(), timeout=WAIT)
            [fresh] = [v for k, v in call.initial_metadata() if k == REQUEST_ID_HEADER]
            bad = make_request()
            bad.jobs[0].weight = -1.0
            with pytest.raises(grpc.RpcError) as info:
                stub.Solve(bad, timeout=WAIT, metadata=((REQUEST_ID_HEADER, "round-8"),))
            assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    finally:
        srv.stop(None).wait(WAIT)
    assert records(seen) == ["round-7", fresh]  # in the solve worker
    access = [
        (r.getMessage().split()[1], r.request_id)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "solver.service.access"
    ]
    assert access == [("OK", "round-7"), ("OK", fresh), ("INVALID_ARGUMENT", "round-8")]


def test_server_py_writes_json_lines_with_the_callers_request_id() -> None:
    proc = server_py(DSFRO_LOG_FORMAT="json")
    lines: list[str] = []
    port = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "listening on" in line:
                port.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert port.wait(WAIT), "".join(lines)
        [listening] = [json.loads(x)["message"] for x in lines if "listening on" in x]
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", listening)
        assert found is not None
        with grpc.insecure_channel(f"127.0.0.1:{found.group(1)}") as ch:
            stub = Stub(ch)  # type: ignore[no-untyped-call]  # generated, unannotated
            reply = stub.Solve(
                make_request(), timeout=WAIT, metadata=((REQUEST_ID_HEADER, "sched-42"),)
            )
            assert isinstance(reply, pb.SolveResponse) and reply.plan.assignments
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the server prints its threads' stacks
            reader.join(2)
            pytest.fail("server.py outlived SIGTERM:\n" + "".join(lines[-200:]))
        assert proc.returncode == 0
    finally:
        kill(proc)
    reader.join(WAIT)
    records = [json.loads(x) for x in lines]  # every line is one JSON object
    mine = [r for r in records if r["request_id"] == "sched-42"]
    assert any(r["message"].startswith("solved 3 jobs") for r in mine)
    [access] = [r for r in mine if r["logger"] == "solver.service.access"]
    assert access["method"] == "/dsfro.v1.SchedulerService/Solve" and access["code"] == "OK"
    assert 0 < access["seconds"] < WAIT


def test_a_bad_log_format_is_refused_by_name() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "server.py"), "--port", "0", "--log-format", "xml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert proc.returncode == 2
    assert "--log-format" in proc.stderr and "'xml'" in proc.stderr


def test_logging_is_configured_once_and_only_to_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad setting leaves logging alone (a handler on a test runner's captured stderr, closed
    later, made Pyomo's output capture hang); configuring again replaces the handler."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # restored after the test
    monkeypatch.setattr(root, "level", root.level)
    before = list(root.handlers)
    assert main(["--port", "abc"], {}) == 2
    assert root.handlers == before
    configure_logging("INFO")
    configure_logging("DEBUG", "json")
    [ours] = [h for h in root.handlers if isinstance(h, ServerLogHandler)]
    assert root.level == logging.DEBUG and ours.stream is sys.stderr
