"""Rows of the aggregated LP for per-job node exclusions (``Job.barred_nodes``).

The LP pools each GPU type's GPUs; a job barred from some nodes can use only the others. For
each set of barred nodes B that some job has, and each GPU type, the GPUs of the jobs barred
from at least B (their sets hold B), with those other jobs keep outside B where they run now,
fit in that type's GPUs outside B: valid for every plan, so the bound stays a bound, and the
guide no longer hands such jobs GPUs they may not use or that running jobs hold.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from solver.domain import Config, Job, Node, Problem
from solver.search.array_lp import ArrayLp

NESTED_RULES = 64
"""Up to this many distinct sets, a job's columns join the row of every set its own holds
(tighter where one rule refines another), and running jobs' kept GPUs join the rows; beyond,
only a barred job's own set's row (both are products of the sets and the jobs)."""


def add_exclusion_rows(
    lp: ArrayLp,
    problem: Problem,
    opts: Mapping[str, Sequence[Config]],
    y: Mapping[str, list[tuple[int, int]]],
    held: Mapping[str, Sequence[int]],
    share: Callable[[Config], float],
) -> None:
    """Per barred set and GPU type, the GPUs (``share`` of a configuration: its GPUs, or its
    instance's share of one) of the jobs barred from it, and the GPUs off it that other
    running jobs keep (their `held` columns: on their own GPUs), within the type's GPUs off
    it."""
    sets = list(dict.fromkeys(j.barred_nodes for j in problem.jobs if j.barred_nodes))
    if not sets:
        return
    within: dict[frozenset[str], list[frozenset[str]]] = {
        b: ([a for a in sets if a <= b] if len(sets) <= NESTED_RULES else [b]) for b in sets
    }
    terms: dict[tuple[frozenset[str], str], list[tuple[int, float]]] = {}
    for job in problem.jobs:
        if not job.barred_nodes:
            continue
        for i, col in y[job.name]:
            c = opts[job.name][i]
            for rule in within[job.barred_nodes]:
                terms.setdefault((rule, c.gpu_type), []).append((col, share(c)))
    for job in problem.jobs if len(sets) <= NESTED_RULES else ():
        if job.current is None or job.current.mig is not None or not held.get(job.name):
            continue
        gpu_type = job.current.shape.gpu_type
        inside = set(within[job.barred_nodes]) if job.barred_nodes else set()
        for rule in sets:
            key = (rule, gpu_type)
            if rule in inside or key not in terms:
                continue  # its GPUs are in the row already (its choice's columns)
            gpus = sum(len(s.gpu_indices) for s in job.current.placement if s.node not in rule)
            if gpus:
                terms[key].extend((col, float(gpus)) for col in held[job.name])
    # Each type's GPUs less the rule's, by position in numpy: a rule may name most of 20,000
    # nodes, and each job may have its own.
    cluster = problem.cluster
    nodes = cluster.nodes
    code = {t: k for k, t in enumerate(dict.fromkeys(n.gpu_type for n in nodes))}
    types = np.array([code[n.gpu_type] for n in nodes], dtype=np.int64)
    avail = np.array([n.available_gpus for n in nodes], dtype=np.float64)
    total = np.bincount(types, weights=avail, minlength=len(code))
    left: dict[frozenset[str], npt.NDArray[np.float64]] = {}
    for (rule, gpu_type), row in terms.items():
        if rule not in left:
            at = np.array(cluster.positions(rule), dtype=np.int64)
            lost = np.bincount(types[at], weights=avail[at], minlength=len(code))
            left[rule] = np.asarray(total - lost, dtype=np.float64)
        k = code.get(gpu_type)  # none: a type only other parts of a decomposed solve have
        lp.row(row, hi=0.0 if k is None else float(left[rule][k]))


class RackRules:
    """What each rule leaves of each type's GPUs per rack, for the LP's split over budgeted
    racks: a class of configurations of jobs under one rule splits only over the racks where
    the rule leaves GPUs, and within each at most what it leaves there. Rules only up to
    ``NESTED_RULES`` distinct sets (each multiplies the classes); beyond, none."""

    def __init__(self, problem: Problem, rack_of: Callable[[Node], str]) -> None:
        sets = {j.barred_nodes for j in problem.jobs if j.barred_nodes}
        self.on = 0 < len(sets) <= NESTED_RULES
        self._cluster = problem.cluster
        self._rack_of = rack_of
        self._left: dict[tuple[frozenset[str], str], dict[str, int]] = {}
        self._all: dict[str, dict[str, int]] = {}
        """Per type, its available GPUs per rack (``rack_of``)."""

    def rule(self, job: Job) -> frozenset[str]:
        """The rule a job's configurations are classed by (empty: none)."""
        return job.barred_nodes if self.on else frozenset()

    def left(self, rule: frozenset[str], gpu_type: str) -> dict[str, int]:
        """Available GPUs of the type off `rule`, per rack (``rack_of``), racks with some."""
        key = (rule, gpu_type)
        found = self._left.get(key)
        if found is None:
            if not self._all:
                for n in self._cluster.nodes:
                    racks = self._all.setdefault(n.gpu_type, {})
                    racks[self._rack_of(n)] = racks.get(self._rack_of(n), 0) + n.available_gpus
            found = dict(self._all.get(gpu_type, {}))
            for k in self._cluster.positions(rule):  # the type's GPUs less the rule's
                n = self._cluster.nodes[k]
                if n.gpu_type == gpu_type:
                    found[self._rack_of(n)] -= n.available_gpus
            found = {rack: gpus for rack, gpus in found.items() if gpus > 0}
            self._left[key] = found
        return found
