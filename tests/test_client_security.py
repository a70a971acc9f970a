"""The client's security and settings (solver.client.security): which targets are local, a
token refused in plaintext beyond loopback, bad settings refused up front, and TLS, mutual
TLS and tokens against a real loopback server."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

import solver
from solver.client import (
    Client,
    PermissionDenied,
    RetryPolicy,
    TlsConfig,
    Unauthenticated,
    Unavailable,
)
from solver.client.security import is_local_target
from solver.service.security import TlsFiles
from tests.client_helpers import FAST, JOBS, TOKEN, solved_jobs
from tests.factories import make_request
from tests.factories import running_server as running
from tests.tls_certs import Pki

ONCE = RetryPolicy(max_attempts=1)


@pytest.mark.parametrize(
    ("target", "local"),
    [
        ("127.0.0.1:50051", True),
        ("127.1.2.3:50051", True),
        ("localhost:50051", True),
        ("[::1]:50051", True),
        ("dns:///localhost:50051", True),
        ("ipv4:127.0.0.1:50051", True),
        ("unix:/run/dsfro.sock", True),
        ("10.0.0.7:50051", False),
        ("[2001:db8::1]:50051", False),
        ("dsfro.example.com:443", False),
        ("dns:///dsfro.example.com:443", False),
        ("localhost.evil.example:50051", False),
    ],
)
def test_which_targets_are_local(target: str, local: bool) -> None:
    assert is_local_target(target) is local


def test_a_token_is_refused_in_plaintext_beyond_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"refusing to send a bearer token in plaintext"):
        Client("10.0.0.7:50051", token=TOKEN)
    path = tmp_path / "token"
    path.write_text(TOKEN)
    with pytest.raises(ValueError, match=r"plaintext to dsfro\.example:443"):
        Client("dsfro.example:443", token_file=path)
    # Allowed: over TLS, to loopback, or when the caller says the network is trusted.
    Client("dsfro.example:443", token=TOKEN, tls=True).close()
    Client("127.0.0.1:50051", token=TOKEN).close()
    Client("10.0.0.7:50051", token=TOKEN, allow_insecure_token=True).close()
    Client("10.0.0.7:50051").close()


@pytest.mark.parametrize("address", ["", "   "])
def test_an_empty_address_is_a_value_error(address: str) -> None:
    """It was accepted, and gRPC's core logged "no server name supplied in dns URI"."""
    with pytest.raises(ValueError, match=r"^address: expected HOST:PORT"):
        Client(address)


def test_bad_client_settings_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="token or token_file, not both"):
        Client("127.0.0.1:1", token=TOKEN, token_file=tmp_path / "t")
    with pytest.raises(ValueError, match=r"token file .*missing"):
        Client("127.0.0.1:1", token_file=tmp_path / "missing")
    (tmp_path / "empty").write_text("# nothing yet\n")
    with pytest.raises(ValueError, match="holds no token"):
        Client("127.0.0.1:1", token_file=tmp_path / "empty")
    with pytest.raises(ValueError, match="not printable ASCII without spaces"):
        Client("127.0.0.1:1", token="two words")
    with pytest.raises(ValueError, match="cert_file and key_file go together"):
        TlsConfig(cert_file=tmp_path / "c.pem")
    with pytest.raises(ValueError, match=r"TLS CA file .*nope\.pem"):
        Client("127.0.0.1:1", tls=TlsConfig(ca_file=tmp_path / "nope.pem"))
    with pytest.raises(ValueError, match="max_attempts must be >= 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        Client("127.0.0.1:1").server_info(timeout=0)


# ---------------------------------------------------------------- TLS, mutual TLS, tokens


def test_tls_with_a_ca_bundle_and_a_server_name(pki: Pki) -> None:
    with running(tls=TlsFiles(pki.server.cert, pki.server.key)) as srv:
        address = f"127.0.0.1:{srv.port}"
        with Client(address, tls=TlsConfig(ca_file=pki.ca)) as client:
            assert solved_jobs(client.solve(make_request())) == JOBS
            assert client.health()
        with Client(address, tls=TlsConfig(ca_file=pki.ca, server_name="localhost")) as c:
            assert c.server_info().version == solver.__version__
        # The name checked is the override, which the certificate doesn't carry.
        wrong = TlsConfig(ca_file=pki.ca, server_name="other.example")
        for tls in (wrong, True, False):  # True: the system roots don't know the test CA
            with Client(address, tls=tls, retry=ONCE) as c, pytest.raises(Unavailable):
                c.server_info()


def test_mutual_tls_admits_the_allowed_client_only(pki: Pki) -> None:
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(tls=files, allowed_clients=frozenset({"scheduler"})) as srv:
        address = f"localhost:{srv.port}"

        def client(who: Any) -> Client:
            cert, key = (who.cert, who.key) if who is not None else (None, None)
            return Client(address, tls=TlsConfig(pki.ca, cert, key), retry=FAST)

        with client(pki.scheduler) as c:
            assert solved_jobs(c.solve(make_request())) == JOBS
        with client(pki.intruder) as c, pytest.raises(PermissionDenied) as denied:
            c.solve(make_request())
        assert denied.value.attempts == 1 and "intruder" in denied.value.message
        for who in (pki.rogue, None):  # another CA's certificate, or none: no handshake
            with client(who) as c, pytest.raises(Unavailable):
                c.server_info()


def test_tokens_over_tls(pki: Pki, tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    with running(tls=TlsFiles(pki.server.cert, pki.server.key), token=TOKEN) as srv:
        address = f"localhost:{srv.port}"
        tls = TlsConfig(ca_file=pki.ca)
        with Client(address, tls=tls, token=TOKEN) as client:
            assert solved_jobs(client.solve(make_request())) == JOBS
        with Client(address, tls=tls, token_file=path) as client:
            assert client.server_info().version == solver.__version__
        with Client(address, tls=tls, token="wrong-token-000000000000") as c:
            with pytest.raises(Unauthenticated) as wrong:
                c.server_info()
            assert c.health()  # probes need no token
        with Client(address, tls=tls) as c, pytest.raises(Unauthenticated) as missing:
            c.solve(make_request())
    assert wrong.value.attempts == 1 and "invalid bearer token" in wrong.value.message
    assert missing.value.attempts == 1 and "missing bearer token" in missing.value.message


def test_a_client_certificate_and_a_key_of_another_pair_are_named(pki: Pki) -> None:
    """gRPC only said "Failed to create security handshaker" (found from outside); the client
    now names both files, as the server does for its own pair at start."""
    tls = TlsConfig(pki.ca, pki.scheduler.cert, pki.intruder.key)
    with pytest.raises(ValueError, match="do not load as a matching PEM pair") as info:
        Client("127.0.0.1:1", tls=tls)
    assert str(pki.scheduler.cert) in str(info.value) and str(pki.intruder.key) in str(info.value)
    TlsConfig(pki.ca, pki.scheduler.cert, pki.scheduler.key).credentials()  # a pair: fine


def test_a_failure_to_connect_says_what_it_most_likely_means(pki: Pki) -> None:
    """gRPC names only the transport's error ("Socket closed", an SSL reason code); the
    client's Unavailable says what to change, in ``hint`` and in its text."""

    def failure(address: str, tls: TlsConfig | None) -> Unavailable:
        with Client(address, tls=tls, retry=ONCE) as c, pytest.raises(Unavailable) as info:
            c.server_info()
        assert info.value.hint in str(info.value)
        return info.value

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{s.getsockname()[1]}"
    assert failure(nobody, None).hint.startswith("nothing listens at that address")
    with running() as plain:
        said = failure(f"127.0.0.1:{plain.port}", TlsConfig(ca_file=pki.ca)).hint
        assert said.startswith("the server answers without TLS")
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(tls=TlsFiles(pki.server.cert, pki.server.key)) as tls, running(tls=files) as mtls:
        address = f"127.0.0.1:{tls.port}"
        assert "call it with TLS" in failure(address, None).hint
        untrusted = failure(address, TlsConfig(ca_file=pki.rogue.cert)).hint
        assert untrusted.startswith("the server's certificate is not signed by a CA this client")
        misnamed = failure(address, TlsConfig(ca_file=pki.ca, server_name="other.example")).hint
        assert misnamed.startswith("the server's certificate does not name the host called")
        address = f"127.0.0.1:{mtls.port}"
        assert "give one (--tls-cert, --tls-key)" in failure(address, TlsConfig(pki.ca)).hint
        rogue = TlsConfig(pki.ca, pki.rogue.cert, pki.rogue.key)
        assert "may not accept this client certificate" in failure(address, rogue).hint
    with running(tls=TlsFiles(pki.expired_server.cert, pki.expired_server.key)) as expired:
        lapsed = failure(f"127.0.0.1:{expired.port}", TlsConfig(ca_file=pki.ca)).hint
        assert lapsed.startswith("the server's certificate is outside its validity period")
