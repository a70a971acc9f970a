"""The ``dsfro`` command: solve, validate or export an instance file, or run the server.

Instance files are SolveRequests in protobuf JSON, the same schema as the wire. Exit codes:
0 success, 2 bad input (unreadable file, malformed JSON, unknown field, invalid request),
1 internal error. Errors go to stderr as one line, never as a traceback (``-v`` logs it).

Only light modules are imported up front: each command imports what it needs, so that
``dsfro health`` (a container's health check, run every few seconds) loads no solver.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solver import __version__, extras
from solver.extras import MissingExtraError

if TYPE_CHECKING:
    from solver._proto.dsfro.v1 import scheduler_pb2 as pb
    from solver.app.limits import Limits
    from solver.app.validation import FieldViolation
    from solver.client import Client
    from solver.core.solver import Solver
    from solver.domain import Problem

log = logging.getLogger("dsfro")

TOKEN_ENV = "DSFRO_TOKEN"
"""The bearer token ``dsfro solve --server`` sends (never a flag: argv is public)."""
DEFAULT_PORT = 50051


class InputError(Exception):
    """Bad input that is already explained on stderr: exit 2."""


class RemoteError(Exception):
    """The service failed the call, already explained on stderr: exit 1."""


# ---------------------------------------------------------------- commands


def _print_violations(path: str, violations: Iterable[FieldViolation | pb.FieldViolation]) -> None:
    shown = list(violations)
    for v in shown:
        print(f"{v.field}: {v.description}", file=sys.stderr)
    print(f"dsfro: {path}: {len(shown)} problem(s)", file=sys.stderr)


def _valid_problem(path: str, limits: Limits) -> Problem:
    """The validated problem of a file; its violations are printed to stderr."""
    from solver.app import pipeline
    from solver.app.convert import load_request_json

    try:
        return pipeline.to_problem(load_request_json(path), limits)
    except pipeline.InvalidRequest as e:
        _print_violations(path, e.violations)
        raise InputError from e


def cmd_solve(args: argparse.Namespace) -> int:
    from solver.app import pipeline
    from solver.app.convert import load_request_json, message_to_json
    from solver.app.limits import parse_backend
    from solver.app.profile import solver_settings
    from solver.cli.plan_text import format_response
    from solver.core.settings import SettingsError
    from solver.core.solver import Solver

    overrides = pipeline.Overrides(
        time_budget_seconds=args.time_budget,
        backend=None if args.backend is None else parse_backend(args.backend),
        seed=args.seed,
        threads=args.threads,
        pyomo_solver=args.pyomo_solver,
    )
    if args.ray_address and not extras.available("ray"):
        raise MissingExtraError("ray", "--ray-address")
    if not args.server and _connection_flags(args):
        flags = ", ".join(_connection_flags(args))
        print(f"dsfro: error: {flags} only apply with --server", file=sys.stderr)
        raise InputError
    req = load_request_json(args.file)
    if args.server:
        resp = _solve_remote(args, pipeline.prepare(req, args.profile, overrides))
    else:
        solver: Solver | None = getattr(args, "solver", None)
        own = solver is None
        if solver is None:
            try:
                solver = Solver(solver_settings(args.profile), ray_address=args.ray_address)
            except SettingsError as e:
                print(f"dsfro: error: {e}", file=sys.stderr)
                raise InputError from e
        try:
            solved = pipeline.solve_request(req, solver, profile=args.profile, overrides=overrides)
        except pipeline.InvalidRequest as e:
            _print_violations(args.file, e.violations)
            raise InputError from e
        finally:
            if own:
                solver.close()
        resp = solved.response()
    print(message_to_json(resp) if args.json else format_response(resp))
    return 0


def _solve_remote(args: argparse.Namespace, req: pb.SolveRequest) -> pb.SolveResponse:
    """Send the request to a running service (solver.client: retries when it is busy or
    unreachable, within the time budget plus a transfer allowance); its field violations
    print as the local ones."""
    from solver.client import DsfroError, InvalidRequest

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
        print(f"dsfro: {address}: {e.code.name}: {e.message}", file=sys.stderr)
        raise RemoteError(f"{address}: {e.code.name}") from e


# ---------------------------------------------------------------- connecting to a service


def add_connection_arguments(parser: argparse.ArgumentParser, *, token: bool) -> None:
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


def _connection_flags(args: argparse.Namespace) -> list[str]:
    """The connection flags given, as spelt on the command line."""
    names = ("tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "token_file")
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n, None)]


def client_from_args(args: argparse.Namespace, token: str | None = None) -> Client:
    """A Client for ``args.server`` with the connection flags; ValueError for a bad setting
    (an unreadable file, a token that would travel in plaintext beyond loopback)."""
    from solver.client import Client, TlsConfig

    token_file = getattr(args, "token_file", None)
    if bool(args.tls_cert) != bool(args.tls_key):
        print("dsfro: error: --tls-cert and --tls-key go together", file=sys.stderr)
        raise InputError
    try:
        tls: TlsConfig | bool = bool(args.tls)
        if args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name:
            tls = TlsConfig(args.tls_ca, args.tls_cert, args.tls_key, args.tls_server_name)
        return Client(
            args.server,
            tls=tls,
            token=None if token_file else token or None,
            token_file=token_file,
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
    from solver.app.limits import parse_duration
    from solver.client import DsfroError

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
        print(f"dsfro: {args.server}: {e.code.name}: {e.message}", file=sys.stderr)
        return 1
    if status != "SERVING":
        print(f"dsfro: {args.server}: {status}", file=sys.stderr)
        return 1
    print(f"{args.server}: SERVING")
    return 0


# ---------------------------------------------------------------- local commands


def cmd_validate(args: argparse.Namespace) -> int:
    """The same check as the ValidateSnapshot RPC (pipeline.validate_snapshot)."""
    from solver.app import pipeline
    from solver.app.convert import load_request_json
    from solver.app.limits import Limits

    request = load_request_json(args.file)
    response = pipeline.validate_snapshot(request, Limits())
    if not response.valid:
        _print_violations(args.file, response.violations)
        raise InputError
    c = request.cluster
    print(f"OK: {len(response.jobs)} jobs, {len(c.nodes)} nodes, {len(c.gpu_types)} GPU types")
    width = max((len(j.job) for j in response.jobs), default=0)
    for j in response.jobs:
        print(
            f"  {j.job.ljust(width)}  {j.num_configurations} configurations, "
            f"best {j.best_samples_per_second:.1f} samples/s"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the full model of an instance (configurations enumerated as for a solve)."""
    from solver.app.limits import Limits
    from solver.exact import formulation
    from solver.perfmodel import configs

    problem = _valid_problem(args.file, Limits())
    model = formulation.build(problem, configs.build_config_set(problem))
    out = Path(args.out) if args.out else Path(Path(args.file).stem + "." + args.format)
    # Imported here: Pyomo, which writes the files, takes ~0.5 s to load.
    from solver.exact.backends.pyomo_backend import export_model

    try:
        export_model(model, out, args.format)
    except OSError as e:
        print(f"dsfro: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    rows = model.linear().num_rows
    print(
        f"wrote {out}: {model.num_variables} variables, {rows} rows, maximise "
        f"(objective constant {model.offset:.6g} included)"
    )
    if model.contradictions:
        print(
            "dsfro: note: the model is infeasible: a non-preemptible job cannot keep its "
            "running shape",
            file=sys.stderr,
        )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from solver.service.server import run_server

    return run_server(args, os.environ)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsfro", description="Place training jobs: GPU type, parallelism, nodes, SM clock."
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log progress (-v) and debug detail with tracebacks (-vv)",
    )
    parser.add_argument("--version", action="version", version=f"dsfro {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in commands():
        add(sub)
    for name, (_, summary) in PASSTHROUGH.items():
        # Listed for --help; main() hands the whole command line to the command's own parser.
        sub.add_parser(name, add_help=False, help=summary)
    return parser


def add_solve_commands(sub: Any) -> None:
    """``solve``, ``validate``, ``export`` and ``serve``."""
    from solver.app.arguments import add_profile_option, duration_arg, seed_arg, threads_arg
    from solver.app.limits import EXPORT_FORMATS, backend_names
    from solver.service.config import add_server_arguments

    solve = sub.add_parser("solve", help="solve an instance file and print the plan")
    solve.add_argument("file", help="SolveRequest in protobuf JSON")
    solve.add_argument(
        "--time-budget",
        type=duration_arg,
        metavar="DURATION",
        help="e.g. 5s, 500ms, 2m (overrides the file)",
    )
    solve.add_argument("--backend", choices=backend_names())
    solve.add_argument("--seed", type=seed_arg)
    solve.add_argument("--threads", type=threads_arg)
    solve.add_argument(
        "--pyomo-solver",
        metavar="NAME",
        help="Pyomo solver for --backend pyomo (default appsi_highs)",
    )
    solve.add_argument("--json", action="store_true", help="print the SolveResponse as JSON")
    solve.add_argument(
        "--server",
        metavar="HOST:PORT",
        help="send the request to a running service instead of solving here (with the "
        "flags below: TLS, and a bearer token from --token-file or DSFRO_TOKEN)",
    )
    add_connection_arguments(solve, token=True)
    solve.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="run a decomposed solve's parts on this Ray cluster "
        "(DSFRO_RAY_ADDRESS; default: local processes)",
    )
    add_profile_option(solve)
    solve.set_defaults(func=cmd_solve)

    validate = sub.add_parser("validate", help="check an instance file without solving it")
    validate.add_argument("file")
    validate.set_defaults(func=cmd_validate)

    export = sub.add_parser(
        "export", help="write the full model of an instance as MPS or LP for another solver"
    )
    export.add_argument("file", help="SolveRequest in protobuf JSON")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="mps")
    export.add_argument(
        "--out",
        metavar="PATH",
        help="output file (default: the instance's name with the format's "
        "extension, in the current directory)",
    )
    export.set_defaults(func=cmd_export)

    serve = sub.add_parser("serve", help="run the gRPC service (as server.py)")
    add_server_arguments(serve)
    serve.set_defaults(func=cmd_serve)


def commands() -> tuple[Callable[[Any], None], ...]:
    """The command registry: each entry adds its commands to the ``dsfro`` sub-parsers, each
    command setting ``func`` (parsed arguments -> exit code). A function, so that the modules
    behind the commands load only when a parser needs them."""
    from solver.offline import calibration
    from solver.offline import commands as offline_commands
    from solver.simulate import cli as simulate_cli

    return (
        add_solve_commands,
        calibration.add_commands,
        offline_commands.add_commands,
        simulate_cli.add_commands,
    )


def _generate(argv: list[str]) -> int:
    from solver.offline import generate

    return generate.main(argv)


PASSTHROUGH: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "generate": (
        _generate,
        "generate a benchmark snapshot from public data (--help for more)",
    ),
    "health": (
        cmd_health,
        "check a running service's health: exit 0 when SERVING, else 1 (--help for more)",
    ),
}
"""Commands with a parser of their own, given the rest of the command line whole."""


def main(argv: Sequence[str] | None = None, *, solver: Solver | None = None) -> int:
    """``dsfro``: the exit code. `solver` (default: one built from the profile and the
    environment) answers ``dsfro solve`` without --server."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] in PASSTHROUGH:
        return PASSTHROUGH[args_in[0]][0](args_in[1:])
    argv = args_in
    from solver.app.convert import RequestFileError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    if args.command != "serve":
        level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
        logging.basicConfig(
            level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
        )
    args.solver = solver
    try:
        code: int = args.func(args)
    except InputError:
        return 2
    except RemoteError:
        return 1
    except (RequestFileError, MissingExtraError) as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dsfro: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        log.debug("internal error", exc_info=True)
        print(f"dsfro: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
