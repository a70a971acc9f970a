"""The aggregated model alone: its LP and its MIP per snapshot, the columns it loads, and
HiGHS's time, so that a change to the model or to HiGHS's options is measured apart from the
search around it. Nothing is asserted; the figures go to docs/benchmarks.md:

    .venv/bin/python scripts/bench_aggregate.py --specs "--family large --seed 1" \\
        "--family hetero-power-256 --nodes 1024 --jobs 1600 --seed 2" --mip-seconds 20

`--presolve on` runs HiGHS's presolve (off in the product: see solver.search.array_lp) and
`--every-column` loads every configuration (the product drops those alike in every row).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import highspy
import numpy as np
import numpy.typing as npt

from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.domain import Problem
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel.configs import build_config_set
from solver.search import array_lp
from solver.search.bound import solve_aggregate


def snapshot(spec: str) -> Problem:
    """The problem `dsfro generate SPEC` writes."""
    return problem_from_proto(
        generate(spec_from_args(spec.split())), Limits(max_time_budget_seconds=600)
    )


def with_options(presolve: bool, every_column: bool) -> Callable[[], None]:
    """Set HiGHS's presolve and the column filter for the runs that follow; returns the undo."""
    # getattr and setattr: array_lp imports `new_highs` without exporting it (mypy's rule).
    new_highs: Callable[[], highspy.Highs] = getattr(array_lp, "new_highs")  # noqa: B009
    undominated = array_lp.undominated

    def highs() -> highspy.Highs:
        h = new_highs()
        if presolve:
            h.setOptionValue("presolve", "on")
            # The model sets "off" after this call: keep "on" by ignoring that one change.
            original = h.setOptionValue
            setattr(  # noqa: B010 (HiGHS's stub types the method)
                h,
                "setOptionValue",
                lambda name, value: None if name == "presolve" else original(name, value),
            )
        return h

    setattr(array_lp, "new_highs", highs)  # noqa: B010
    if every_column:
        array_lp.undominated = lambda lp, integer: np.arange(len(lp.cost), dtype=np.int64)

    def undo() -> None:
        setattr(array_lp, "new_highs", new_highs)  # noqa: B010
        array_lp.undominated = undominated

    return undo


def measure(spec: str, mip_seconds: float) -> str:
    problem = snapshot(spec)
    configs = build_config_set(problem)
    loaded: list[tuple[int, int]] = []
    undominated = array_lp.undominated

    def counted(lp: array_lp.ArrayLp, integer: list[int]) -> npt.NDArray[np.int64]:
        kept = undominated(lp, integer)
        loaded.append((len(lp.cost), int(kept.size)))
        return kept

    array_lp.undominated = counted
    try:
        started = time.monotonic()
        lp = solve_aggregate(problem, configs, fairness=True)
        lp_seconds = time.monotonic() - started
        started = time.monotonic()
        mip = solve_aggregate(problem, configs, integer=True, time_limit=mip_seconds, fairness=True)
        mip_seconds_taken = time.monotonic() - started
    finally:
        array_lp.undominated = undominated
    columns = f"{loaded[-1][0]:,} / {loaded[-1][1]:,}" if loaded else "-"
    bound = "-" if mip.best_bound is None else f"{mip.best_bound:,.4f}"
    return (
        f"| {spec} | {columns} | {lp_seconds:.2f} | {mip.status} | {mip_seconds_taken:.2f} "
        f"| {bound} | {'-' if lp.best_bound is None else f'{lp.best_bound:,.4f}'} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", nargs="+", default=["--family large --seed 1"])
    parser.add_argument("--mip-seconds", type=float, default=20.0)
    parser.add_argument("--presolve", choices=["on", "off"], default="off")
    parser.add_argument("--every-column", action="store_true")
    args = parser.parse_args()
    undo = with_options(args.presolve == "on", args.every_column)
    print(f"presolve {args.presolve}, {'every column' if args.every_column else 'alike dropped'}")
    print("| snapshot | columns / loaded | LP (s) | MIP | MIP (s) | MIP bound | LP bound |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    try:
        for spec in args.specs:
            print(measure(spec, args.mip_seconds), flush=True)
    finally:
        undo()


if __name__ == "__main__":
    main()
