"""Reading a request with many measured profile points: parsing, validation, conversion to the
domain and the configurations, the steps every Solve takes before it solves.

    .venv/bin/python -m scripts.bench_read --jobs 2000 --points 250 --repeat 3

The request is ``instances/medium.json``'s cluster with `--jobs` copies of its first profiled
job, each given `--points` distinct points (GPU type x GPU count x supported clock, highest
clocks first). Each step runs `--repeat` times in this process; the table shows the fastest
and the microseconds per point. Nothing is asserted (docs/benchmarks.md keeps the runs).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scripts.common.timing import fastest
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.perfmodel.configs import build_config_set
from solver.wire import SolveRequest, load_request_json

ROOT = Path(__file__).resolve().parent.parent


def request(jobs: int, points: int) -> SolveRequest:
    req = load_request_json(ROOT / "instances" / "medium.json")
    base = next(j for j in req.jobs if j.WhichOneof("workload") == "profile")
    clocks = {t.name: sorted(t.sm_clocks_mhz, reverse=True) for t in req.cluster.gpu_types}
    keys = [(t, g, c) for t in sorted(clocks) for g in (1, 2, 4, 8) for c in clocks[t][:40]]
    if len(keys) < points:
        raise SystemExit(f"--points: at most {len(keys)} distinct points on this cluster")
    del req.jobs[:]
    for i in range(jobs):
        job = req.jobs.add()
        job.CopyFrom(base)
        job.name = f"j{i}"
        job.ClearField("current_allocation")
        del job.profile.points[:]
        for t, g, c in keys[:points]:
            job.profile.points.add(
                gpu_type=t,
                num_gpus=g,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=c,
                samples_per_second=10.0 * g * c / 1000,
                watts=100.0 + 0.1 * c * g,
                memory_per_gpu_gib=1.0,
            )
    return req


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--points", type=int, default=250)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    data = request(a.jobs, a.points).SerializeToString()
    total = a.jobs * a.points
    limits = Limits()
    parse_s, req = fastest(lambda: SolveRequest.FromString(data), a.repeat)
    validate_s, violations = fastest(lambda: validate_request(req, limits), a.repeat)
    if violations:
        raise SystemExit(f"invalid request: {violations[0]}")
    convert_s, problem = fastest(lambda: problem_from_proto(req, limits), a.repeat)
    configs_s, _ = fastest(lambda: build_config_set(problem), a.repeat)
    print(f"{a.jobs:,} jobs x {a.points} points = {total:,} points, {len(data) / 2**20:.1f} MiB\n")
    print("| step | seconds | us per point |")
    print("| --- | --- | --- |")
    steps = [
        ("parse", parse_s),
        ("validate", validate_s),
        ("convert", convert_s),
        ("configurations", configs_s),
    ]
    for name, seconds in [*steps, ("total", sum(s for _, s in steps))]:
        print(f"| {name} | {seconds:.3f} | {seconds / total * 1e6:.2f} |")


if __name__ == "__main__":
    main()
