"""Certificates for TLS tests, made afresh by each test session (no key is checked in).

One CA signs the server (for localhost and 127.0.0.1) and two clients, ``scheduler`` and
``intruder``; a second, unrelated CA signs a ``rogue`` client the server must not trust.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Identity:
    cert: Path
    key: Path

    def pair(self) -> tuple[bytes, bytes]:
        return self.key.read_bytes(), self.cert.read_bytes()


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: Identity
    scheduler: Identity
    """A client whose certificate the CA signed, named ``scheduler``."""
    intruder: Identity
    """A client the CA signed too, named ``intruder``: authenticated, not allowed."""
    rogue: Identity
    """A client signed by another CA."""
    expired_server: Identity
    """The server's names, signed by the CA, expired a day ago."""


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(
    subject: str, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, *, expired: bool = False
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    start = now - datetime.timedelta(days=3 if expired else 0, minutes=5)
    end = now - datetime.timedelta(days=1) if expired else now + datetime.timedelta(days=2)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
    )


def _ca(directory: Path, name: str) -> tuple[Path, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    cert = (
        _builder(name, _name(name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / f"{name}.crt"
    _write_cert(path, cert)
    return path, cert, key


def _leaf(
    directory: Path,
    name: str,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    server: bool,
    expired: bool = False,
) -> Identity:
    key = _key()
    builder = _builder(name, ca_cert.subject, key.public_key(), expired=expired).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), critical=True
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    identity = Identity(directory / f"{name}.crt", directory / f"{name}.key")
    _write_cert(identity.cert, cert)
    _write_key(identity.key, key)
    return identity


def make_pki(directory: Path) -> Pki:
    """Write the CAs, the server's and the clients' certificates and keys into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_cert, ca_key = _ca(directory, "dsfro-test-ca")
    _, other_cert, other_key = _ca(directory, "other-ca")
    return Pki(
        ca=ca,
        server=_leaf(directory, "server", ca_cert, ca_key, server=True),
        scheduler=_leaf(directory, "scheduler", ca_cert, ca_key, server=False),
        intruder=_leaf(directory, "intruder", ca_cert, ca_key, server=False),
        rogue=_leaf(directory, "rogue", other_cert, other_key, server=False),
        expired_server=_leaf(directory, "expired", ca_cert, ca_key, server=True, expired=True),
    )
