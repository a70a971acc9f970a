"""Node-exclusion scenarios for benchmarks and tests: rules as sites make them.

- ``selectors``: a third of the jobs under one of four rules, each barring a random fifth of
  the nodes (seed 5): few rules, many jobs each, as node selectors and taints give.
- ``one_rack``: every waiting job barred from all but the first rack of each GPU type.
- ``distinct_halves``: every job its own random half of the nodes (seed 1): no two jobs share
  a set, the worst case for every cache keyed by a job's set.
"""

from __future__ import annotations

import dataclasses
import random

from solver.domain import Problem


def selectors(p: Problem) -> Problem:
    rnd = random.Random(5)
    names = [n.name for n in p.cluster.nodes]
    rules = [frozenset(rnd.sample(names, len(names) // 5)) for _ in range(4)]
    jobs = tuple(
        dataclasses.replace(j, excluded_nodes=rnd.choice(rules)) if rnd.random() < 1 / 3 else j
        for j in p.jobs
    )
    return dataclasses.replace(p, jobs=jobs)


def one_rack(p: Problem) -> Problem:
    first: dict[str, str] = {}
    for n in sorted(p.cluster.nodes, key=lambda n: n.rack):
        first.setdefault(n.gpu_type, n.rack)
    kept = set(first.values())
    rule = frozenset(n.name for n in p.cluster.nodes if n.rack not in kept)
    jobs = tuple(
        dataclasses.replace(j, excluded_nodes=rule) if j.current is None else j for j in p.jobs
    )
    return dataclasses.replace(p, jobs=jobs)


def distinct_halves(p: Problem) -> Problem:
    rnd = random.Random(1)
    names = [n.name for n in p.cluster.nodes]
    jobs = tuple(
        dataclasses.replace(j, excluded_nodes=frozenset(rnd.sample(names, len(names) // 2)))
        for j in p.jobs
    )
    return dataclasses.replace(p, jobs=jobs)
