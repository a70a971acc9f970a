"""The Pareto front of a sweep's plans (throughput against power) and the job changes between
neighbouring front points."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from solver.offline.sweep.grid import JobChoice, SweepPoint

EPS = 1e-9
"""Relative tolerance for equal throughput or power."""


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= EPS * max(1.0, abs(a), abs(b))


def same_place(a: SweepPoint, b: SweepPoint) -> bool:
    return _close(a.throughput, b.throughput) and _close(a.power_w, b.power_w)


def dominates(a: SweepPoint, b: SweepPoint) -> bool:
    """`a` has at least `b`'s throughput for at most its power, and is better in one."""
    at_least = a.throughput >= b.throughput or _close(a.throughput, b.throughput)
    at_most = a.power_w <= b.power_w or _close(a.power_w, b.power_w)
    return at_least and at_most and not same_place(a, b)


def pareto_front(points: Sequence[SweepPoint]) -> list[int]:
    """Indices (into `points`) of the non-dominated plans, by power ascending; of plans in the
    same place only the first counts."""
    placed = [p for p in points if p.placed]
    distinct: list[SweepPoint] = []
    for p in placed:
        if not any(same_place(p, q) for q in distinct):
            distinct.append(p)
    front = [p for p in distinct if not any(dominates(q, p) for q in distinct)]
    front.sort(key=lambda p: (p.power_w, -p.throughput))
    position = {id(p): i for i, p in enumerate(points)}
    return [position[id(p)] for p in front]


@dataclass(frozen=True)
class Change:
    step: str
    job: str
    before: JobChoice
    after: JobChoice

    def cells(self) -> list[str]:
        def cell(a: str, b: str) -> str:
            return a if a == b else f"{a} -> {b}"

        return [self.step, self.job] + [
            cell(a, b) for a, b in zip(self.before.describe(), self.after.describe(), strict=True)
        ]


def front_changes(points: Sequence[SweepPoint], front: Sequence[int]) -> list[Change]:
    """Jobs whose state, GPU type, parallelism or clock differ between neighbouring front
    points (placement alone is not a change here)."""
    out: list[Change] = []
    for a, b in itertools.pairwise(front):
        pa, pb_ = points[a], points[b]
        step = f"#{pa.index} ({pa.label()}) -> #{pb_.index} ({pb_.label()})"
        before = {j.job: j for j in pa.jobs}
        for after in pb_.jobs:
            prev = before.get(after.job)
            if prev is not None and prev.describe() != after.describe():
                out.append(Change(step, after.job, prev, after))
    return out
