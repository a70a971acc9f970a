"""One set of placement rules sent two ways: as node names (``excluded_nodes``) and as node
labels with selectors (``node_selector``); what each costs to read and to solve.

    .venv/bin/python -m scripts.bench_node_rules --nodes 20000 --jobs 2000 --budgets 1 3 10

The request is ``dsfro generate --nodes N --jobs J --seed S``; every node gets a ``pool``
label (p0..p3, by seed; with ``--extra-labels K`` also its host name and K-1 labels as node
feature discovery adds them, which no rule reads) and every job one of four rules: not on
pool k's nodes (a quarter of the cluster). The names variant lists those nodes in each job's
``excluded_nodes``; the labels variant says ``pool NOT_IN [pk]``. Both give every job the
same excluded set (checked). The first table: bytes on the wire and the fastest of
``--repeat`` reads (decode, validation, conversion); the second: a Solve of each through a
real loopback server at each budget (wall time from the client, termination, jobs running).
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
    LabelOperator,
    SolveRequest,
)

POOLS = 4


def variants(nodes: int, jobs: int, seed: int, extra_labels: int = 0) -> dict[str, SolveRequest]:
    base = generate(
        spec_from_args(["--nodes", str(nodes), "--jobs", str(jobs), "--seed", str(seed)])
    )
    rnd = random.Random(seed)
    pool = {n.name: rnd.randrange(POOLS) for n in base.cluster.nodes}
    members = [sorted(n for n, k in pool.items() if k == p) for p in range(POOLS)]
    rule = [rnd.randrange(POOLS) for _ in base.jobs]
    names, labels = SolveRequest(), SolveRequest()
    names.CopyFrom(base)
    labels.CopyFrom(base)
    for i, n in enumerate(labels.cluster.nodes):
        n.labels["pool"] = f"p{pool[n.name]}"
        if extra_labels:  # as node feature discovery adds them: no rule reads them
            n.labels["kubernetes.io/hostname"] = n.name
            for k in range(extra_labels - 1):
                n.labels[f"feature.node.kubernetes.io/label-{k}"] = f"value-{(i + k) % 13}"
    for k, (by_name, by_label) in enumerate(zip(names.jobs, labels.jobs, strict=True)):
        by_name.excluded_nodes.extend(members[rule[k]])
        term = by_label.node_selector.add()
        term.requirements.add(
            key="pool", operator=LabelOperator.LABEL_OPERATOR_NOT_IN, values=[f"p{rule[k]}"]
        )
    return {"names": names, "labels": labels}


def read_table(requests: dict[str, SolveRequest], repeat: int) -> None:
    print(f"{'variant':8} {'MB':>7} {'decode s':>9} {'validate s':>11} {'convert s':>10}")
    excluded = {}
    for name, req in requests.items():
        wire = req.SerializeToString()
        decode, msg = fastest(partial(SolveRequest.FromString, wire), repeat)
        validate, violations = fastest(partial(validate_request, msg, Limits()), repeat)
        if violations:
            raise SystemExit(f"{name}: {violations[:3]}")
        convert, problem = fastest(partial(problem_from_proto, msg, Limits()), repeat)
        excluded[name] = [j.excluded_nodes for j in problem.jobs]
        print(f"{name:8} {len(wire) / 1e6:7.1f} {decode:9.3f} {validate:11.3f} {convert:10.3f}")
    if excluded["names"] != excluded["labels"]:
        raise SystemExit("the two variants exclude different nodes")


def solve_table(requests: dict[str, SolveRequest], budgets: list[float]) -> None:
    header = f"{'variant':8} {'budget s':>8} {'wall s':>7} {'late s':>7} {'termination':>12}"
    print(f"\n{header} {'running':>8}")
    for name, budget, wall, response in timed_solves(requests, budgets):
        late = max(wall - budget, 0.0)
        term = termination(response)
        print(f"{name:8} {budget:8g} {wall:7.2f} {late:7.2f} {term:>12} {running(response):8}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size_arguments(ap)
    ap.add_argument(
        "--extra-labels", type=int, default=0, help="labels no rule reads, per node (hostname, ...)"
    )
    args = ap.parse_args()
    requests = variants(args.nodes, args.jobs, args.seed, args.extra_labels)
    read_table(requests, args.repeat)
    if args.budgets:
        solve_table(requests, args.budgets)


if __name__ == "__main__":
    main()
