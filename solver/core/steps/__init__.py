"""The steps of a solve. Each reads the plain domain, works within the run's clock, and offers
its plans and bounds to the run's incumbent; ``solver.core.solver`` decides which run, in which
order, by backend and size.

- ``quick``: the quick plan, linear in the snapshot, when the time left is too short for the
  normal first plan;
- ``first``: the heuristic's first greedy pass (the first checked plan, in milliseconds), and
  later its priced passes with local search;
- ``bound``: the aggregated model (LP, its Lagrangian dual at scale, or a MIP) for a proven
  bound and a guide: each job's configuration and how its GPUs split over racks;
- ``guided``: a guide placed (in its racks, and best-fit anywhere), then local search;
- ``lns``: large-neighbourhood search on the full model around the best plan;
- ``full``: the full model on an exact backend, in the solve's process or in an isolated
  worker killed at the deadline;
- ``portfolio``: the improvement phase by backend: the aggregated MIP on a thread of its own
  handing each incumbent to be placed, beside priced passes and LNS;
- ``decomposed``: the parts of a large snapshot on an executor, merged and completed.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

from solver.core.deadline import Clock, extract_seconds
from solver.core.incumbent import Incumbent
from solver.core.settings import SolverSettings
from solver.domain import Config, Problem, SolveResult
from solver.exact.lns import Lns
from solver.perfmodel.configs import ConfigSet
from solver.search.guide import Guide
from solver.search.heuristic import Heuristic


@dataclass
class SolveRun:
    """One solve in progress: what every step reads and where it offers its results."""

    problem: Problem
    settings: SolverSettings
    clock: Clock
    incumbent: Incumbent
    configs: ConfigSet
    heuristic: Heuristic
    threads: int
    first_plan_seconds: float = 0.0
    priced: bool = False
    """The priced passes have run (they are work-limited: a second run finds the same)."""
    guide: dict[str, Config] = field(default_factory=dict)
    """The aggregated MIP's choice, which LNS also searches around."""
    lns: Lns | None = None
    """The LNS running now, told of a new guide."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Guards `guide` and `lns` while steps run side by side."""
    heuristic_lock: threading.Lock = field(default_factory=threading.Lock)
    """One guided placement at a time: the heuristic has state."""
    pending: Guide | None = None
    """The aggregated MIP's latest incumbent, not yet placed (guarded by `lock`)."""
    pending_objective: float = math.inf
    """The pending incumbent's objective in the aggregated model: at most what it placed is
    worth (the aggregated model relaxes placement)."""

    @property
    def extract_seconds(self) -> float:
        """Kept back after an exact solver stops (``solver.core.deadline.extract_seconds``)."""
        return extract_seconds(self.settings, len(self.problem.jobs))

    def hand_over(self, guide: Guide, objective: float = math.inf) -> None:
        """The MIP found `guide`, of `objective` in the aggregated model: to be placed by the
        search (the latest one wins)."""
        with self.lock:
            self.pending = guide
            self.pending_objective = objective

    def promises_more(self, objective: float) -> bool:
        """Whether a MIP solution of `objective` in the aggregated model (which bounds what
        placing it gives) is above the best plan's: only then can placing it gain."""
        best = self.incumbent.best
        if best is None:
            return True
        value = best.objective.total
        return objective > value + 1e-9 * max(1.0, abs(value))

    def pending_promises_more(self) -> bool:
        """Whether an incumbent is pending that promises more than the best plan."""
        with self.lock:
            if self.pending is None:
                return False
            objective = self.pending_objective
        return self.promises_more(objective)

    def take_pending(self) -> Guide | None:
        with self.lock:
            guide, self.pending = self.pending, None
            return guide

    def has_pending(self) -> bool:
        with self.lock:
            return self.pending is not None

    def result(self) -> SolveResult:
        return self.incumbent.result(
            wall_seconds=self.clock.elapsed(),
            first_plan_seconds=self.first_plan_seconds,
            configs=self.configs,
        )
