"""Configuration enumeration alone (build_config_set), before and after, on generated families.

Each family is `dsfro generate --family NAME --seed N`, converted once; build_config_set runs on
the whole snapshot with cold caches (the analytic model's per-point or per-table caches cleared
before every run), in a subprocess per code version. "Before" imports the solver from a checkout
of the old code given with --baseline (e.g. `git worktree add /tmp/dsfro-base HEAD`); both
versions must give the same ConfigSet, which is checked. Families named in --decomposed are
also built part by part (solver.search.decompose.partition, the whole cluster's facts), one
part after another in one process as a decomposition worker does. Medians of --repeat runs in
each of --rounds processes per version, wall clock and CPU time of the process (the machine is
shared). The table goes to docs/benchmarks.md:

    .venv/bin/python scripts/bench_configs.py --baseline /tmp/dsfro-base --families large xl
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _clear_caches() -> None:
    """The caches that keep the model's results between builds, in either version."""
    from solver.perfmodel import configs

    before = getattr(configs, "_cached_estimate", None)  # per point
    if before is not None:
        before.cache_clear()
        return
    from solver.perfmodel import enumeration  # per table, and measured profiles' points

    enumeration.model_table.cache_clear()
    enumeration._operating_points.cache_clear()


def _builder(problem: Any, parts: int) -> Callable[[], Any]:
    """The whole snapshot's build; or, with `parts`, every part's build against the whole
    cluster's facts, as the decomposition's workers do (one after another), merged."""
    from solver.perfmodel.configs import ConfigSet, build_config_set, type_facts

    if not parts:
        return lambda: build_config_set(problem)
    from solver.search.decompose import partition

    pieces = [p.problem for p in partition(problem, parts, problem.options.seed)]
    facts = type_facts(problem.cluster)

    def run() -> Any:
        sets = [build_config_set(piece, facts) for piece in pieces]
        return ConfigSet(
            by_job={j: c for s in sets for j, c in s.by_job.items()},
            best_samples_per_second={
                j: b for s in sets for j, b in s.best_samples_per_second.items()
            },
            num_enumerated=sum(s.num_enumerated for s in sets),
        )

    return run


def worker(problem_file: Path, out_file: Path, repeat: int, parts: int) -> None:
    """Time the build on the pickled problem with whatever `solver` is importable."""
    with problem_file.open("rb") as f:
        problem = pickle.load(f)
    build = _builder(problem, parts)
    build()  # imports, catalogs, constants: loaded once per process anyway
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(repeat):
        _clear_caches()
        w, c = time.perf_counter(), time.process_time()
        configs = build()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    with out_file.open("wb") as f:
        pickle.dump((configs, wall, cpu), f)


def measure(
    problem_file: Path, repeat: int, parts: int, path: str
) -> tuple[object, list[float], list[float]]:
    """(ConfigSet, wall seconds, CPU seconds per run) of the code version at `path`."""
    env = dict(os.environ, PYTHONPATH=path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.pkl"
        cmd = [sys.executable, __file__, "--worker", str(problem_file), str(out), str(repeat)]
        subprocess.run([*cmd, str(parts)], env=env, check=True)
        with out.open("rb") as f:
            configs, wall, cpu = pickle.load(f)
    return configs, wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=["large", "xl"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="runs per process")
    parser.add_argument("--rounds", type=int, default=2, help="processes per version")
    parser.add_argument("--baseline", default=None, help="checkout of the old code")
    parser.add_argument(
        "--parts", type=int, default=32, help="parts of the decomposed rows (xl: 32)"
    )
    parser.add_argument(
        "--decomposed", nargs="*", default=["xl"], help="families also built part by part"
    )
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        problem_file, out_file, repeat, parts = args.worker
        worker(Path(problem_file), Path(out_file), int(repeat), int(parts))
        return

    from solver.app.convert import problem_from_proto
    from solver.app.limits import Limits
    from solver.offline.generate import generate, spec_from_args

    print(
        "| family | jobs | configurations (enumerated / kept) | before (s) | after (s) | "
        "speed-up | CPU before (s) | CPU after (s) | same ConfigSet |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for family in args.families:
        request = generate(spec_from_args(["--family", family, "--seed", str(args.seed)]))
        problem = problem_from_proto(request, Limits(max_time_budget_seconds=600))
        with tempfile.TemporaryDirectory() as tmp:
            problem_file = Path(tmp) / "problem.pkl"
            with problem_file.open("wb") as f:
                pickle.dump(problem, f)
            for parts in [0, args.parts] if family in args.decomposed else [0]:
                label = f"{family}, {parts} parts" if parts else family
                row(label, len(problem.jobs), problem_file, parts, args)


def row(label: str, jobs: int, problem_file: Path, parts: int, args: argparse.Namespace) -> None:
    """Measure both versions, alternated so that both see the same load; print a table row."""
    versions = {"after": str(ROOT)}
    if args.baseline:
        versions["before"] = args.baseline
    runs: dict[str, tuple[list[float], list[float]]] = {v: ([], []) for v in versions}
    sets: dict[str, object] = {}
    for _ in range(args.rounds):
        for version, path in versions.items():
            sets[version], wall, cpu = measure(problem_file, args.repeat, parts, path)
            runs[version][0].extend(wall)
            runs[version][1].extend(cpu)
    after = sets["after"]
    wall_after, cpu_after = (statistics.median(x) for x in runs["after"])
    wall_before = cpu_before = float("nan")
    same = "-"
    if "before" in sets:
        wall_before, cpu_before = (statistics.median(x) for x in runs["before"])
        same = str(sets["before"] == after)
    n = getattr(after, "num_enumerated", 0)
    kept = getattr(after, "num_configurations", 0)
    print(
        f"| {label} | {jobs:,} | {n:,} / {kept:,} | {wall_before:.3f} | {wall_after:.3f} | "
        f"{wall_before / wall_after:.1f}x | {cpu_before:.3f} | {cpu_after:.3f} | {same} |",
        flush=True,
    )


if __name__ == "__main__":
    main()
