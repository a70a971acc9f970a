"""The ``dsfro`` command: solve or validate an instance file, here or on a running service, and
the commands that need the solver here (export, serve, the offline tools, the simulator).

Instance files are SolveRequests in protobuf JSON or in the binary wire format (told apart by
their bytes), the same schema as the wire. Exit codes:
0 success, 2 bad input (unreadable file, malformed JSON, unknown field, invalid request, a
command this install lacks), 1 internal error. Errors go to stderr as one line, never as a
traceback (``-v`` logs it).

Only light modules are imported up front and each command imports what it needs: ``dsfro
health`` (a container's health check, run every few seconds) loads no solver, and with the
client install (``pip install dsfro``, without the ``server`` extra) ``solve --server``,
``validate --server`` and ``health`` work while the other commands say what to install.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from solver import __version__, extras
from solver.app.arguments import add_profile_option, duration_arg, seed_arg, threads_arg
from solver.app.limits import (
    backend_names,
    fairness_mode_names,
    fairness_scope_names,
    parse_backend,
    parse_energy_basis,
    parse_fairness_mode,
    parse_fairness_scope,
)
from solver.cli import remote
from solver.cli.common import InputError, RemoteError, print_violations
from solver.client.connection import TOKEN_ENV, add_connection_arguments, connection_flags
from solver.extras import MissingExtraError, MissingServerError
from solver.wire import GpuTypeSummary, RequestFileError, message_to_json
from solver.wire.files import load_request_file

if TYPE_CHECKING:
    from solver.core.solver import Solver

log = logging.getLogger("dsfro")

SERVER_COMMANDS = (
    "export",
    "serve",
    "calibrate",
    "batch",
    "report",
    "sweep",
    "profile",
    "simulate",
    "generate",
)
"""Commands that run the solver (or its data) here: listed with the client install too, where
they say that they need the server extra."""


# ---------------------------------------------------------------- solve and validate


def cmd_solve(args: argparse.Namespace) -> int:
    from solver.app.overrides import Overrides, prepare
    from solver.cli.plan_text import format_response

    overrides = Overrides(
        time_budget_seconds=args.time_budget,
        backend=None if args.backend is None else parse_backend(args.backend),
        seed=args.seed,
        threads=args.threads,
        pyomo_solver=args.pyomo_solver,
        weights={
            k: v
            for k, v in (("energy", args.energy_weight), ("fairness", args.fairness_weight))
            if v is not None
        },
        energy_basis=None if args.energy_basis is None else parse_energy_basis(args.energy_basis),
        fairness_mode=None if args.fairness is None else parse_fairness_mode(args.fairness),
        fairness_scope=(
            None if args.fairness_scope is None else parse_fairness_scope(args.fairness_scope)
        ),
        fairness_horizon_seconds=args.fairness_horizon,
        fairness_mean_weight=args.fairness_mean_weight,
    )
    if args.ray_address and not extras.available("ray"):
        raise MissingExtraError("ray", "--ray-address")
    _connection_flags_need_server(args)
    req = load_request_file(args.file)
    if args.server:
        resp = remote.solve_remote(args, prepare(req, args.profile, overrides))
    else:
        resp = _solve_here(args, req, overrides)
    print(message_to_json(resp) if args.json else format_response(resp))
    return 0


def _solve_here(args: argparse.Namespace, req: Any, overrides: Any) -> Any:
    from solver.app import pipeline
    from solver.app.profile import solver_settings
    from solver.core.settings import SettingsError
    from solver.core.solver import Solver

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
        print_violations(args.file, e.violations)
        raise InputError from e
    finally:
        if own:
            solver.close()
    return solved.response()


def cmd_validate(args: argparse.Namespace) -> int:
    """The ValidateSnapshot check, here (pipeline.validate_snapshot) or by the service."""
    _connection_flags_need_server(args)
    request = load_request_file(args.file)
    if args.server:
        response = remote.validate_remote(args, request)
    else:
        from solver.app import pipeline
        from solver.app.limits import Limits

        response = pipeline.validate_snapshot(request, Limits())
    if not response.valid:
        print_violations(args.file, response.violations)
        raise InputError
    c = request.cluster
    print(f"OK: {len(response.jobs)} jobs, {len(c.nodes)} nodes, {len(c.gpu_types)} GPU types")
    width = max((len(j.job) for j in response.jobs), default=0)
    for j in response.jobs:
        ruled = j.HasField("usable_nodes") and j.usable_nodes < len(c.nodes)
        print(
            f"  {j.job.ljust(width)}  {j.num_configurations} configurations, "
            f"best {j.best_samples_per_second:.1f} samples/s"
            + (f", {j.usable_nodes} of {len(c.nodes)} nodes usable" if ruled else "")
            + (
                f", {j.preferred_nodes} of {len(c.nodes)} preferred"
                if j.HasField("preferred_nodes")
                else ""
            )
        )
    print_gpu_types(response.gpu_types)
    return 0


def print_gpu_types(types: Sequence[GpuTypeSummary]) -> None:
    """How the service reads each GPU type: its efficiency's family and its MIG geometry."""
    if not types:
        return
    print("GPU types:")
    width = max(len(t.gpu_type) for t in types)
    for t in types:
        family = t.efficiency_family or "default"
        mig = {"": "no MIG", "snapshot": "MIG geometry of the snapshot"}.get(
            t.mig_geometry, f"MIG geometry of {t.mig_geometry}"
        )
        efficiency = f"efficiency {t.compute_efficiency:.3g} ({family})"
        print(f"  {t.gpu_type.ljust(width)}  {efficiency}, {mig}")


def _connection_flags_need_server(args: argparse.Namespace) -> None:
    if not args.server and connection_flags(args):
        flags = ", ".join(connection_flags(args))
        print(f"dsfro: error: {flags} only apply with --server", file=sys.stderr)
        raise InputError


def _server_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--server",
        metavar="HOST:PORT",
        help=f"{what} a running service instead of here (with the flags below: TLS, and a "
        f"bearer token from --token-file or {TOKEN_ENV})",
    )
    add_connection_arguments(parser, token=True)


def add_solve_commands(sub: Any) -> None:
    """``solve`` and ``validate``: here, or on a running service (``--server``)."""
    solve = sub.add_parser("solve", help="solve an instance file and print the plan")
    solve.add_argument("file", help="SolveRequest in protobuf JSON or binary (.binpb)")
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
    solve.add_argument(
        "--fairness",
        choices=fairness_mode_names(),
        help="fairness mode (docs/objective.md, 'Fairness'; overrides the file)",
    )
    solve.add_argument("--fairness-scope", choices=fairness_scope_names())
    solve.add_argument(
        "--fairness-horizon",
        type=duration_arg,
        metavar="DURATION",
        help="how long this plan runs, e.g. 5m (the service it adds)",
    )
    solve.add_argument(
        "--fairness-weight", type=float, metavar="W", help="weight of the fairness term F"
    )
    solve.add_argument(
        "--energy-weight", type=float, metavar="W", help="weight of the energy term E"
    )
    solve.add_argument(
        "--energy-basis",
        choices=("draw", "waste"),
        help="what the energy weight charges: a configuration's draw (default) or its draw "
        "above the job's most efficient configuration (docs/objective.md, 'Energy basis')",
    )
    solve.add_argument(
        "--fairness-mean-weight",
        type=float,
        metavar="B",
        help="max_min, drf, finish_time: F = least row + B x mean row (every entity counts)",
    )
    solve.add_argument("--json", action="store_true", help="print the SolveResponse as JSON")
    _server_option(solve, "send the request to")
    solve.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="run a decomposed solve's parts on this Ray cluster "
        "(DSFRO_RAY_ADDRESS; default: local processes)",
    )
    add_profile_option(solve)
    solve.set_defaults(func=cmd_solve)

    validate = sub.add_parser("validate", help="check an instance file without solving it")
    validate.add_argument("file", help="SolveRequest in protobuf JSON or binary (.binpb)")
    _server_option(validate, "ask")
    validate.set_defaults(func=cmd_validate)


# ---------------------------------------------------------------- the registry


def commands() -> tuple[Callable[[Any], None], ...]:
    """The command registry: each entry adds its commands to the ``dsfro`` sub-parsers, each
    command setting ``func`` (parsed arguments -> exit code). A function, so that the modules
    behind the commands load only when a parser needs them; without the server install, the
    solver's commands are listed by name only (main() says what to install)."""
    if _server_missing() is not None:
        return (add_solve_commands, _add_unavailable)
    from solver.cli import local
    from solver.offline import calibration
    from solver.offline import commands as offline_commands
    from solver.simulate import cli as simulate_cli

    return (
        add_solve_commands,
        local.add_commands,
        calibration.add_commands,
        offline_commands.add_commands,
        simulate_cli.add_commands,
    )


def _server_missing() -> str | None:
    """The first server dependency this install lacks; None with the server install."""
    try:
        import solver.cli.local
        import solver.offline.commands
        import solver.simulate.cli  # noqa: F401
    except ModuleNotFoundError as e:
        missing = extras.server_module_missing(e)
        if missing is None:
            raise
        return missing
    return None


def _add_unavailable(sub: Any) -> None:
    for name in SERVER_COMMANDS:
        if name not in PASSTHROUGH:
            sub.add_parser(name, add_help=False, help="(needs the server install)")


def _generate(argv: list[str]) -> int:
    from solver.offline import generate

    return generate.main(argv)


PASSTHROUGH: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "generate": (
        _generate,
        "generate a benchmark snapshot from public data (--help for more)",
    ),
    "health": (
        remote.cmd_health,
        "check a running service's health: exit 0 when SERVING, else 1 (--help for more)",
    ),
}
"""Commands with a parser of their own, given the rest of the command line whole."""


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


def main(argv: Sequence[str] | None = None, *, solver: Solver | None = None) -> int:
    """``dsfro``: the exit code. `solver` (default: one built from the profile and the
    environment) answers ``dsfro solve`` without --server."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    try:
        if args_in and args_in[0] in PASSTHROUGH:
            return PASSTHROUGH[args_in[0]][0](args_in[1:])
        if args_in and args_in[0] in SERVER_COMMANDS and (missing := _server_missing()):
            raise MissingServerError(f"dsfro {args_in[0]}", missing)
        parser = build_parser()
        try:
            args = parser.parse_args(args_in)
        except SystemExit as e:  # --help, or a usage error already printed
            return e.code if isinstance(e.code, int) else 2
        if args.command != "serve":
            level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
            logging.basicConfig(
                level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
            )
        args.solver = solver
        code: int = args.func(args)
    except InputError:
        return 2
    except RemoteError:
        return 1
    except (RequestFileError, MissingExtraError, MissingServerError) as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        missing = extras.server_module_missing(e)
        if missing is None:
            return _internal_error(e)
        what = f"dsfro {args_in[0]}" if args_in else "this command"
        remote_too = bool(args_in) and args_in[0] in ("solve", "validate")
        error = MissingServerError(what, missing, remote=remote_too)
        print(f"dsfro: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dsfro: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`dsfro validate f | head -1`): stop quietly, as a
        # shell tool does, with 128 + SIGPIPE; what is still buffered goes nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as e:
        if e.errno not in _OUTPUT_FULL:
            return _internal_error(e)
        # Files the commands write name themselves when they fail; what reaches here is
        # stdout on a full device, over a quota or over the file-size limit.
        print(f"dsfro: error: cannot write the output: {e.strerror}", file=sys.stderr)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:
        return _internal_error(e)
    return code


_OUTPUT_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _internal_error(e: BaseException) -> int:
    log.debug("internal error", exc_info=True)
    print(f"dsfro: internal error: {type(e).__name__}: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
