"""How the client proves who it is and checks whom it talks to: TLS settings, the bearer token
(fixed, or from a file that may be rotated under a running client) and the rule that a token
never travels in plaintext beyond this machine."""

from __future__ import annotations

import ipaddress
import logging
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc

from solver.wire import read_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TlsConfig:
    """TLS for the channel.

    ``ca_file``: PEM CA bundle the server's certificate must chain to (None: the system roots);
    ``cert_file`` and ``key_file``: this client's certificate and key, for mutual TLS (both or
    neither); ``server_name``: the name checked in the server's certificate instead of the
    address's host (connecting by IP to a certificate issued for a DNS name).
    """

    ca_file: str | Path | None = None
    cert_file: str | Path | None = None
    key_file: str | Path | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("TlsConfig: cert_file and key_file go together (mutual TLS)")

    def credentials(self) -> grpc.ChannelCredentials:
        """Channel credentials with the files read now (ValueError naming an unreadable one,
        or a client certificate and key that are not one PEM pair: gRPC would only say that it
        failed to create a security handshaker)."""
        if self.cert_file is not None and self.key_file is not None:
            check_pair(self.cert_file, self.key_file, ssl.PROTOCOL_TLS_CLIENT)
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file, "TLS CA file"),
            private_key=_read(self.key_file, "TLS key file"),
            certificate_chain=_read(self.cert_file, "TLS certificate file"),
        )


def check_pair(cert: str | Path, key: str | Path, protocol: ssl._SSLMethod) -> ssl.SSLContext:
    """A context with `cert` and `key` loaded; ValueError naming both files when they are not
    one PEM pair (the service checks its own pair with it at start, a client before its
    channel)."""
    context = ssl.SSLContext(protocol)
    try:
        context.load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as e:
        raise ValueError(
            f"TLS certificate {cert} and key {key} do not load as a matching PEM pair: {e}"
        ) from e
    return context


def _read(path: str | Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"{what} {path}: {e.strerror or e}") from e


def checked_token(token: str, where: str) -> str:
    """`token` without surrounding whitespace; ValueError unless it is non-empty printable
    ASCII without spaces (anything else cannot travel in a header)."""
    token = token.strip()
    if not token:
        raise ValueError(f"{where} is empty")
    if not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError(f"{where} is not printable ASCII without spaces")
    return token


def first_token(text: str, where: str) -> str:
    """The first token of a token file: blank lines and ``#`` comments skipped (the server's
    token file format, so one file can serve both ends)."""
    for line in text.splitlines():
        if line.strip() and not line.strip().startswith("#"):
            return checked_token(line, f"{where}: the token")
    raise ValueError(f"{where} holds no token")


class TokenFile:
    """A bearer token kept in a file, re-read whenever the file's modification time or size
    changes (a rotated Kubernetes Secret); a changed file that holds no token yet (being
    written) is logged and the previous token kept."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._stamp = self._current_stamp()
        self._token = first_token(self._text(), str(self.path))

    def _current_stamp(self) -> tuple[int, int]:
        try:
            st = self.path.stat()
        except OSError as e:
            raise ValueError(f"token file {self.path}: {e.strerror or e}") from e
        return st.st_mtime_ns, st.st_size

    def _text(self) -> str:
        try:
            return read_text(self.path)
        except OSError as e:
            raise ValueError(f"token file {self.path}: {e.strerror or e}") from e
        except UnicodeDecodeError as e:
            raise ValueError(f"token file {self.path}: not UTF-8 text ({e.reason})") from e

    def token(self) -> str:
        """The current token."""
        try:
            stamp = self._current_stamp()
        except ValueError as e:
            log.warning("%s; keeping the token loaded before", e)
            return self._token
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._token = first_token(self._text(), str(self.path))
                    log.info("token file %s changed: token reloaded", self.path)
                except ValueError as e:
                    log.warning("%s; keeping the token loaded before", e)
            return self._token


def target_host(target: str) -> str | None:
    """The host of a gRPC target (``host:port``, ``[v6]:port``, ``dns:///host:port``,
    ``ipv4:a.b.c.d:port``); None for a Unix socket (``unix:``, ``unix-abstract:``)."""
    if target.startswith(("unix:", "unix-abstract:")):
        return None
    for scheme in ("dns:", "ipv4:", "ipv6:"):
        if target.startswith(scheme):
            target = target[len(scheme) :]
            if target.startswith("//"):  # dns://authority/host:port
                target = target[2:].partition("/")[2]
            target = target.split(",")[0]  # ipv4:a:p,b:p lists several addresses
            break
    if target.startswith("["):
        return target[1:].partition("]")[0]
    if target.count(":") == 1:
        return target.partition(":")[0]
    return target  # a bare host, or a bare IPv6 address


def is_local_target(target: str) -> bool:
    """Whether the target only reaches this machine (loopback address, localhost, a Unix
    socket): the only place a token may go in plaintext by default."""
    host = target_host(target)
    if host is None or host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
