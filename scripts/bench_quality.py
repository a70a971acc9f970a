"""Plan quality at short budgets on power-capped heterogeneous snapshots: DSFRO against the
optimum and against the plain pipeline an OR engineer would write, with the same budget.

- reference: the stored proven optimum (``instances/hetero-power/optima.json``) where there is
  one; else the plain pipeline run long (the aggregated MIP over configurations to gap 0, then
  best-fit placement of its choice): when the placed plan reaches the MIP's bound it is a proven
  optimum ("proven"), otherwise the MIP's bound is the reference (an upper bound: distances to
  it overstate the true ones);
- DSFRO AUTO at each of ``--repeat-budgets``, ``--repeats`` identical calls each (min, median
  and max distance, and the terminations), and once at each of ``--budgets``;
- the heuristic alone (backend HEURISTIC) at the same budgets, ``--repeats`` calls;
- the plain pipeline at each of ``--budgets`` (``--large-compare-budgets`` on the large
  instances): enumeration, the aggregated MIP within what is left of the budget less a
  placement reserve, then best-fit placement (DSFRO's own placement of a given choice,
  ``Heuristic.guided``) of its choice;
- with ``--busy K``, K CPU-bound processes run beside it all: a loaded machine, where calls
  answered with the first plan, 14-16 % below, when a slow first pass left no time for the
  guide's placement (references are cached: compute them idle first).

Every plan is checked by ``solver.scoring.checker``; a plan that fails it stops the run. The
tables go, with the command and date, into docs/benchmarks.md:

    .venv/bin/python scripts/bench_quality.py --out /tmp/quality.md
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Backend, Problem, SolveResult
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel.configs import build_config_set
from solver.runtime.collector import paused_collection
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.bound import solve_aggregate
from solver.search.heuristic import Heuristic

ROOT = Path(__file__).resolve().parent.parent
STORED = ROOT / "instances" / "hetero-power"
LIMITS = Limits(max_time_budget_seconds=3600)
PLACEMENT_RESERVE = 0.1
"""Share of the plain pipeline's budget kept for placing the MIP's choice."""

DEFAULT_SPECS = [
    *(f"stored:hetero-power-{n}-s{s}" for n in (32, 64) for s in (1, 2, 3)),
    *(f"--family hetero-power-{n} --seed {s}" for n in (128, 256) for s in (1, 2, 3)),
    *(f"--family hetero-power-256 --jobs 400 --seed {s}" for s in (1, 2, 3)),
    *(f"--family hetero-power-256 --nodes 1024 --jobs 1600 --seed {s}" for s in (1, 2)),
]


@dataclass(frozen=True)
class Instance:
    name: str
    problem: Problem
    key: str
    """sha256 of the request: references are cached by it."""


@dataclass(frozen=True)
class Reference:
    value: float
    proven: bool
    how: str


def load(spec: str) -> Instance:
    if spec.startswith("stored:"):
        name = spec.removeprefix("stored:")
        request = load_request_json(STORED / f"{name}.json")
    else:
        argv = spec.split()
        # --locality-weight is the request's, not the generator's: without the placement term
        # the aggregated bound can be met, and the reference proven.
        locality = None
        if "--locality-weight" in argv:
            k = argv.index("--locality-weight")
            locality = float(argv[k + 1])
            request = generate(spec_from_args(argv[:k] + argv[k + 2 :]))
            request.weights.locality = locality
        else:
            request = generate(spec_from_args(argv))
        a = dict(zip(argv[::2], argv[1::2], strict=True))
        shown = ("--family", "--nodes", "--jobs", "--seed")
        name = (
            "-".join([a["--family"], *(f"{k[2]}{a[k]}" for k in ("--nodes", "--jobs") if k in a)])
            + "".join(f"-{k.lstrip('-')}{v}" for k, v in a.items() if k not in shown)
            + f"-s{a['--seed']}"
        )
    key = hashlib.sha256(request.SerializeToString(deterministic=True)).hexdigest()
    return Instance(name, pipeline.to_problem(request, LIMITS), key)


def with_budget(p: Problem, seconds: float, backend: Backend, threads: int = 0) -> Problem:
    """`p` at this budget and backend; with `threads` > 0, on that many threads."""
    options = dataclasses.replace(p.options, time_budget_seconds=seconds, backend=backend)
    if threads > 0:
        options = dataclasses.replace(options, threads=threads)
    return dataclasses.replace(p, options=options)


def checked(p: Problem, result: SolveResult, what: str) -> float:
    violations = check_plan(p, result.plan.assignments)
    if violations:
        sys.exit(f"{what}: the plan fails the checker: {violations[0]}")
    return result.stats.objective


@paused_collection  # as DSFRO's solves run: the comparison is of the methods
def plain_pipeline(
    p: Problem, budget: float, integral_racks: bool = False
) -> tuple[float, float, float | None]:
    """(objective, seconds taken, MIP bound) of the aggregated MIP then best-fit placement;
    `integral_racks`: the MIP keeps whole tensor groups per budgeted rack (a tighter bound)."""
    start = time.monotonic()
    configs = build_config_set(p)
    left = budget * (1 - PLACEMENT_RESERVE) - (time.monotonic() - start)
    outcome = solve_aggregate(
        p, configs, integer=True, time_limit=max(left, 0.01), integral_racks=integral_racks
    )
    state = Heuristic(p, configs).guided(outcome.choice, outcome.racks or None)
    plan = materialize(p, configs, dict(state.choices))
    violations = check_plan(p, plan.assignments)
    if violations:
        sys.exit(f"plain pipeline: the plan fails the checker: {violations[0]}")
    return plan.objective.total, time.monotonic() - start, outcome.best_bound


def reference(
    inst: Instance, cache: dict[str, dict[str, object]], seconds: float, integral_racks: bool
) -> Reference:
    optima = json.loads((STORED / "optima.json").read_text())["instances"]
    for e in optima:
        if e["instance"] == f"{inst.name}.json" and e["proven_optimal"]:
            return Reference(float(e["objective"]), True, "stored optimum")
    # (the suffix names the formulation: references of an older one are not reused)
    key = f"{inst.key}-integral-rack-groups" if integral_racks else inst.key
    if key not in cache:
        value, took, bound = plain_pipeline(inst.problem, seconds, integral_racks)
        cache[key] = {"name": inst.name, "plan": value, "bound": bound, "seconds": took}
    c = cache[key]
    mip = "aggregated MIP, whole groups per rack" if integral_racks else "aggregated MIP"
    plan = float(str(c["plan"]))
    bound = None if c["bound"] is None else float(str(c["bound"]))
    if bound is None:
        return Reference(plan, False, "plain pipeline's plan (no bound)")
    if bound - plan <= 1e-6 * max(abs(plan), 1.0):
        return Reference(plan, True, f"{mip}: its bound reached by its placement")
    return Reference(bound, False, f"{mip}: its bound (not reached)")


def below(ref: Reference, objective: float) -> float:
    return 100 * (ref.value - objective) / abs(ref.value)


def pct(xs: Sequence[float]) -> str:
    return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f}"


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy(processes: int) -> Iterator[None]:
    """`processes` CPU-bound processes running until the block ends."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--specs",
        nargs="+",
        default=DEFAULT_SPECS,
        help="stored:NAME or `dsfro generate` arguments, one string each",
    )
    parser.add_argument("--repeat-budgets", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--budgets", type=float, nargs="+", default=[1, 2, 5, 10, 30])
    parser.add_argument("--large-budgets", type=float, nargs="+", default=[5, 10])
    parser.add_argument("--large-repeats", type=int, default=3)
    parser.add_argument(
        "--large-compare-budgets",
        type=float,
        nargs="+",
        default=[5, 10, 20, 30],
        help="budgets of the comparison with the plain pipeline on the large instances",
    )
    parser.add_argument(
        "--large-nodes",
        type=int,
        default=1024,
        help="instances with this many nodes or more: --large-budgets only",
    )
    parser.add_argument("--reference-seconds", type=float, default=600.0)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/dsfro-quality-references.json"))
    parser.add_argument("--out", type=Path, default=None, help="also write the tables here")
    parser.add_argument(
        "--margin-z",
        type=float,
        default=0.0,
        help="DSFRO's power margin (SolverSettings.power_margin_z; the service's default is 2.5). "
        "0, the default here: the problem whose optima are stored and whose bound the plain "
        "pipeline proves, the budget rows alone",
    )
    parser.add_argument(
        "--integral-racks",
        action="store_true",
        help="references without a stored optimum: the aggregated MIP with whole tensor groups per "
        "budgeted rack, a tighter bound (solve_aggregate's integral_racks)",
    )
    parser.add_argument(
        "--mip-free-racks",
        action="store_true",
        help="DSFRO's aggregated MIP with racks split freely only, not in whole tensor groups "
        "after its first good solution (SolverSettings.mip_integral_racks = false)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        help="CPU-bound processes beside the solves (a loaded machine)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="DSFRO's threads per call (0: the snapshot's, else every core): 1 is what the "
        "service gives a solve admitted beside another on two cores",
    )
    args = parser.parse_args()
    cache = json.loads(args.cache.read_text()) if args.cache.exists() else {}
    solver = Solver(
        SolverSettings(power_margin_z=args.margin_z, mip_integral_racks=not args.mip_free_racks)
    )
    repeat_rows, budget_rows, ref_rows = [], [], []
    with busy(args.busy), contextlib.closing(solver):
        for spec in args.specs:
            inst = load(spec)
            p = inst.problem
            print(f"{inst.name}: reference ...", file=sys.stderr, flush=True)
            ref = reference(inst, cache, args.reference_seconds, args.integral_racks)
            args.cache.write_text(json.dumps(cache, indent=1))
            ref_rows.append(
                f"| {inst.name} | {len(p.cluster.nodes)} / {len(p.jobs)} | "
                f"{ref.value:.6f} | {'yes' if ref.proven else 'no'} | {ref.how} |"
            )
            large = len(p.cluster.nodes) >= args.large_nodes
            repeat_budgets = args.large_budgets if large else args.repeat_budgets
            repeats = args.large_repeats if large else args.repeats
            for budget in repeat_budgets:
                for backend in (Backend.AUTO, Backend.HEURISTIC):
                    gaps, told, terms, walls = [], [], [], []
                    for i in range(repeats):
                        what = f"{inst.name} {backend.name} {budget:g} s #{i}"
                        r = solver.solve(with_budget(p, budget, backend, args.threads))
                        gaps.append(below(ref, checked(p, r, what)))
                        if r.stats.relative_gap is not None:
                            told.append(100 * r.stats.relative_gap)
                        terms.append(r.stats.termination.name)
                        walls.append(r.stats.wall_seconds)
                    counts = ", ".join(f"{t} {terms.count(t)}" for t in sorted(set(terms)))
                    repeat_rows.append(
                        f"| {inst.name} | {backend.name} | {budget:g} | {repeats} | "
                        f"{pct(gaps)} | {pct(told) if told else '-'} | {max(walls):.2f} | "
                        f"{sum(w > budget for w in walls)} | {counts} |"
                    )
                    print(repeat_rows[-1], file=sys.stderr, flush=True)
            for budget in args.large_compare_budgets if large else args.budgets:
                r = solver.solve(with_budget(p, budget, Backend.AUTO, args.threads))
                ours = below(ref, checked(p, r, f"{inst.name} AUTO {budget:g} s"))
                value, took, _ = plain_pipeline(p, budget)
                theirs = below(ref, value)
                verdict = (
                    "ahead"
                    if ours < theirs - 1e-9
                    else ("tied" if abs(ours - theirs) <= 1e-9 else "BEHIND")
                )
                budget_rows.append(
                    f"| {inst.name} | {budget:g} | {ours:.3f} | {r.stats.wall_seconds:.2f} | "
                    f"{theirs:.3f} | {took:.2f} | {verdict} |"
                )
                print(budget_rows[-1], file=sys.stderr, flush=True)
    tables = [
        f"DSFRO's power margin: z = {args.margin_z:g}; its aggregated MIP: "
        f"{'racks split freely' if args.mip_free_racks else 'two phases'}\n",
        "References\n",
        "| instance | nodes / jobs | reference | proven | how |",
        "| --- | --- | --- | --- | --- |",
        *ref_rows,
        "\nRepeated identical calls, % below the reference (min / median / max)\n",
        "| instance | backend | budget (s) | calls | below ref. % | gap told % | max wall (s) "
        "| past budget | terminations |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *repeat_rows,
        "\nDSFRO AUTO against the plain pipeline at the same budget, % below the reference\n",
        "| instance | budget (s) | DSFRO | DSFRO wall (s) | plain pipeline | its wall (s) | |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *budget_rows,
    ]
    text = "\n".join(tables)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
