"""How a command reaches a service beyond its address: TLS and the bearer token's source, as
command-line flags and as plain data that a worker process can be handed.

The token itself is never a flag (argv is public) and never part of a ``Connection`` (which
may be pickled to a worker): it is read from ``DSFRO_TOKEN`` or the token file when the client
is made.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from solver.client.client import MAX_MESSAGE_BYTES, Client
from solver.client.retry import DEFAULT_RETRY, RetryPolicy
from solver.client.security import TlsConfig

TOKEN_ENV = "DSFRO_TOKEN"
"""The bearer token a command sends when it has no --token-file."""


@dataclass(frozen=True)
class Connection:
    """TLS (False: plaintext; True: the system roots; a TlsConfig) and where the bearer token
    comes from (``token_file``, else ``$DSFRO_TOKEN`` when set, else none)."""

    tls: TlsConfig | bool = False
    token_file: str | None = None

    def client(
        self,
        address: str,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> Client:
        """A Client for `address`; ValueError for a bad setting (an unreadable file, a token
        that would travel in plaintext beyond loopback)."""
        token = None if self.token_file else os.environ.get(TOKEN_ENV) or None
        return Client(
            address,
            tls=self.tls,
            token=token,
            token_file=self.token_file,
            retry=retry,
            max_message_bytes=max_message_bytes,
        )


def add_connection_arguments(parser: argparse._ActionsContainer, *, token: bool) -> None:
    """TLS flags for calling a service (any of them turns TLS on), and ``--token-file`` when
    the command sends a bearer token (the token itself only from DSFRO_TOKEN: argv is public)."""
    parser.add_argument(
        "--tls", action="store_true", help="use TLS, checking the server against the system roots"
    )
    parser.add_argument(
        "--tls-ca", metavar="FILE", help="use TLS, checking the server against this CA (PEM)"
    )
    parser.add_argument(
        "--tls-cert", metavar="FILE", help="client certificate (PEM) for mutual TLS"
    )
    parser.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    parser.add_argument(
        "--tls-server-name",
        metavar="NAME",
        help="the name the server's certificate must carry, if not the address's host",
    )
    if token:
        parser.add_argument(
            "--token-file",
            metavar="FILE",
            help=f"send the bearer token in this file, re-read when it changes "
            f"({TOKEN_ENV}: the token itself)",
        )


def connection_flags(args: argparse.Namespace) -> list[str]:
    """The connection flags given, as spelt on the command line."""
    names = ("tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "token_file")
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n, None)]


def connection_from_args(args: argparse.Namespace) -> Connection:
    """The Connection the flags describe; ValueError naming the flags when they clash."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together")
    tls: TlsConfig | bool = bool(args.tls)
    if args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name:
        tls = TlsConfig(args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)
    return Connection(tls, getattr(args, "token_file", None))
