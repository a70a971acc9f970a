"""The ``dsfro sweep`` command line: its arguments and the command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from solver import extras
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.arguments import backend_arg, duration_arg, int_arg, seed_arg, threads_arg
from solver.app.convert import backend_from_proto, requested_time_budget
from solver.app.limits import Limits
from solver.app.profile import WEIGHT_KEYS, solver_settings
from solver.core.settings import SettingsError
from solver.core.solver import Solver
from solver.offline.batch import make_batch_executor
from solver.offline.sweep.grid import SweepError, grid_size, parse_weight_spec
from solver.offline.sweep.journal import Journal, journal_path
from solver.offline.sweep.outputs import write_outputs
from solver.offline.sweep.run import prepare, run_sweep
from solver.runtime.cores import available_cores
from solver.runtime.memory import TooManyWorkers
from solver.runtime.ray import RayConnectionError


def _weight_arg(text: str) -> tuple[str, list[float]]:
    try:
        return parse_weight_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _prefix_arg(text: str) -> str:
    """A file name's stem: the folder is ``--out``'s, never reached through the prefix."""
    if not text or text in (".", "..") or "/" in text or "\\" in text or "\0" in text:
        raise argparse.ArgumentTypeError(
            f"a file name prefix, not a path: {text!r} (the folder is --out's)"
        )
    return text


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="SolveRequest in protobuf JSON")
    parser.add_argument(
        "--weight",
        type=_weight_arg,
        action="append",
        required=True,
        metavar="NAME=V1,V2,...",
        help=f"values of one objective weight ({', '.join(WEIGHT_KEYS)}); repeat for a grid",
    )
    parser.add_argument("--out", type=Path, help="output directory (default: sweep-<instance>)")
    parser.add_argument(
        "--prefix",
        type=_prefix_arg,
        default="sweep",
        help="output file names: PREFIX.png, .md, .csv (default sweep)",
    )
    parser.add_argument(
        "--energy-basis",
        choices=("draw", "waste"),
        help="what the energy weight charges at every point: each configuration's draw or its "
        "waste against the job's most efficient one (docs/objective.md, 'Energy basis'); "
        "default: the request's or the profile's",
    )
    parser.add_argument("--backend", type=backend_arg, help="e.g. auto, heuristic")
    parser.add_argument(
        "--time-budget", type=duration_arg, metavar="DURATION", help="per point, e.g. 2s"
    )
    parser.add_argument("--seed", type=seed_arg)
    parser.add_argument(
        "--threads", type=threads_arg, default=1, help="solver threads per point (default 1)"
    )
    parser.add_argument(
        "--workers",
        type=int_arg(1, 4096),
        default=None,
        help="points solved in parallel (default: the cores here)",
    )
    parser.add_argument("--ray-address", metavar="ADDR", help="solve the points on Ray")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a sweep cut short: the points already in OUT/PREFIX-points.jsonl "
        "(written as each point comes back) are kept, the others solved",
    )


def _kept(out: Path, prefix: str) -> str:
    return f"the finished points are in {journal_path(out, prefix)}, continue with --resume"


def command(args: argparse.Namespace) -> int:
    """``dsfro sweep``: 0 written, 1 if a point failed, 2 for bad arguments or input."""
    out = args.out or Path(f"sweep-{Path(args.file).stem}")
    if (why := extras.missing("plot", "the sweep figure")) is not None:
        print(f"dsfro sweep: error: {why}", file=sys.stderr)
        return 2
    try:
        names = [n for n, _ in args.weight]
        if len(set(names)) != len(names):
            raise SweepError("a weight is given twice; give all its values in one --weight")
        profile = getattr(args, "profile", None)
        solver = Solver(solver_settings(profile), ray_address=args.ray_address)
        req = prepare(
            args.file,
            profile=profile,
            backend=args.backend,
            time_budget=args.time_budget,
            seed=args.seed,
            threads=args.threads,
            energy_basis=args.energy_basis,
        )
        workers = args.workers if args.workers is not None else available_cores()
        try:
            points = grid_size(args.weight)
        except ValueError as e:
            raise SweepError(str(e)) from e
        journal = Journal(journal_path(out, args.prefix), resume=args.resume)
        executor = make_batch_executor(min(workers, points), args.ray_address)
        try:
            outcome = run_sweep(
                req,
                args.weight,
                executor=executor,
                solver=solver,
                progress=None if args.quiet else sys.stderr,
                title=_title(args.file, req),
                journal=journal,
            )
        finally:
            executor.close()
            journal.close()
    except (SweepError, SettingsError) as e:
        print(f"dsfro sweep: error: {e}", file=sys.stderr)
        return 2
    except TooManyWorkers as e:
        print(f"dsfro sweep: error: --workers: {e}", file=sys.stderr)
        return 2
    except RayConnectionError as e:  # the Ray cluster could not be joined, or went away
        print(f"dsfro sweep: error: {e}; {_kept(out, args.prefix)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dsfro sweep: interrupted; {_kept(out, args.prefix)}", file=sys.stderr)
        return 130
    try:
        paths = write_outputs(outcome, out, args.prefix)
    except OSError as e:
        print(f"dsfro sweep: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    failed = [p for p in outcome.points if p.error]
    for point in failed:
        print(
            f"dsfro sweep: point #{point.index} ({point.label()}) failed: {point.error}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _title(path: str, req: pb.SolveRequest) -> str:
    o = req.options
    budget = Limits().time_budget(requested_time_budget(o))
    backend = backend_from_proto(o.backend).name.lower()
    return f"{Path(path).stem}: throughput against power ({backend}, {budget:g} s per point)"
