"""The quick plan's result (solver.search.quick): the plan, and what happened on the way for
the answer's detail; the reasons a job it leaves queued is given."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from solver.domain import JobAssignment, JobState, Plan, QueueReason
from solver.perfmodel.configs import ConfigSet

NOT_REACHED = "not planned: the time budget ran out before the quick plan reached the job"
NODE_GONE = "stopped: its current allocation names a node that is no longer in the cluster"


@dataclass(frozen=True)
class QuickPlan:
    """The quick plan with what happened on the way, for the answer's detail."""

    plan: Plan
    configs: ConfigSet
    kept: int
    """Running jobs kept where they run."""
    started: int
    """Jobs started (queued ones, and preempted ones placed anew)."""
    grown: int
    """Jobs the third step moved: started ones into more GPUs or another type, running ones
    to where they gain more than their move costs."""
    preempted: tuple[str, ...]
    """Preemptible running jobs whose allocation is no longer valid (or over the power left)."""
    not_reached: int
    """Jobs the clock stopped the plan before."""
    blocked: tuple[str, ...]
    """Non-preemptible running jobs that cannot keep their allocation: no valid plan keeps
    them, and stopping them is not allowed."""
    seconds: float

    def summary(self) -> str:
        parts = [f"quick plan: {self.kept} running jobs kept, {self.started} started"]
        if self.grown:
            parts.append(f"{self.grown} grown")
        if self.preempted:
            parts.append(f"{len(self.preempted)} stopped (allocation no longer valid or power)")
        if self.not_reached:
            parts.append(f"{self.not_reached} not reached before the deadline")
        return ", ".join(parts) + f" in {self.seconds:.3f} s"


def queued(a: JobAssignment, detail: str) -> JobAssignment:
    """The queued assignment `a` with its reason: not reached in time, or not placeable."""
    assert a.state is JobState.QUEUED
    return dataclasses.replace(
        a, queue_reason=QueueReason.INSUFFICIENT_RESOURCES, queue_detail=detail
    )
