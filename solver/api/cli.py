"""The ``dsfro`` command: solve, validate or export an instance file, or run the server.

Instance files are SolveRequests in protobuf JSON, the same schema as the wire. Exit codes:
0 success, 2 bad input (unreadable file, malformed JSON, unknown field, invalid request),
1 internal error. Errors go to stderr as one line, never as a traceback (``-v`` logs it).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from solver import __version__, extras
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.api import pipeline
from solver.api.arguments import add_profile_option, duration_arg, seed_arg, threads_arg
from solver.api.convert import (
    RequestFileError,
    load_request_json,
    message_to_json,
    requested_time_budget,
)
from solver.api.plan_text import format_response
from solver.api.server import run_server
from solver.api.server_config import add_server_arguments
from solver.api.settings import (
    EXPORT_FORMATS,
    Limits,
    backend_names,
    parse_backend,
)
from solver.api.validation import FieldViolation
from solver.domain import Problem
from solver.exact import formulation
from solver.extras import MissingExtraError
from solver.model import configs
from solver.offline import calibration, generate
from solver.offline import commands as offline_commands
from solver.simulate import cli as simulate_cli

log = logging.getLogger("dsfro")

_REMOTE_SLACK_SECONDS = 5.0
"""RPC timeout beyond the time budget: the service answers within the budget plus a margin."""


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
    try:
        return pipeline.to_problem(load_request_json(path), limits)
    except pipeline.InvalidRequest as e:
        _print_violations(path, e.violations)
        raise InputError from e


def cmd_solve(args: argparse.Namespace) -> int:
    overrides = pipeline.Overrides(
        time_budget_seconds=args.time_budget,
        backend=None if args.backend is None else parse_backend(args.backend),
        seed=args.seed,
        threads=args.threads,
        pyomo_solver=args.pyomo_solver,
    )
    if args.ray_address and not extras.available("ray"):
        raise MissingExtraError("ray", "--ray-address")
    req = load_request_json(args.file)
    if args.server:
        resp = _solve_remote(args.server, pipeline.prepare(req, args.profile, overrides))
    else:
        try:
            solved = pipeline.solve_request(
                req, profile=args.profile, overrides=overrides, ray_address=args.ray_address
            )
        except pipeline.InvalidRequest as e:
            _print_violations(args.file, e.violations)
            raise InputError from e
        resp = solved.response()
    print(message_to_json(resp) if args.json else format_response(resp))
    return 0


def _solve_remote(address: str, req: pb.SolveRequest) -> pb.SolveResponse:
    """Send the request to a running service; its field violations print as the local ones."""
    budget = Limits().time_budget(requested_time_budget(req.options))
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    with grpc.insecure_channel(address, options=options) as channel:
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            response: pb.SolveResponse = stub.Solve(req, timeout=budget + _REMOTE_SLACK_SECONDS)
            return response
        except grpc.RpcError as e:
            code = e.code()
            status = rpc_status.from_call(e)
            for detail in status.details if status is not None else ():
                bad = error_details_pb2.BadRequest()
                if detail.Unpack(bad):
                    for v in bad.field_violations:
                        print(f"{v.field}: {v.description}", file=sys.stderr)
            print(f"dsfro: {address}: {code.name}: {e.details()}", file=sys.stderr)
            if code is grpc.StatusCode.INVALID_ARGUMENT:
                raise InputError from e
            raise RemoteError(f"{address}: {code.name}") from e


def cmd_validate(args: argparse.Namespace) -> int:
    """The same check as the ValidateSnapshot RPC (pipeline.validate_snapshot)."""
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
    for add in COMMANDS:
        add(sub)
    for name, (_, summary) in PASSTHROUGH.items():
        # Listed for --help; main() hands the whole command line to the command's own parser.
        sub.add_parser(name, add_help=False, help=summary)
    return parser


def add_solve_commands(sub: Any) -> None:
    """``solve``, ``validate``, ``export`` and ``serve``."""
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
        help="send the request to a running service instead of solving here",
    )
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


COMMANDS: tuple[Callable[[Any], None], ...] = (
    add_solve_commands,
    calibration.add_commands,
    offline_commands.add_commands,
    simulate_cli.add_commands,
)
"""The command registry: each entry adds its commands to the ``dsfro`` sub-parsers, each
command setting ``func`` (parsed arguments -> exit code)."""

PASSTHROUGH: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "generate": (
        generate.main,
        "generate a benchmark snapshot from public data (--help for more)",
    ),
}
"""Commands with a parser of their own, given the rest of the command line whole."""


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] in PASSTHROUGH:
        return PASSTHROUGH[args_in[0]][0](args_in[1:])
    argv = args_in
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
