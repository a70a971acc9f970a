"""Clock-lowering repair: free watts for one more job by slowing running ones in place.

Under a binding power budget the greedy leaves jobs queued that a lower clock elsewhere would
pay for. Lowering a running job's clock keeps its shape and GPUs (no migration, same locality),
so its exact objective change is the difference of two configuration values. Each job's
lowerings form rungs along the lower convex hull of value lost against watts freed; all jobs'
rungs, cheapest per watt first, give a least-loss way to cover a deficit (a prefix of them).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from solver.domain import Config
from solver.scoring.plans import Choice
from solver.search.scorer import Scorer
from solver.search.state import POWER_SLACK, Journal, SearchState

_Point = tuple[float, float, int]
"""(watts freed, value lost, configuration index) of one clock of a job."""


@dataclass(frozen=True)
class ClockStep:
    """One rung of a job's ladder: from its previous rung to `config`."""

    job: str
    config: Config
    loss: float
    """Objective lost by this rung (negative when the lower clock is worth more)."""
    freed: float
    """Watts over idle freed by this rung, cluster-wide."""
    rack_freed: Mapping[str, float]
    """Watts freed per rack (filled only when the cluster has rack budgets)."""


@dataclass(frozen=True)
class Repair:
    """New clocks for some running jobs, and the objective they cost in total."""

    configs: Mapping[str, Config]
    loss: float


class Ladder:
    """Rungs of every running job, cheapest per watt first, with prefix sums for queries."""

    def __init__(self, steps: list[ClockStep]) -> None:
        self.steps = steps
        self.freed = list(itertools.accumulate(s.freed for s in steps))
        self.loss = list(itertools.accumulate(s.loss for s in steps))
        self.gaining = sum(s.loss for s in steps if s.loss < 0)
        """Loss of every rung that gains (<= 0): they come first, ratios being negative."""
        self.gaining_freed = sum(s.freed for s in steps if s.loss < 0)
        self.rack_freed: dict[str, float] = {}
        """Watts all rungs together free in each rack."""
        for s in steps:
            for rack, f in s.rack_freed.items():
                self.rack_freed[rack] = self.rack_freed.get(rack, 0.0) + f

    def least_loss(self, over: float) -> float:
        """A lower bound on the loss of any set of clocks freeing `over` watts: the rungs
        taken fractionally, every one that gains taken whole (inf if they cannot free it)."""
        if over <= self.gaining_freed + POWER_SLACK:
            return self.gaining
        k = bisect.bisect_left(self.freed, over - POWER_SLACK)
        if k >= len(self.steps):
            return float("inf")
        before_freed = self.freed[k - 1] if k else 0.0
        before_loss = self.loss[k - 1] if k else 0.0
        step = self.steps[k]
        return before_loss + (over - before_freed) * step.loss / step.freed

    def without(self, job: str) -> Ladder:
        """The ladder once `job` stops (its rungs gone)."""
        return Ladder([s for s in self.steps if s.job != job])

    def repair(self, over: float, rack_over: Mapping[str, float]) -> Repair | None:
        """The cheapest rungs that bring the cluster deficit `over` and every rack deficit to
        zero, less the costly ones the last rung made unneeded; None if all rungs fall short."""
        racks = {r: d for r, d in rack_over.items() if d > POWER_SLACK}
        if over <= POWER_SLACK and not racks:
            return Repair({}, 0.0)
        if any(d > self.rack_freed.get(r, 0.0) + POWER_SLACK for r, d in racks.items()):
            return None
        if racks:
            taken = _walk(self.steps, over, racks)
        else:
            k = bisect.bisect_left(self.freed, over - POWER_SLACK)
            taken = self.steps[: k + 1] if k < len(self.steps) else None
        if taken is None:
            return None
        taken = _drop_unneeded(taken, over, rack_over)
        configs = {s.job: s.config for s in taken}  # the last rung of each job wins
        return Repair(configs, sum(s.loss for s in taken))


class Ladders:
    """Builds the Ladder of a state, reusing each job's rungs while its choice is unchanged."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer
        self._rungs: dict[str, tuple[Choice, list[ClockStep]]] = {}
        self._built: tuple[int, Ladder] | None = None

    def of(self, state: SearchState) -> Ladder:
        if self._built is not None and self._built[0] == state.version:
            return self._built[1]
        ranked: list[tuple[float, int, int, ClockStep]] = []
        for k, name in enumerate(self.scorer.order):
            choice = state.choices.get(name)
            if choice is None:
                continue
            cached = self._rungs.get(name)
            if cached is None or cached[0] is not choice:
                cached = (choice, job_ladder(self.scorer, state, name))
                self._rungs[name] = cached
            for r, step in enumerate(cached[1]):
                ranked.append((step.loss / step.freed, k, r, step))
        ranked.sort(key=lambda s: (s[0], s[1], s[2]))
        ladder = Ladder([s[3] for s in ranked])
        self._built = (state.version, ladder)
        return ladder


def job_ladder(scorer: Scorer, state: SearchState, job: str) -> list[ClockStep]:
    """The job's clock lowerings worth considering, as increments along their lower convex hull
    (value lost against watts freed): each rung costs at least as much per watt as the last."""
    config, counts = state.choices[job]
    index = scorer.position(job, config)
    value = scorer.value[job, index]
    watts = state.extra_watts(config)
    points: list[_Point] = []
    for i in scorer.variants(job, config):
        freed = watts - state.extra_watts(scorer.configs.by_job[job][i])
        if freed > POWER_SLACK:
            points.append((freed, value - scorer.value[job, i], i))
    if not points:
        return []
    points.sort()
    hull: list[_Point] = [(0.0, 0.0, index)]
    for p in points:
        while len(hull) >= 2 and _ratio(hull[-2], p) <= _ratio(hull[-2], hull[-1]):
            hull.pop()
        if _ratio(hull[-1], p) < float("inf"):
            hull.append(p)
    by_rack = bool(state.problem.cluster.rack_power_budgets_watts)
    steps = []
    for (f0, l0, i0), (f1, l1, i1) in itertools.pairwise(hull):
        lower = scorer.configs.by_job[job][i1]
        racks: dict[str, float] = {}
        if by_rack:
            prev = state.rack_delta(scorer.configs.by_job[job][i0], counts)
            new = state.rack_delta(lower, counts)
            racks = {r: prev[r] - new[r] for r in prev}
        steps.append(ClockStep(job, lower, l1 - l0, f1 - f0, racks))
    return steps


def _ratio(a: _Point, b: _Point) -> float:
    """Loss per watt freed from `a` to `b`."""
    freed = b[0] - a[0]
    return (b[1] - a[1]) / freed if freed > POWER_SLACK else float("inf")


def _walk(steps: list[ClockStep], over: float, racks: dict[str, float]) -> list[ClockStep] | None:
    """Rungs in ladder order that help a remaining deficit, until none is left (rack budgets)."""
    need = max(over, 0.0)
    taken: list[ClockStep] = []
    skipped: set[str] = set()
    for step in steps:
        if need <= POWER_SLACK and not racks:
            break
        if step.job in skipped:
            continue
        if need <= POWER_SLACK and not any(r in racks for r in step.rack_freed):
            skipped.add(step.job)  # deficits only shrink: none of its rungs will help
            continue
        taken.append(step)
        need -= step.freed
        for r, f in step.rack_freed.items():
            if r in racks:
                racks[r] -= f
                if racks[r] <= POWER_SLACK:
                    del racks[r]
    return taken if need <= POWER_SLACK and not racks else None


def _drop_unneeded(
    taken: list[ClockStep], over: float, rack_over: Mapping[str, float]
) -> list[ClockStep]:
    """Remove costly rungs (each the last of its job) the deficits no longer need."""
    slack = sum(s.freed for s in taken) - max(over, 0.0)
    candidates = [s for s in taken if s.loss > 0 and s.freed <= slack + POWER_SLACK]
    if not candidates:
        return taken
    kept = list(taken)
    for step in sorted(candidates, key=lambda s: -s.loss):
        if step.freed > slack + POWER_SLACK:
            continue
        if [s for s in kept if s.job == step.job][-1] is not step:
            continue
        rest = [s for s in kept if s is not step]
        if _covers(rest, over, rack_over):
            kept = rest
            slack -= step.freed
    return kept


def _covers(steps: list[ClockStep], over: float, rack_over: Mapping[str, float]) -> bool:
    if over - sum(s.freed for s in steps) > POWER_SLACK:
        return False
    for rack, d in rack_over.items():
        if d - sum(s.rack_freed.get(rack, 0.0) for s in steps) > POWER_SLACK:
            return False
    return True


def apply_repair(state: SearchState | Journal, repair: Repair) -> None:
    """Switch each job of the repair to its new clock on the same GPUs."""
    for name, config in repair.configs.items():
        _, counts = state.release(name)
        state.take(name, config, counts)
