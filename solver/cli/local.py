"""``dsfro`` commands that need the solver here (the server install): ``export`` writes the
full model of an instance, ``serve`` runs the gRPC service."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from solver.app import pipeline
from solver.app.arguments import add_profile_option
from solver.app.limits import EXPORT_FORMATS, Limits
from solver.app.profile import Profile
from solver.cli.common import InputError, print_violations
from solver.domain import Problem
from solver.service.config import add_server_arguments
from solver.wire.files import load_request_file


def add_commands(sub: Any) -> None:
    """``export`` and ``serve``."""
    export = sub.add_parser(
        "export", help="write the full model of an instance as MPS or LP for another solver"
    )
    export.add_argument("file", help="SolveRequest in protobuf JSON or binary (.binpb)")
    export.add_argument("--format", choices=EXPORT_FORMATS, default="mps")
    export.add_argument(
        "--out",
        metavar="PATH",
        help="output file (default: the instance's name with the format's "
        "extension, in the current directory)",
    )
    add_profile_option(export)
    export.set_defaults(func=cmd_export)

    serve = sub.add_parser("serve", help="run the gRPC service (as server.py)")
    add_server_arguments(serve)
    serve.set_defaults(func=cmd_serve)


def valid_problem(path: str, limits: Limits, profile: Profile | None = None) -> Problem:
    """The validated problem of a file (what `profile` fills in first, as a solve does); its
    violations are printed to stderr."""
    try:
        return pipeline.to_problem(pipeline.prepare(load_request_file(path), profile), limits)
    except pipeline.InvalidRequest as e:
        print_violations(path, e.violations)
        raise InputError from e


def cmd_export(args: argparse.Namespace) -> int:
    """Write the model DSFRO's exact backends solve for an instance (solver.core.exported)."""
    from solver.app.profile import solver_settings
    from solver.core.exported import exported_model
    from solver.core.settings import SettingsError

    try:
        settings = solver_settings(args.profile)
    except SettingsError as e:
        print(f"dsfro: error: {e}", file=sys.stderr)
        raise InputError from e
    exported = exported_model(valid_problem(args.file, Limits(), args.profile), settings)
    model = exported.model
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
    for note in exported.notes:
        print(f"dsfro: note: {note}", file=sys.stderr)
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
