"""Soft node preferences at scale: what they cost to read and to solve, and what they get.

    .venv/bin/python -m scripts.bench_node_preferences --nodes 20000 --jobs 2000 --budgets 1 3 10

The request is ``dsfro generate --nodes N --jobs J --seed S``; every node gets a ``pool`` label
(p0..p3, by seed) and one node in twenty a PreferNoSchedule taint; every job prefers one pool
(weight 100), a quarter of the nodes. Variants: ``plain`` (the labels
and taints, no preference), ``priced`` (the preferences at the default weight) and
``unpriced`` (the same preferences, node_preference weight 0: placed as before). The first
table: the fastest of ``--repeat`` reads (validation, conversion); the second: a Solve of each
through a real loopback server at each budget (wall time, termination, objective, and the
share of running GPUs on nodes their job dislikes, each by how much, and the proven gap).
Nothing is asserted (docs/benchmarks.md keeps the runs).
"""

from __future__ import annotations

import argparse
import random
from functools import partial

from scripts.common.loopback import running, size_arguments, termination, timed_solves
from scripts.common.timing import fastest
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.offline.generate.cli import spec_from_args
from solver.offline.generate.instance import generate
from solver.wire import (
    JobState,
    LabelOperator,
    SolveRequest,
    SolveResponse,
    TaintEffect,
)

POOLS = 4


def variants(nodes: int, jobs: int, seed: int) -> dict[str, SolveRequest]:
    plain = generate(
        spec_from_args(["--nodes", str(nodes), "--jobs", str(jobs), "--seed", str(seed)])
    )
    rnd = random.Random(seed)
    for n in plain.cluster.nodes:
        n.labels["pool"] = f"p{rnd.randrange(POOLS)}"
        if rnd.random() < 0.05:
            n.taints.add(key="maintenance-soon", effect=TaintEffect.TAINT_EFFECT_PREFER_NO_SCHEDULE)
    priced = SolveRequest()
    priced.CopyFrom(plain)
    for j in priced.jobs:
        soft = j.node_preferences.add(weight=100)
        soft.preference.requirements.add(
            key="pool",
            operator=LabelOperator.LABEL_OPERATOR_IN,
            values=[f"p{rnd.randrange(POOLS)}"],
        )
    unpriced = SolveRequest()
    unpriced.CopyFrom(priced)
    unpriced.weights.node_preference = 0.0
    return {"plain": plain, "priced": priced, "unpriced": unpriced}


def read_table(requests: dict[str, SolveRequest], repeat: int) -> None:
    print(f"{'variant':9} {'MB':>6} {'validate s':>11} {'convert s':>10}")
    for name, req in requests.items():
        validate, violations = fastest(partial(validate_request, req, Limits()), repeat)
        if violations:
            raise SystemExit(f"{name}: {violations[:3]}")
        convert, _ = fastest(partial(problem_from_proto, req, Limits()), repeat)
        mb = req.ByteSize() / 1e6
        print(f"{name:9} {mb:6.1f} {validate:11.3f} {convert:10.3f}")


def disliked_share(request: SolveRequest, response: SolveResponse) -> float:
    """Running GPUs on nodes their job dislikes, each by how much, over all running GPUs."""
    problem = problem_from_proto(request, Limits())
    jobs = {j.name: j for j in problem.jobs}
    total = weighed = 0.0
    for a in response.plan.assignments:
        if a.state != JobState.JOB_STATE_RUNNING:
            continue
        preference = jobs[a.job].preference
        for s in a.placement:
            total += len(s.gpu_indices)
            if preference is not None:
                weighed += len(s.gpu_indices) * preference.dislike.get(s.node, 0.0)
    return weighed / total if total else 0.0


def gap(response: SolveResponse) -> str:
    """The answer's proven relative gap, or '-' where no bound was proven."""
    stats = response.stats
    return f"{stats.relative_gap:.3%}" if stats.HasField("relative_gap") else "-"


def solve_table(requests: dict[str, SolveRequest], budgets: list[float]) -> None:
    judged = requests["priced"]  # the plain and unpriced plans judged by the same preferences
    print(
        f"\n{'variant':9} {'budget s':>8} {'wall s':>7} {'termination':>12} {'objective':>10} "
        f"{'gap':>7} {'running':>8} {'disliked':>9}"
    )
    for name, budget, wall, response in timed_solves(requests, budgets):
        share = disliked_share(judged, response)
        print(
            f"{name:9} {budget:8g} {wall:7.2f} {termination(response):>12} "
            f"{response.stats.objective:10.3f} {gap(response):>7} {running(response):8} "
            f"{share:9.1%}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size_arguments(ap)
    args = ap.parse_args()
    requests = variants(args.nodes, args.jobs, args.seed)
    read_table(requests, args.repeat)
    if args.budgets:
        solve_table(requests, args.budgets)


if __name__ == "__main__":
    main()
