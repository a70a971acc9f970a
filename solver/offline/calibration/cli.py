"""The ``dsfro calibrate`` command (also ``python -m solver.offline.calibration``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from solver import extras
from solver.files import write_text
from solver.offline.calibration.figures import make_figures, write_figures
from solver.offline.calibration.fit import calibration_doc, run
from solver.offline.calibration.report import render_markdown
from solver.offline.calibration.sources import DATA_DIR
from solver.offline.calibration.summary import summary
from solver.perfmodel import throughput
from solver.perfmodel.catalog import MODELS_DIR_ENV, models_dir
from solver.resources import source_checkout

CHECKOUT = source_checkout()
"""The repository the outputs go to by default; None when installed (a wheel's files are not
written: the flags name the outputs)."""
DOC_PATH = None if CHECKOUT is None else CHECKOUT / "docs" / "calibration.md"
IMG_DIR = None if CHECKOUT is None else CHECKOUT / "docs" / "img"


def add_commands(subparsers: Any) -> None:
    """Register ``calibrate`` on the ``dsfro`` command's sub-parsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit the performance model's constants to the bundled measurements and report",
        description=(
            "Compare the analytic model with Gavel, Pollux and Zeus measurements, fit its "
            "constants, and write models/calibration.json, docs/calibration.md and "
            "docs/img/calibration-*.png."
        ),
    )
    p.add_argument("--data", type=Path, default=DATA_DIR, help="data folder (default: data/)")
    p.add_argument(
        "--models-out",
        type=Path,
        default=None,
        help="where to write calibration.json (default: $DSFRO_MODELS_DIR, else the "
        "checkout's models/)",
    )
    p.add_argument(
        "--doc", type=Path, default=DOC_PATH, help="report path (default: docs/calibration.md)"
    )
    p.add_argument("--img", type=Path, default=IMG_DIR, help="figure folder (default: docs/img)")
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the fitted constants differ from the models file",
    )
    p.set_defaults(func=cmd_calibrate)


def _shown(path: Path) -> str:
    """A path relative to the working directory when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _default_models_out() -> Path | None:
    """``$DSFRO_MODELS_DIR``'s calibration.json, else the checkout's; None when installed."""
    if os.environ.get(MODELS_DIR_ENV):
        return models_dir() / throughput.CALIBRATION_FILE
    return None if CHECKOUT is None else CHECKOUT / "models" / throughput.CALIBRATION_FILE


def cmd_calibrate(args: argparse.Namespace) -> int:
    data: Path = args.data
    if not (data / "gavel").is_dir():
        print(f"dsfro: error: {data} has no gavel/, pollux/, zeus/ data", file=sys.stderr)
        return 2
    out: Path | None = args.models_out or _default_models_out()
    if args.check:
        out = out or models_dir() / throughput.CALIBRATION_FILE  # the installed file, only read
    elif out is None or args.doc is None or args.img is None:
        print(
            "dsfro: error: not run from a source checkout: name the outputs with "
            "--models-out, --doc and --img",
            file=sys.stderr,
        )
        return 2
    elif (why := extras.missing("plot", "dsfro calibrate (its figures)")) is not None:
        print(f"dsfro: error: {why}", file=sys.stderr)
        return 2
    result = run(data)
    s = summary(result)
    doc = calibration_doc(result, s)
    if args.check:
        current = json.loads(out.read_text()) if out.exists() else {}
        same = all(current.get(k) == doc[k] for k in ("compute_efficiency", "network_efficiency"))
        print(f"{'up to date' if same else 'differs'}: {_shown(out)}")
        return 0 if same else 1
    write_text(out, json.dumps(doc, indent=2) + "\n")
    args.doc.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.doc, render_markdown(s))
    paths = write_figures(make_figures(result), args.img)
    print(f"compute efficiency {doc['compute_efficiency']}")
    print(f"network efficiency {doc['network_efficiency']}")
    shown = ", ".join(_shown(p) for p in (out, args.doc))
    print(f"wrote {shown} and {len(paths)} figures in {_shown(args.img)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m solver.offline.calibration [options]``: the same as ``dsfro calibrate``."""
    parser = argparse.ArgumentParser(prog="python -m solver.offline.calibration")
    add_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["calibrate", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code
