"""The plan checker's view of a plan: its assignments read against the request once.

Kept apart from ``checker`` so that the families of checks in several modules (``checker``,
``mig_checks``) share it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

from solver.domain import Config, GpuType, Job, JobAssignment, JobState, Node, Problem
from solver.mig import GpuLayout, LayoutChange
from solver.power_states import PowerAction

POWER_TOLERANCE = 1e-6
"""Relative slack on power budgets, for floating-point sums only."""


@dataclass(frozen=True)
class PlanViolation:
    constraint: str
    """Constraint family, e.g. "gpu_capacity"."""
    job: str
    message: str


@dataclass(frozen=True)
class Running:
    """A running assignment whose configuration names a known GPU type."""

    job: Job
    assignment: JobAssignment
    config: Config
    gpu: GpuType


class PlanView:
    """A plan read against its request: the assignments of known jobs, once each, and the
    running ones resolved. Checks share it so that each lookup is made once."""

    def __init__(
        self,
        problem: Problem,
        assignments: Iterable[JobAssignment],
        layout_changes: Sequence[LayoutChange] = (),
        power_actions: Sequence[PowerAction] = (),
    ) -> None:
        self.problem = problem
        self.jobs = {j.name: j for j in problem.jobs}
        self.nodes: dict[str, Node] = {n.name: n for n in problem.cluster.nodes}
        self.assignments = tuple(assignments)
        self.layout_changes = tuple(layout_changes)
        self.power_actions = tuple(power_actions)

    @cached_property
    def unique(self) -> tuple[tuple[Job, JobAssignment], ...]:
        """The first assignment of each known job, in plan order."""
        seen: set[str] = set()
        out = []
        for a in self.assignments:
            if a.job in self.jobs and a.job not in seen:
                seen.add(a.job)
                out.append((self.jobs[a.job], a))
        return tuple(out)

    @cached_property
    def running(self) -> tuple[Running, ...]:
        out = []
        types = self.problem.cluster.gpu_types
        for job, a in self.unique:
            c = a.config
            if a.state is JobState.RUNNING and c is not None and c.gpu_type in types:
                out.append(Running(job, a, c, types[c.gpu_type]))
        return tuple(out)

    def gpus(self, r: Running) -> Iterator[tuple[Node, int]]:
        """The job's GPUs that exist and are available (known node, index in range)."""
        for s in r.assignment.placement:
            node = self.nodes.get(s.node)
            if node is None:
                continue
            for i in s.gpu_indices:
                if 0 <= i < node.gpu_count and i not in node.unavailable_gpu_indices:
                    yield node, i

    @cached_property
    def whole(self) -> tuple[Running, ...]:
        """Running jobs on whole GPUs (not on a MIG instance)."""
        return tuple(r for r in self.running if r.assignment.mig is None)

    @cached_property
    def sliced(self) -> tuple[Running, ...]:
        """Running jobs on a MIG instance."""
        return tuple(r for r in self.running if r.assignment.mig is not None)

    @cached_property
    def used(self) -> frozenset[tuple[str, int]]:
        """Every existing, available GPU a running whole-GPU job holds (a GPU with MIG
        instances draws its idle power; its instances' jobs add theirs above it)."""
        return frozenset((n.name, i) for r in self.whole for n, i in self.gpus(r))

    def current_layout(self, node: Node, gpu: int) -> GpuLayout:
        """The GPU's layout in the snapshot (whole when not listed)."""
        for layout in node.mig_layouts:
            if layout.gpu_index == gpu:
                return layout
        return GpuLayout(gpu)

    def layout(self, node: Node, gpu: int) -> GpuLayout:
        """The GPU's layout after the plan: its change if the plan has one, else the current."""
        for c in self.layout_changes:
            if c.node == node.name and c.layout.gpu_index == gpu:
                return c.layout
        return self.current_layout(node, gpu)


Check = Callable[[PlanView], Iterator[PlanViolation]]
