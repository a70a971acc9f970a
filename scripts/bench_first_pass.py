"""The heuristic's first greedy pass (Heuristic.first), before and after, on generated snapshots.

Each snapshot is `dsfro generate ARGS` (one string of arguments per --specs entry), converted
once and pickled; the pass runs --repeat times in a subprocess per code version and round,
the versions called in turn (the machine is shared: compare within a run). "Before" imports
the solver from a checkout of the old code given with --baseline (e.g. `git worktree add
/tmp/dsfro-base HEAD~1`). Medians (min) of wall seconds per round, the objective of each
version's first plan (what a call answers with when nothing after the pass has time), and
whether both chose the same configurations and GPUs (a change meant only to be faster must).
The table goes to docs/benchmarks.md:

    .venv/bin/python scripts/bench_first_pass.py --baseline /tmp/dsfro-base
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
from pathlib import Path
from typing import Any

DEFAULT_SPECS = [
    "--family hetero-power-256 --nodes 1024 --jobs 1600 --seed 1",
    "--family hetero-power-256 --nodes 1024 --jobs 1600 --seed 2",
    "--family hetero-power-256 --seed 3",
    "--family hetero-power-128 --seed 2 --tight-rack-share 0.5",
    "--family large --seed 1",
]


def worker(problem_file: Path, out_file: Path, repeat: int) -> None:
    """Time the first pass on the pickled problem with whatever `solver` is importable."""
    from solver.perfmodel.configs import build_config_set
    from solver.scoring.plans import materialize
    from solver.search.heuristic import Heuristic

    with problem_file.open("rb") as f:
        problem = pickle.load(f)
    configs = build_config_set(problem)
    wall: list[float] = []
    choices: dict[str, Any] = {}
    objective = float("nan")
    for _ in range(repeat):
        heuristic = Heuristic(problem, configs)
        start = time.perf_counter()
        state = heuristic.first()
        wall.append(time.perf_counter() - start)
        choices = {j: (c, sorted(n.items())) for j, (c, n) in state.choices.items()}
        objective = materialize(problem, configs, dict(state.choices)).objective.total
    with out_file.open("wb") as f:
        pickle.dump((choices, wall, objective), f)


def measure(
    problem_file: Path, repeat: int, path: str
) -> tuple[dict[str, Any], list[float], float]:
    """(choices, wall seconds per run, the first plan's objective) of the code at `path`."""
    env = dict(os.environ, PYTHONPATH=path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.pkl"
        cmd = [sys.executable, __file__, "--worker", str(problem_file), str(out), str(repeat)]
        subprocess.run(cmd, env=env, check=True)
        with out.open("rb") as f:
            result: tuple[dict[str, Any], list[float], float] = pickle.load(f)
    return result


def _shown(wall: list[float]) -> str:
    return f"{statistics.median(wall):.3f} ({min(wall):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--specs", nargs="+", default=DEFAULT_SPECS)
    parser.add_argument("--repeat", type=int, default=5, help="runs per process")
    parser.add_argument("--rounds", type=int, default=2, help="processes per version")
    parser.add_argument("--baseline", help="checkout of the old code (required)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        problem_file, out_file, repeat = args.worker
        worker(Path(problem_file), Path(out_file), int(repeat))
        return
    if not args.baseline:
        parser.error("--baseline: a checkout of the old code is required")

    from solver.app.convert import problem_from_proto
    from solver.app.limits import Limits
    from solver.offline.generate import generate, spec_from_args

    here = str(Path(__file__).resolve().parent.parent)
    print("| snapshot | nodes / jobs | before (s) | after (s) | speed-up | objective before "
          "| objective after | same choices |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for spec in args.specs:
        request = generate(spec_from_args(spec.split()))
        problem = problem_from_proto(request, Limits(max_time_budget_seconds=600))
        before: list[str] = []
        after: list[str] = []
        ratios: list[float] = []
        objectives = (float("nan"), float("nan"))
        same = True
        with tempfile.TemporaryDirectory() as tmp:
            problem_file = Path(tmp) / "problem.pkl"
            with problem_file.open("wb") as f:
                pickle.dump(problem, f)
            for _ in range(args.rounds):
                old_choices, old, old_objective = measure(problem_file, args.repeat, args.baseline)
                new_choices, new, new_objective = measure(problem_file, args.repeat, here)
                objectives = (old_objective, new_objective)
                same &= old_choices == new_choices
                before.append(_shown(old))
                after.append(_shown(new))
                ratios.append(statistics.median(old) / statistics.median(new))
        size = f"{len(problem.cluster.nodes)} / {len(problem.jobs)}"
        speed = f"{min(ratios):.1f}-{max(ratios):.1f}x"
        value = [f"{v:.2f}" for v in objectives]
        row = [
            spec,
            size,
            ", ".join(before),
            ", ".join(after),
            speed,
            *value,
            "yes" if same else "no",
        ]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
