"""The ``dsfro`` commands' side of a running service: connection flags (TLS, a bearer token),
sending a request with ``--server``, and ``dsfro health``.

Imports only the client (gRPC and protobuf): these commands work with the client install.
"""

from __future__ import annotations

import argparse
import os
import sys

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import parse_duration
from solver.cli.common import InputError, RemoteError
from solver.client import Client, DsfroError, InvalidRequest, Unavailable
from solver.client.connection import TOKEN_ENV, add_connection_arguments, connection_from_args

DEFAULT_PORT = 50051


def solve_remote(args: argparse.Namespace, req: pb.SolveRequest) -> pb.SolveResponse:
    """Send the request to a running service (solver.client: retries when it is busy or
    unreachable, within the time budget plus a transfer allowance); its field violations
    print as the local ones."""
    address: str = args.server
    try:
        with client_from_args(args, token=os.environ.get(TOKEN_ENV)) as client:
            return client.solve(req)
    except InvalidRequest as e:
        for v in e.violations:
            print(f"{v.field}: {v.description}", file=sys.stderr)
        print(f"dsfro: {address}: {e.code.name}: {e.message}", file=sys.stderr)
        raise InputError from e
    except DsfroError as e:
        say_failure(address, e)
        raise RemoteError(f"{address}: {e.code.name}") from e


def validate_remote(args: argparse.Namespace, req: pb.SolveRequest) -> pb.ValidateSnapshotResponse:
    """The service's ValidateSnapshot of the request (the same check as ``dsfro validate``)."""
    address: str = args.server
    try:
        with client_from_args(args, token=os.environ.get(TOKEN_ENV)) as client:
            return client.validate(req)
    except DsfroError as e:
        say_failure(address, e)
        raise RemoteError(f"{address}: {e.code.name}") from e


def say_failure(address: str, error: DsfroError) -> None:
    """The failed call on stderr, and on a line of its own what a failure to connect means."""
    print(f"dsfro: {address}: {error.code.name}: {error.message}", file=sys.stderr)
    if isinstance(error, Unavailable) and error.hint:
        print(f"dsfro: {address}: {error.hint}", file=sys.stderr)


# ---------------------------------------------------------------- connecting to a service


def client_from_args(args: argparse.Namespace, token: str | None = None) -> Client:
    """A Client for ``args.server`` with the connection flags (``token``: the bearer token when
    there is no --token-file); InputError, said on stderr, for a bad setting (clashing flags, an
    unreadable file, a token that would travel in plaintext beyond loopback)."""
    try:
        connection = connection_from_args(args)
        return Client(
            args.server,
            tls=connection.tls,
            token=None if connection.token_file else token or None,
            token_file=connection.token_file,
            max_message_bytes=-1,  # no limit of our own: the server's applies
        )
    except ValueError as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        raise InputError from e


def _health_parser() -> argparse.ArgumentParser:
    # The server's own settings, when the check runs beside it (a container's HEALTHCHECK):
    # its plaintext health-only port if it has one, else its port.
    health_port = os.environ.get("DSFRO_HEALTH_PORT", "")
    port = (
        health_port
        if health_port not in ("", "0")
        else os.environ.get("DSFRO_PORT") or DEFAULT_PORT
    )
    parser = argparse.ArgumentParser(
        prog="dsfro health",
        description="Check a running service: exit 0 when it reports SERVING, 1 otherwise "
        "(also when unreachable or misconfigured: exit 2 is reserved in Docker health checks).",
    )
    parser.add_argument(
        "--server",
        metavar="HOST:PORT",
        default=f"127.0.0.1:{port}",
        help="the service (default 127.0.0.1 at DSFRO_HEALTH_PORT, else DSFRO_PORT, else 50051)",
    )
    parser.add_argument(
        "--service", default="", help="the health service name (default: the whole server)"
    )
    parser.add_argument(
        "--timeout", metavar="DURATION", default="2s", help="give up after this long (2s)"
    )
    add_connection_arguments(parser, token=False)
    return parser


def cmd_health(argv: list[str]) -> int:
    """``dsfro health``: one grpc.health.v1 check, one line of output; 0 SERVING, else 1.

    A container health check: only the client is imported, never the solver."""
    try:
        args = _health_parser().parse_args(argv)
        timeout = parse_duration(args.timeout)
    except SystemExit as e:  # --help (0), or a usage error already printed
        return 0 if e.code in (0, None) else 1
    except ValueError as e:
        print(f"dsfro: error: --timeout: {e}", file=sys.stderr)
        return 1
    try:
        with client_from_args(args) as client:
            status = client.health_status(args.service, timeout=timeout)
    except InputError:
        return 1
    except DsfroError as e:
        say_failure(args.server, e)
        return 1
    if status != "SERVING":
        print(f"dsfro: {args.server}: {status}", file=sys.stderr)
        return 1
    print(f"{args.server}: SERVING")
    return 0
