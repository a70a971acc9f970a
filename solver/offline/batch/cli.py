"""The ``dsfro batch`` command line: its arguments, the config they make, the command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from solver.app.arguments import (
    backend_arg,
    csv_arg,
    duration_arg,
    positive_int_arg,
    seed_arg,
    threads_arg,
)
from solver.app.profile import Profile, ProfileError, load_profile, solver_settings
from solver.core.settings import SettingsError
from solver.core.solver import Solver
from solver.offline.batch.records import JOB_CLASS_MODES, BatchError
from solver.offline.batch.runs import BatchConfig, run_batch
from solver.offline.batch.summary import format_errors, format_summary, summarize
from solver.runtime.cores import available_cores
from solver.runtime.memory import TooManyWorkers
from solver.runtime.ray import RayConnectionError

parse_backends = csv_arg(backend_arg)
"""``--backends``: lower-case backend names."""
parse_budgets = csv_arg(duration_arg)
"""``--budgets``: seconds."""
parse_seeds = csv_arg(seed_arg)
"""``--seeds``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="DIR_OR_GLOB",
        help="instance files: a directory (its *.json), a glob ('runs/**/*.json') or a file",
    )
    parser.add_argument(
        "--backends",
        type=parse_backends,
        metavar="LIST",
        help="e.g. auto,heuristic (default: each request's own backend)",
    )
    parser.add_argument(
        "--budgets",
        type=parse_budgets,
        metavar="LIST",
        help="time budgets, e.g. 1s,5s (default: each request's own)",
    )
    parser.add_argument(
        "--seeds", type=parse_seeds, metavar="LIST", help="e.g. 1,2 (default: each request's own)"
    )
    parser.add_argument(
        "--threads",
        type=threads_arg,
        default=1,
        help="solver threads per run, overriding file and profile (default 1, "
        "so that N workers use N cores)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int_arg,
        default=None,
        help="runs in parallel (default: the cores here; 1: in this process)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="run on a Ray cluster ('auto', 'ray://host:10001', or 'local')",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results.jsonl"),
        help="JSON Lines results file (default results.jsonl)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--resume",
        action="store_true",
        help="continue the results file: skip runs it already holds",
    )
    mode.add_argument("--overwrite", action="store_true", help="start the results file over")
    parser.add_argument(
        "--max-runs",
        type=positive_int_arg,
        metavar="N",
        help="stop after N new runs (continue later with --resume)",
    )
    parser.add_argument(
        "--store-allocation",
        nargs="?",
        const="name",
        choices=JOB_CLASS_MODES,
        metavar="name|workload",
        help="store GPUs per (GPU type, job class) for the report's heatmap; "
        "job class from the job name (default) or the workload kind",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def config_from_args(args: argparse.Namespace, profile: Profile | None) -> BatchConfig:
    workers = args.workers if args.workers is not None else available_cores()
    return BatchConfig(
        inputs=args.inputs,
        out=args.out,
        backends=args.backends,
        budgets=args.budgets,
        seeds=args.seeds,
        threads=args.threads,
        workers=workers,
        ray_address=args.ray_address,
        resume=args.resume,
        overwrite=args.overwrite,
        max_runs=args.max_runs,
        allocation_mode=args.store_allocation,
        profile=profile,
        solver=Solver(solver_settings(profile), ray_address=args.ray_address),
    )


def command(
    args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """``dsfro batch``: 0 when every run has a plan, 1 when some failed, 2 for bad arguments."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        profile = getattr(args, "profile", None)
        if isinstance(profile, str | Path):
            profile = load_profile(profile)
        config = config_from_args(args, profile)
        outcome = run_batch(config, progress=None if args.quiet else err)
    except (BatchError, ProfileError, SettingsError) as e:
        print(f"dsfro batch: error: {e}", file=err)
        return 2
    except TooManyWorkers as e:
        print(f"dsfro batch: error: --workers: {e}", file=err)
        return 2
    except KeyboardInterrupt:
        print(
            f"dsfro batch: interrupted; finished runs are in {args.out}, continue with --resume",
            file=err,
        )
        return 130
    except RayConnectionError as e:  # the Ray cluster could not be joined, or went away
        print(
            f"dsfro batch: error: {e}; finished runs are in {args.out}, continue with --resume",
            file=err,
        )
        return 1
    if outcome.dropped_partial:
        print(
            f"dsfro batch: dropped an incomplete last line of {args.out} (a crash mid-write)",
            file=err,
        )
    print(format_summary(summarize(outcome.records)), file=out)
    print(
        f"\n{outcome.new_runs} runs now, {outcome.skipped} already in {args.out}, "
        f"{outcome.failed} failed",
        file=out,
    )
    if outcome.remaining:
        print(f"{outcome.remaining} runs left (--max-runs): continue with --resume", file=out)
    if outcome.failed:
        print(format_errors(outcome.records), file=err)
    return outcome.exit_code
