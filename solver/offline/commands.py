"""The offline commands of ``dsfro``: batch, report, sweep and profile show.

``solver.cli.main`` registers them with ``add_commands(subparsers)``; each sub-parser sets ``func``,
which takes the parsed arguments and returns the exit code (0 success, 1 some run failed or an
internal error, 2 bad arguments or input). ``python -m solver.offline.commands`` runs these
commands alone.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from solver.app.arguments import add_profile_option
from solver.app.profile import ProfileError, format_profile, load_profile
from solver.offline import batch, report, sweep


def _batch(args: argparse.Namespace) -> int:
    return batch.command(args)


def _profile_show(args: argparse.Namespace) -> int:
    try:
        profile = load_profile(args.file)
    except ProfileError as e:
        print(f"dsfro profile: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(format_profile(profile))
    return 0


def add_commands(subparsers: Any) -> None:
    """Add ``batch``, ``report``, ``sweep`` and ``profile`` to an argparse sub-parsers object
    (the one ``ArgumentParser.add_subparsers`` returned)."""
    p = subparsers.add_parser(
        "batch",
        help="solve many instance files with several backends, budgets and seeds",
        description="Solve every (file, backend, budget, seed) and append one JSON line per "
        "run to --out; --resume continues an interrupted batch. Exit 1 if a run failed.",
    )
    batch.add_arguments(p)
    add_profile_option(p)
    p.set_defaults(func=_batch)

    p = subparsers.add_parser(
        "report",
        help="tables (markdown, CSV) and plots (PNG) of a batch's results",
        description="Summary tables and plots of a results file written by `dsfro batch`.",
    )
    report.add_arguments(p)
    p.set_defaults(func=report.command)

    p = subparsers.add_parser(
        "sweep",
        help="re-solve one instance across a grid of objective weights: trade-off figure",
        description="Solve FILE for every combination of the --weight values and plot "
        "normalised throughput against power, with the Pareto front.",
    )
    sweep.add_arguments(p)
    add_profile_option(p)
    p.set_defaults(func=sweep.command)

    p = subparsers.add_parser("profile", help="operator profiles (TOML weights and settings)")
    actions = p.add_subparsers(dest="profile_command", required=True)
    show = actions.add_parser(
        "show", help="print a profile's effective values (defaults filled in) as TOML"
    )
    show.add_argument("file", help="profile TOML file")
    show.set_defaults(func=_profile_show)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsfro", description="DSFRO offline tools.")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one offline command, as ``dsfro`` would; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("dsfro: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        logging.getLogger("dsfro").debug("internal error", exc_info=True)
        print(f"dsfro: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
