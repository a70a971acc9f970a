"""TLS, mutual TLS, bearer tokens and the health-only port, on a real loopback server."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1.scheduler_pb2_grpc import SchedulerServiceStub as Stub
from solver._proto.grpc.reflection.v1 import reflection_pb2 as reflection_v1
from solver._proto.grpc.reflection.v1 import reflection_pb2_grpc as reflection_v1_grpc
from solver.service.config import (
    ConfigError,
    add_server_arguments,
    config_from_args,
)
from solver.service.security import TlsFiles
from tests.factories import make_request
from tests.factories import running_server as running
from tests.tls_certs import Identity, Pki, make_pki

WAIT = 30.0
TOKEN = "s3cr3t-token-for-tests-0001"
OTHER_TOKEN = "an0ther-token-for-tests-0002"


def tls_channel(
    port: int, ca: Path, client: Identity | None = None, *, name: str = "localhost"
) -> grpc.Channel:
    key, cert = client.pair() if client is not None else (None, None)
    credentials = grpc.ssl_channel_credentials(ca.read_bytes(), key, cert)
    return grpc.secure_channel(f"{name}:{port}", credentials)


def solve(channel: grpc.Channel, token: str | None = None) -> pb.SolveResponse:
    metadata = (("authorization", f"Bearer {token}"),) if token is not None else None
    stub = Stub(channel)  # type: ignore[no-untyped-call]  # generated, unannotated
    response: pb.SolveResponse = stub.Solve(make_request(), timeout=WAIT, metadata=metadata)
    return response


def refused(channel: grpc.Channel, token: str | None = None) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        solve(channel, token)
    return info.value


def health(channel: grpc.Channel) -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    status: int = stub.Check(health_pb2.HealthCheckRequest(), timeout=WAIT).status
    return status


# ---------------------------------------------------------------- TLS


def test_tls_serves_a_client_that_trusts_the_ca_and_no_plaintext_one(pki: Pki) -> None:
    with running(tls=TlsFiles(pki.server.cert, pki.server.key)) as srv:
        with tls_channel(srv.port, pki.ca) as ch:
            assert len(solve(ch).plan.assignments) == len(make_request().jobs)
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            assert refused(ch).code() is grpc.StatusCode.UNAVAILABLE
        rogue_ca = pki.rogue.cert  # not the CA that signed the server
        with tls_channel(srv.port, rogue_ca) as ch:
            assert refused(ch).code() is grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_lets_allowed_clients_in_and_keeps_others_out(pki: Pki) -> None:
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(tls=files, allowed_clients=frozenset({"scheduler"})) as srv:
        with tls_channel(srv.port, pki.ca, pki.scheduler) as ch:
            assert solve(ch).plan.assignments
        with tls_channel(srv.port, pki.ca, pki.intruder) as ch:
            err = refused(ch)
            assert err.code() is grpc.StatusCode.PERMISSION_DENIED
            assert "intruder" in (err.details() or "")
        # Neither a certificate from another CA nor none at all gets past the handshake.
        with tls_channel(srv.port, pki.ca, pki.rogue) as ch:
            assert refused(ch).code() is grpc.StatusCode.UNAVAILABLE
        with tls_channel(srv.port, pki.ca) as ch:
            assert refused(ch).code() is grpc.StatusCode.UNAVAILABLE


def test_mutual_tls_without_a_name_list_admits_any_client_the_ca_signed(pki: Pki) -> None:
    with running(tls=TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)) as srv:
        for client in (pki.scheduler, pki.intruder):
            with tls_channel(srv.port, pki.ca, client) as ch:
                assert solve(ch).plan.assignments


def test_a_rotated_server_certificate_is_served_to_new_connections(
    pki: Pki, tmp_path: Path
) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki.server.cert, cert)
    shutil.copy(pki.server.key, key)
    with running(tls=TlsFiles(cert, key)) as srv:
        with tls_channel(srv.port, pki.ca) as ch:
            assert solve(ch).plan.assignments
        fresh = make_pki(tmp_path / "fresh")  # a new CA and server pair, as a rotation brings
        cert.write_bytes(fresh.server.cert.read_bytes())
        key.write_bytes(fresh.server.key.read_bytes())
        _touch_later(cert, key)
        with tls_channel(srv.port, fresh.ca) as ch:
            assert solve(ch).plan.assignments
        with tls_channel(srv.port, pki.ca) as ch:
            assert refused(ch).code() is grpc.StatusCode.UNAVAILABLE


def test_a_half_written_certificate_keeps_the_loaded_one(pki: Pki, tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    shutil.copy(pki.server.cert, cert)
    shutil.copy(pki.server.key, key)
    with running(tls=TlsFiles(cert, key)) as srv:
        cert.write_bytes(pki.server.cert.read_bytes()[:100])
        _touch_later(cert)
        with tls_channel(srv.port, pki.ca) as ch:
            assert solve(ch).plan.assignments


def _touch_later(*paths: Path) -> None:
    """Move the files' mtimes forward: a rewrite within the clock's tick is still seen."""
    for path in paths:
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))


# ---------------------------------------------------------------- tokens


def test_tokens_admit_the_right_caller_and_refuse_others_before_decoding(
    tmp_path: Path,
) -> None:
    with (
        running(token=TOKEN, metrics_port=0) as srv,
        grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        assert solve(ch, TOKEN).plan.assignments
        missing = refused(ch)
        assert missing.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "missing bearer token" in (missing.details() or "")
        wrong = refused(ch, OTHER_TOKEN)
        assert wrong.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "invalid bearer token" in (wrong.details() or "")
        # Bytes that are no request at all: refused for the token, never decoded.
        raw = ch.unary_unary("/dsfro.v1.SchedulerService/Solve")
        with pytest.raises(grpc.RpcError) as info:
            raw(b"\xff\xff\xff", timeout=WAIT)
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert health(ch) == health_pb2.HealthCheckResponse.SERVING  # probes carry no token
        with pytest.raises(grpc.RpcError) as info:
            stub = reflection_v1_grpc.ServerReflectionStub(ch)  # type: ignore[no-untyped-call]
            request = reflection_v1.ServerReflectionRequest(list_services="")
            next(iter(stub.ServerReflectionInfo(iter([request]), timeout=WAIT)))
        assert info.value.code() is grpc.StatusCode.UNAUTHENTICATED
        url = f"http://127.0.0.1:{srv.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=WAIT) as page:
            text = page.read().decode()
    counted = re.search(r'^dsfro_rejections_total\{reason="unauthenticated"\} (\S+)$', text, re.M)
    assert counted is not None and float(counted.group(1)) == 4.0


def test_a_token_file_is_re_read_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"# rotated weekly\n{TOKEN}\n")
    with running(token_file=path) as srv, grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        assert solve(ch, TOKEN).plan.assignments
        assert refused(ch, OTHER_TOKEN).code() is grpc.StatusCode.UNAUTHENTICATED
        path.write_text(f"{OTHER_TOKEN}\n")
        _touch_later(path)
        assert solve(ch, OTHER_TOKEN).plan.assignments
        assert refused(ch, TOKEN).code() is grpc.StatusCode.UNAUTHENTICATED
        path.write_text("")  # a rotation caught half-way: the loaded tokens stay
        _touch_later(path)
        assert solve(ch, OTHER_TOKEN).plan.assignments


def test_tls_tokens_and_allowed_clients_together(pki: Pki) -> None:
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(tls=files, allowed_clients=frozenset({"scheduler"}), token=TOKEN) as srv:
        with tls_channel(srv.port, pki.ca, pki.scheduler) as ch:
            assert solve(ch, TOKEN).plan.assignments
            assert refused(ch).code() is grpc.StatusCode.UNAUTHENTICATED
        with tls_channel(srv.port, pki.ca, pki.intruder) as ch:
            assert refused(ch, TOKEN).code() is grpc.StatusCode.PERMISSION_DENIED


# ---------------------------------------------------------------- health port


def test_the_health_port_answers_probes_in_plaintext_and_serves_nothing_else(pki: Pki) -> None:
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(tls=files, health_port=0) as srv:
        assert srv.health_port is not None and srv.health_port != srv.port
        with grpc.insecure_channel(f"127.0.0.1:{srv.health_port}") as ch:
            assert health(ch) == health_pb2.HealthCheckResponse.SERVING
            assert refused(ch).code() is grpc.StatusCode.UNIMPLEMENTED
        srv.stop(None)
        with grpc.insecure_channel(f"127.0.0.1:{srv.health_port}") as ch:
            with pytest.raises(grpc.RpcError) as info:
                health(ch)
            assert info.value.code() is grpc.StatusCode.UNAVAILABLE


# ---------------------------------------------------------------- settings


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(argv)


def test_security_settings_from_flags_and_environment(pki: Pki, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN + "\n")
    env = {
        "DSFRO_TLS_CERT": str(pki.server.cert),
        "DSFRO_TLS_KEY": str(pki.server.key),
        "DSFRO_TLS_CLIENT_CA": str(pki.ca),
        "DSFRO_TLS_ALLOWED_CLIENTS": "scheduler, planner",
        "DSFRO_TOKEN_FILE": str(tokens),
        "DSFRO_HEALTH_PORT": "50052",
    }
    c = config_from_args(_args(), env)
    assert c.tls == TlsFiles(pki.server.cert, pki.server.key, pki.ca)
    assert c.allowed_clients == {"scheduler", "planner"}
    assert c.token_file == tokens and c.token is None and c.health_port == 50052
    c = config_from_args(_args("--tls-allowed-clients", "ops"), env)
    assert c.allowed_clients == {"ops"}
    assert config_from_args(_args(), {"DSFRO_TOKEN": TOKEN}).token == TOKEN
    plain = config_from_args(_args(), {})
    assert plain.tls is None and not plain.authenticates and plain.health_port is None


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--tls-cert", "{cert}"], {}, "--tls-cert needs --tls-key"),
        ([], {"DSFRO_TLS_KEY": "{key}"}, "DSFRO_TLS_KEY needs --tls-cert"),
        (["--tls-cert", "{cert}", "--tls-key", "{other_key}"], {}, "do not load as a matching"),
        (["--tls-cert", "{cert}", "--tls-key", "{missing}"], {}, "TLS key .*missing"),
        (
            ["--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-client-ca", "{key}"],
            {},
            "client CA .* is not PEM certificates",
        ),
        (["--tls-client-ca", "{ca}"], {}, "--tls-client-ca needs --tls-cert"),
        (
            ["--tls-cert", "{cert}", "--tls-key", "{key}", "--tls-allowed-clients", "a"],
            {},
            "--tls-allowed-clients needs mutual TLS",
        ),
        ([], {"DSFRO_TOKEN": "short"}, "DSFRO_TOKEN: token 1 has 5 characters"),
        (["--token-file", "{empty}"], {}, "holds no token"),
        (["--token-file", "{missing}"], {}, "token file .*missing"),
        (["--health-port", "70000"], {}, "--health-port must be an integer"),
    ],
)
def test_bad_security_settings_name_their_source(
    pki: Pki, tmp_path: Path, argv: list[str], env: dict[str, str], message: str
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("# nothing yet\n")
    paths = {
        "cert": pki.server.cert,
        "key": pki.server.key,
        "other_key": pki.scheduler.key,
        "ca": pki.ca,
        "empty": empty,
        "missing": tmp_path / "missing",
    }

    def fill(s: str) -> str:
        return s.format(**{k: str(v) for k, v in paths.items()})

    with pytest.raises(ConfigError, match=message):
        config_from_args(_args(*map(fill, argv)), {k: fill(v) for k, v in env.items()})
