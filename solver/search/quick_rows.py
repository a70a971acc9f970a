"""The rows the quick plan (solver.search.quick) reads: jobs alike grouped as
solver.perfmodel.configs groups them, each group enumerated once, on demand, in batches."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from solver.domain import Job, Problem
from solver.perfmodel.configs import least_joules
from solver.perfmodel.enumeration import Enumerator, Row
from solver.perfmodel.facts import TypeFacts


class QuickRows:
    """Rows of jobs alike (solver.perfmodel.configs groups them the same way), enumerated on
    demand in batches; what the quick plan reads of them."""

    def __init__(self, problem: Problem, facts: Mapping[str, TypeFacts]) -> None:
        self.facts = facts
        self.enumerator = Enumerator(facts)
        self.allowed: dict[frozenset[str], tuple[str, ...]] = {}
        self.keys: dict[Hashable, int] = {}
        self.rows: list[list[Row] | None] = []
        self.top: list[float] = []
        self.least: list[float] = []
        self.group: dict[str, int] = {}
        self.counted: dict[int, list[list[list[Row]]]] = {}
        self.shaped: dict[int, list[Row]] = {}
        self.enumerated = 0

    def _key(self, job: Job) -> Hashable:
        types = self.allowed.get(job.allowed_gpu_types)
        if types is None:
            types = self.allowed[job.allowed_gpu_types] = tuple(
                n for n in self.facts if job.allows(n)
            )
        keep = job.current.shape if job.current is not None else None
        return (job.workload, job.min_gpus, job.max_gpus, types, keep)

    def load(self, jobs: Sequence[Job]) -> None:
        """Enumerate the groups of `jobs` not enumerated yet, in one batch."""
        new: list[Job] = []
        for job in jobs:
            key = self._key(job)
            index = self.keys.get(key)
            if index is None:
                index = self.keys[key] = len(self.rows)
                self.rows.append(None)
                self.top.append(0.0)
                self.least.append(0.0)
                new.append(job)
            self.group[job.name] = index
        if not new:
            return
        self.enumerator.prepare(new)
        for job in new:
            index = self.group[job.name]
            rows = self.enumerator.rows(job)
            self.rows[index] = rows
            self.top[index] = max((r[2] for r in rows), default=0.0)
            self.least[index] = least_joules(rows)
            self.enumerated += len(rows)

    def by_count(self, job: Job) -> list[list[list[Row]]]:
        """Per GPU type, the rows that may start anywhere (not kept_only), by GPU count
        ascending; made once per group."""
        index = self.group[job.name]
        out = self.counted.get(index)
        if out is None:
            types: dict[str, dict[int, list[Row]]] = {}
            for r in self.of(job):
                if not r[8]:
                    types.setdefault(r[0].gpu_type, {}).setdefault(r[0].num_gpus, []).append(r)
            out = self.counted[index] = [
                [counts[n] for n in sorted(counts)] for counts in types.values()
            ]
        return out

    def running_shape(self, job: Job) -> list[Row]:
        """The rows of the running shape of the group's jobs (the same for all of them: it is
        part of the group's key), by draw descending; made once per group."""
        assert job.current is not None
        index = self.group[job.name]
        out = self.shaped.get(index)
        if out is None:
            shape = job.current.shape
            out = self.shaped[index] = sorted(
                (r for r in self.of(job) if r[0] == shape), key=lambda r: -r[3]
            )
        return out

    def of(self, job: Job) -> list[Row]:
        rows = self.rows[self.group[job.name]]
        assert rows is not None
        return rows

    def best(self, job: Job) -> float:
        return self.top[self.group[job.name]]

    def least_joules(self, job: Job) -> float:
        return self.least[self.group[job.name]]
