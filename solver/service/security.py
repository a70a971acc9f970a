"""Who may call the service: TLS and mutual TLS credentials that follow their files on disk,
bearer tokens, and the names of the client certificates allowed to call.

Certificates, keys and token files are re-read when they change (a Kubernetes Secret rotates
without a restart). A changed file that does not load (half-written, mismatched key) is logged
and the last good one is kept, so a rotation can never leave the server without credentials.
Health checks are exempt from tokens and client names: a probe carries no credentials.
"""

from __future__ import annotations

import hmac
import logging
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from solver.client.security import check_pair
from solver.service.handlers import Behavior, CallInterceptor, map_behaviors
from solver.wire import decode_text

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16
"""Shortest bearer token accepted: shorter ones are guessable."""
MAX_TOKENS = 64
"""Most tokens a file may hold (one per line): enough for overlapping rotations."""


class CredentialError(ValueError):
    """A certificate, key or token file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class TlsFiles:
    """The server's certificate chain and key, and the CA its clients' certificates must chain
    to (mutual TLS) or None (server-only TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise CredentialError(f"{what} {path}: {e.strerror or e}") from e


def _token_text(path: Path) -> str:
    """A token file's text (a byte-order mark, which Windows editors write, is not part of
    the first token); CredentialError if it cannot be read as text."""
    try:
        return decode_text(_read(path, "token file"))
    except UnicodeDecodeError as e:
        raise CredentialError(f"token file {path}: not UTF-8 text ({e.reason})") from e


def load_tls(files: TlsFiles) -> tuple[bytes, bytes, bytes | None]:
    """(key, chain, client CA) read and checked: the key matches the certificate and every file
    parses as PEM; CredentialError naming the file otherwise."""
    chain = _read(files.cert, "TLS certificate")
    key = _read(files.key, "TLS key")
    ca = _read(files.client_ca, "client CA") if files.client_ca is not None else None
    try:
        context = check_pair(files.cert, files.key, ssl.PROTOCOL_TLS_SERVER)
    except ValueError as e:
        raise CredentialError(str(e)) from e
    if files.client_ca is not None:
        try:
            context.load_verify_locations(cafile=files.client_ca)
        except (ssl.SSLError, OSError) as e:
            raise CredentialError(
                f"client CA {files.client_ca} is not PEM certificates: {e}"
            ) from e
    return key, chain, ca


def server_credentials(files: TlsFiles) -> grpc.ServerCredentials:
    """TLS credentials (mutual when files.client_ca is set) that pick up changed files at the
    next handshake."""
    key, chain, ca = load_tls(files)
    paths = [p for p in (files.cert, files.key, files.client_ca) if p is not None]
    seen = [_stamp(p) for p in paths]
    lock = threading.Lock()

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        nonlocal seen
        try:
            now = [_stamp(p) for p in paths]
        except OSError as e:
            log.error("TLS files unreadable, keeping the loaded ones: %s", e)
            return None
        with lock:
            if now == seen:
                return None
            try:
                key, chain, ca = load_tls(files)
            except CredentialError as e:
                log.error("TLS files changed but do not load, keeping the loaded ones: %s", e)
                return None
            seen = now
        log.info("TLS files changed on disk: reloaded %s", ", ".join(map(str, paths)))
        return grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=ca)

    initial = grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=ca)
    return grpc.dynamic_ssl_server_credentials(
        initial, fetch, require_client_authentication=ca is not None
    )


def parse_tokens(text: str, where: str) -> tuple[str, ...]:
    """The tokens of a token file: one per line, blank lines and ``#`` comments skipped."""
    tokens = tuple(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )
    if not tokens:
        raise CredentialError(f"{where} holds no token")
    if len(tokens) > MAX_TOKENS:
        raise CredentialError(f"{where} holds {len(tokens)} tokens; at most {MAX_TOKENS}")
    for i, token in enumerate(tokens, 1):
        if len(token) < MIN_TOKEN_CHARS:
            raise CredentialError(
                f"{where}: token {i} has {len(token)} characters; at least {MIN_TOKEN_CHARS}"
            )
        if not token.isascii() or not token.isprintable() or " " in token:
            raise CredentialError(f"{where}: token {i} is not printable ASCII without spaces")
    return tokens


class TokenSource:
    """The bearer tokens accepted now: a fixed one (from the environment) and those of a file,
    re-read when the file changes."""

    def __init__(self, token: str | None = None, token_file: Path | None = None) -> None:
        self._fixed = parse_tokens(token, "DSFRO_TOKEN") if token is not None else ()
        self._file = token_file
        self._stamp: tuple[int, int, int] | None = None
        self._from_file: tuple[str, ...] = ()
        self._lock = threading.Lock()
        if token_file is not None:
            self._from_file = parse_tokens(_token_text(token_file), str(token_file))
            self._stamp = _stamp(token_file)

    def tokens(self) -> tuple[str, ...]:
        if self._file is not None:
            self._refresh(self._file)
        return self._fixed + self._from_file

    def _refresh(self, path: Path) -> None:
        try:
            stamp = _stamp(path)
        except OSError as e:
            log.error("token file unreadable, keeping the loaded tokens: %s", e)
            return
        if stamp == self._stamp:
            return
        with self._lock:
            if stamp == self._stamp:
                return
            try:
                self._from_file = parse_tokens(_token_text(path), str(path))
            except CredentialError as e:
                log.error("token file changed but does not load, keeping the loaded tokens: %s", e)
                return
            finally:
                self._stamp = stamp
            log.info("token file %s changed on disk: %d tokens loaded", path, len(self._from_file))

    def accepts(self, presented: str) -> bool:
        """Whether `presented` is one of the tokens, compared in constant time."""
        candidate = presented.encode()
        return any(hmac.compare_digest(candidate, t.encode()) for t in self.tokens())


def bearer_token(metadata: Any) -> str | None:
    """The token of an ``authorization: Bearer <token>`` header, or None."""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def peer_names(context: grpc.ServicerContext) -> set[str]:
    """The names a verified client certificate carries (common name and DNS names)."""
    auth = context.auth_context()
    names: set[str] = set()
    for key in ("x509_common_name", "x509_subject_alternative_name"):
        for value in auth.get(key, ()):
            names.add(value.decode("utf-8", "replace") if isinstance(value, bytes) else value)
    return names


@dataclass(frozen=True)
class Refusal:
    code: grpc.StatusCode
    message: str
    reason: str
    """The rejection metric's label."""


class AuthInterceptor(CallInterceptor):
    """Refuses calls without an accepted bearer token (UNAUTHENTICATED) or, under mutual TLS,
    from a client certificate whose names are not allowed (PERMISSION_DENIED); health checks
    pass."""

    def __init__(
        self,
        tokens: TokenSource | None,
        allowed_clients: frozenset[str],
        on_refusal: Callable[[Refusal], None],
    ) -> None:
        self._tokens = tokens
        self._allowed = allowed_clients
        self._on_refusal = on_refusal

    def intercept(
        self, handler: grpc.RpcMethodHandler, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        token_refusal = self._check_token(details)
        # Refused for its metadata: the request is never decoded.
        skip = {"request_deserializer": _ignore} if token_refusal is not None else {}

        def wrap(behavior: Behavior) -> Behavior:
            def call(request: Any, context: grpc.ServicerContext) -> Any:
                refusal = token_refusal or self._check_peer(context)
                if refusal is not None:
                    log.warning(
                        "refused %s from %s: %s", details.method, context.peer(), refusal.message
                    )
                    self._on_refusal(refusal)
                    context.abort(refusal.code, refusal.message)
                return behavior(request, context)

            return call

        return map_behaviors(handler, wrap, **skip)

    def _check_token(self, details: grpc.HandlerCallDetails) -> Refusal | None:
        if self._tokens is None:
            return None
        token = bearer_token(details.invocation_metadata)
        if token is None:
            return Refusal(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing bearer token (metadata authorization: Bearer <token>)",
                "unauthenticated",
            )
        if not self._tokens.accepts(token):
            return Refusal(
                grpc.StatusCode.UNAUTHENTICATED, "invalid bearer token", "unauthenticated"
            )
        return None

    def _check_peer(self, context: grpc.ServicerContext) -> Refusal | None:
        if not self._allowed:
            return None
        names = peer_names(context)
        if names & self._allowed:
            return None
        shown = ", ".join(sorted(names)) or "no name"
        return Refusal(
            grpc.StatusCode.PERMISSION_DENIED,
            f"client certificate ({shown}) is not among the allowed clients",
            "permission_denied",
        )


def _ignore(data: bytes) -> bytes:
    """A request deserializer for calls refused anyway: their bytes are never decoded (grpcio
    takes None for a failure, so the bytes stand in)."""
    return data


__all__ = [
    "AuthInterceptor",
    "CredentialError",
    "TlsFiles",
    "TokenSource",
    "server_credentials",
]
