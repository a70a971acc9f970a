"""``dsfro`` against a running service (solver.cli.remote): ``solve --server``, ``dsfro health``
(exit codes a container HEALTHCHECK can use, no solver loaded), TLS, mutual TLS and bearer
tokens, and connection settings refused up front."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.service.security import TlsFiles
from solver.service.server import SchedulerServer
from tests.cli_helpers import run, write_request
from tests.factories import make_request
from tests.factories import running_server as running
from tests.fakes import Canned, Recording, records
from tests.tls_certs import Pki


def test_solve_on_a_running_server(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    server: SchedulerServer,
) -> None:
    req = make_request()
    address = f"127.0.0.1:{server.port}"
    code, out, err = run(
        capsys, "solve", write_request(tmp_path, req), "--json", "--server", address
    )
    assert code == 0, err
    remote = json_format.Parse(out, pb.SolveResponse())
    code, out, err = run(capsys, "solve", write_request(tmp_path, req), "--json")
    assert remote.plan == json_format.Parse(out, pb.SolveResponse()).plan

    req.jobs[0].max_gpus = 0
    code, out, err = run(capsys, "solve", write_request(tmp_path, req), "--server", address)
    assert code == 2
    assert "jobs[0].max_gpus: must be >= min_gpus (1)" in err
    assert "Traceback" not in err


def test_solve_on_an_unreachable_server_exits_1(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "solve", write_request(tmp_path), "--server", "127.0.0.1:1")
    assert code == 1
    assert "UNAVAILABLE" in err and "Traceback" not in err


TOKEN = "s3cr3t-token-for-cli-tests-01"


def test_health_of_a_running_server(
    server: SchedulerServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    address = f"127.0.0.1:{server.port}"
    assert run(capsys, "health", "--server", address) == (0, f"{address}: SERVING\n", "")
    # Beside the server (a container's HEALTHCHECK) the address comes from its settings.
    monkeypatch.delenv("DSFRO_HEALTH_PORT", raising=False)
    monkeypatch.setenv("DSFRO_PORT", str(server.port))
    assert run(capsys, "health") == (0, f"{address}: SERVING\n", "")
    monkeypatch.setenv("DSFRO_HEALTH_PORT", "1")
    code, _, err = run(capsys, "health")
    assert code == 1 and err.startswith("dsfro: 127.0.0.1:1: UNAVAILABLE: ")
    assert run(capsys, "health", "--server", address, "--service", "no.such.Service") == (
        1,
        "",
        f"dsfro: {address}: SERVICE_UNKNOWN\n",
    )
    server.health.enter_graceful_shutdown()
    assert run(capsys, "health", "--server", address) == (
        1,
        "",
        f"dsfro: {address}: NOT_SERVING\n",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--server", "127.0.0.1:1"], "dsfro: 127.0.0.1:1: UNAVAILABLE: "),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--timeout", "soon"], "dsfro: error: --timeout: invalid duration 'soon'"),
        (["--tls-cert", "c.pem"], "dsfro: error: --tls-cert and --tls-key go together"),
        (["--tls-ca", "/no/such/ca.pem"], "dsfro: error: TLS CA file /no/such/ca.pem: "),
    ],
)
def test_health_fails_with_1_never_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    # Docker reserves exit code 2 of a HEALTHCHECK: every failure is 1.
    code, out, err = run(capsys, "health", "--timeout", "1s", *argv)
    assert (code, out) == (1, "")
    assert message in err and "Traceback" not in err


def test_health_is_fast_and_loads_no_solver() -> None:
    code = (
        "import json, sys, time\n"
        "start = time.monotonic()\n"
        "from solver.cli.main import main\n"
        "rc = main(['health', '--server', '127.0.0.1:1', '--timeout', '1s'])\n"
        "heavy = ('numpy', 'ortools', 'highspy', 'pyomo', 'solver.app.pipeline', "
        "'solver.service.server', 'solver.core', 'solver.offline', "
        "'solver.simulate')\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith(heavy))]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
        check=True,
    )
    assert json.loads(done.stdout) == [1, []]
    assert "UNAVAILABLE" in done.stderr


def test_solve_over_tls_with_a_token(
    pki: Pki,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = tmp_path / "seen.jsonl"
    request = write_request(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.delenv("DSFRO_TOKEN", raising=False)
    server_tls = TlsFiles(pki.server.cert, pki.server.key)
    with running(Recording(seen), tls=server_tls, token=TOKEN) as srv:
        address = f"localhost:{srv.port}"
        tls = ["--server", address, "--tls-ca", str(pki.ca)]
        code, out, err = run(
            capsys, "solve", request, "--json", *tls, "--token-file", str(token_file)
        )
        assert code == 0, err
        assert len(json_format.Parse(out, pb.SolveResponse()).plan.assignments) == 3
        code, _, err = run(capsys, "solve", request, *tls)
        # The last line: the in-process server may log above it.
        assert code == 1
        assert err.splitlines()[-1].startswith(
            f"dsfro: {address}: UNAUTHENTICATED: missing bearer token"
        )
        monkeypatch.setenv("DSFRO_TOKEN", TOKEN)
        code, _, err = run(capsys, "solve", request, *tls)
        assert code == 0, err
        # The server's certificate names localhost, not other.example; plaintext is no TLS.
        code, _, err = run(capsys, "solve", request, *tls, "--tls-server-name", "other.example")
        assert code == 1 and "UNAVAILABLE" in err
        assert run(capsys, "health", *tls) == (0, f"{address}: SERVING\n", "")
        code, _, err = run(capsys, "health", "--server", address)
        assert code == 1 and "UNAVAILABLE" in err
    assert len(records(seen)) == 2


def test_health_and_solve_with_a_client_certificate(
    pki: Pki,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(Canned(), tls=files, allowed_clients=frozenset({"scheduler"})) as srv:
        tls = ["--server", f"127.0.0.1:{srv.port}", "--tls-ca", str(pki.ca)]
        cert = ["--tls-cert", str(pki.scheduler.cert), "--tls-key", str(pki.scheduler.key)]
        assert run(capsys, "health", *tls, *cert)[0] == 0
        assert run(capsys, "health", *tls)[0] == 1  # no certificate: no handshake
        code, _, err = run(capsys, "solve", write_request(tmp_path), *tls, *cert)
        assert code == 0, err
        intruder = ["--tls-cert", str(pki.intruder.cert), "--tls-key", str(pki.intruder.key)]
        code, _, err = run(capsys, "solve", write_request(tmp_path), *tls, *intruder)
        assert code == 1 and "PERMISSION_DENIED" in err and "intruder" in err


def test_bad_connection_settings_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    request = write_request(tmp_path)
    code, _, err = run(capsys, "solve", request, "--tls", "--token-file", "t")
    assert (code, err) == (2, "dsfro: error: --tls, --token-file only apply with --server\n")
    monkeypatch.setenv("DSFRO_TOKEN", TOKEN)
    code, _, err = run(capsys, "solve", request, "--server", "10.0.0.7:50051")
    assert code == 2
    assert err.startswith("dsfro: error: refusing to send a bearer token in plaintext to 10.0.0.7")
    code, _, err = run(capsys, "solve", request, "--server", "127.0.0.1:1", "--tls-key", "k")
    assert (code, err) == (2, "dsfro: error: --tls-cert and --tls-key go together\n")
    missing = str(tmp_path / "missing")
    code, _, err = run(capsys, "solve", request, "--server", "127.0.0.1:1", "--token-file", missing)
    assert code == 2 and err.startswith(f"dsfro: error: token file {missing}: ")


def test_a_failed_handshake_is_two_lines_of_dsfro_and_none_of_grpc(pki: Pki) -> None:
    """``dsfro health`` against a TLS server with a CA that did not sign its certificate, in
    a fresh process: the failure and what it means, without the gRPC core's own log line."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    with running(tls=TlsFiles(pki.server.cert, pki.server.key)) as srv:
        address = f"127.0.0.1:{srv.port}"
        argv = ["health", "--server", address, "--tls-ca", str(pki.rogue.cert)]
        done = subprocess.run(
            [sys.executable, "-c", f"from solver.cli.main import main; main({argv!r})"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parent.parent,
            env=env,
        )
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0].startswith(f"dsfro: {address}: UNAVAILABLE:")
    assert lines[1].startswith(f"dsfro: {address}: the server's certificate is not signed")
