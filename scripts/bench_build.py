"""Building the full model and loading it into HiGHS, at several sizes, against a baseline.

    .venv/bin/python scripts/bench_build.py                      # this tree only
    git worktree add /tmp/dsfro-base <commit>                    # the code to compare with
    .venv/bin/python scripts/bench_build.py --baseline /tmp/dsfro-base --repeat 3

Instances come from ``dsfro generate`` (seed 1, power budget 0.7 of the GPUs' TDP) and are
cached in --cache. Every measurement runs in a fresh process with the code under test first on
``PYTHONPATH`` (so memory is cold, as for the service's first request); the table shows the
fastest of --repeat runs: ``formulation.build`` (configurations enumerated beforehand, not
timed), then ``backends.highs.load`` into a new ``Highs``. Rows and nonzeros are HiGHS's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SIZES: dict[str, list[str]] = {
    "small": ["--family", "small"],
    "medium": ["--family", "medium"],
    "512 jobs x 256 nodes": ["--jobs", "512", "--nodes", "256"],
    "1024 jobs x 512 nodes": ["--jobs", "1024", "--nodes", "512"],
    "large": ["--family", "large"],
}
COMMON = ["--seed", "1", "--power-budget-fraction", "0.7"]


def worker(instance: str) -> None:
    """One measurement with whatever ``solver`` is first on the path; prints JSON."""
    from solver.app.convert import load_request_json, problem_from_proto
    from solver.app.limits import Limits
    from solver.exact import formulation
    from solver.exact.backends.highs import load, new_highs
    from solver.perfmodel.configs import build_config_set

    problem = problem_from_proto(load_request_json(instance), Limits())
    configs = build_config_set(problem)
    h = new_highs()
    wall, cpu = time.perf_counter(), time.process_time()
    model = formulation.build(problem, configs)
    build_wall, build_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    load(h, model)
    load_wall, load_cpu = time.perf_counter() - wall, time.process_time() - cpu
    out = {
        "variables": model.num_variables,
        "rows": h.getNumRow(),
        "nonzeros": h.getNumNz(),
        "build": build_wall,
        "load": load_wall,
        "build_cpu": build_cpu,
        "load_cpu": load_cpu,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "code": str(Path(formulation.__file__).resolve().parent.parent.parent),
    }
    print(json.dumps(out))


def measure(code: Path, instance: Path, repeat: int) -> dict[str, float]:
    """The fastest of `repeat` fresh-process runs of the code at `code`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    best: dict[str, float] = {}
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(instance)],
            cwd=code,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        run = json.loads(done.stdout.strip().splitlines()[-1])
        if Path(run["code"]) != code.resolve():
            raise RuntimeError(f"measured {run['code']}, not {code}")
        if not best or run["build"] + run["load"] < best["build"] + best["load"]:
            best = run
    return best


def generate(cache: Path, name: str) -> Path:
    path = cache / (name.replace(" ", "") + ".json")
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [str(Path(sys.executable).parent / "dsfro"), "generate", *SIZES[name], *COMMON]
        subprocess.run([*cmd, "--out", str(path)], cwd=ROOT, check=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline-repeat", type=int, default=1)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/dsfro-bench-build"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    header = (
        "| instance | variables | rows | nonzeros | build s | load s | build + load s "
        "| us / variable |"
    )
    if args.baseline:
        header += " before: build s | load s | us / variable | speed-up |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for name in args.sizes:
        instance = generate(args.cache, name)
        new = measure(ROOT, instance, args.repeat)
        total = new["build"] + new["load"]
        line = (
            f"| {name} | {new['variables']:,} | {new['rows']:,} | {new['nonzeros']:,} "
            f"| {new['build']:.3f} | {new['load']:.3f} | {total:.3f} "
            f"| {1e6 * total / new['variables']:.2f} |"
        )
        if args.baseline:
            old = measure(args.baseline, instance, args.baseline_repeat)
            before = old["build"] + old["load"]
            line += (
                f" {old['build']:.3f} | {old['load']:.3f} | {1e6 * before / old['variables']:.2f} "
                f"| {before / total:.1f}x |"
            )
        print(line, flush=True)


if __name__ == "__main__":
    main()
