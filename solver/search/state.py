"""The heuristic's working state: free GPUs per node, watts drawn and queue usage, kept
incrementally.

`SearchState` keeps free GPUs per node and the watts drawn (cluster and racks) as jobs are taken
and released, so a move is checked in constant time per node it touches; `Journal` undoes a
tentative move exactly.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from solver.domain import Config, Job, JobState, Plan, Problem, gpus_per_node
from solver.perfmodel import budgets
from solver.perfmodel.quotas import QuotaLedger
from solver.scoring.plans import Choice
from solver.search.bound import UNBUDGETED
from solver.search.placement import BoolArray, Placer, wanted_nodes

_NONE: frozenset[str] = frozenset()
POWER_SLACK = 1e-9
"""Watts below which a deficit counts as none (floating-point sums of watts)."""


class SearchState:
    """Free GPUs per node and power drawn over idle, as jobs are taken and released."""

    _stamps = itertools.count()

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.version = next(self._stamps)
        """Changes on every take and release, unique across states: a key for caches."""
        self._placed: dict[tuple[str, int, int, frozenset[str]], dict[str, int] | None] = {}
        self._placed_at = self.version
        self.placer = Placer(problem.cluster, wanted=wanted_nodes(problem))
        self._barred = {j.name: j.barred_nodes for j in problem.jobs if j.barred_nodes}
        """Each job's nodes it may not be newly placed on, where it has some."""
        self._avoided = avoided_nodes(problem)
        """Each job's barred nodes and those it would rather not run on, where it has some
        of the latter (and they are priced): a new placement tries without them first."""
        self.job_watts = 0.0
        """Watts drawn over idle by the running jobs, cluster-wide."""
        self.rack_watts: dict[str, float] = {}
        self.choices: dict[str, Choice] = {}
        cluster = problem.cluster
        self.quotas = QuotaLedger(cluster)
        """Queue usage of the running jobs (inactive without declared queues)."""
        self._jobs = {j.name: j for j in problem.jobs} if self.quotas.active else {}
        self.idle_total = budgets.floor_watts(cluster)
        self.idle_rack: Mapping[str, float] = budgets.rack_floor_watts(cluster)
        self._rack_of = {n.name: n.rack for n in cluster.nodes}
        self._unbudgeted = frozenset(
            n.rack for n in cluster.nodes if n.rack not in cluster.rack_power_budgets_watts
        )
        # Rack watts as arrays too (the same sums in the same order as ``rack_watts``), so
        # a placement finds the racks short of power for it in a few vector operations.
        racks = list(dict.fromkeys(n.rack for n in cluster.nodes))
        self._rack_id = {r: i for i, r in enumerate(racks)}
        self._rack_idle = np.array([self.idle_rack.get(r, 0.0) for r in racks])
        self._rack_drawn = np.zeros(len(racks))
        self._rack_budget = np.array(
            [cluster.rack_power_budgets_watts.get(r, math.inf) for r in racks]
        )
        self._type_racks: dict[str, npt.NDArray[np.int64]] = {}

    def extra_watts(self, config: Config) -> float:
        """What the configuration draws over the idle power of its GPUs."""
        return budgets.extra_watts(self.problem.cluster, config)

    def rack_delta(self, config: Config, counts: Mapping[str, int]) -> dict[str, float]:
        """Watts over idle the configuration adds to each rack, split evenly over its GPUs."""
        per_gpu = budgets.extra_watts_per_gpu(self.problem.cluster, config)
        delta: dict[str, float] = {}
        for node, k in counts.items():
            rack = self._rack_of[node]
            delta[rack] = delta.get(rack, 0.0) + per_gpu * k
        return delta

    def deficits(self, config: Config, counts: Mapping[str, int]) -> tuple[float, dict[str, float]]:
        """Watts over the cluster budget and over each rack budget were the job to run so
        (<= 0: it fits)."""
        cluster = self.problem.cluster
        over = float("-inf")
        if cluster.power_budget_watts is not None:
            drawn = self.idle_total + self.job_watts + self.extra_watts(config)
            over = drawn - cluster.power_budget_watts
        racks: dict[str, float] = {}
        if cluster.rack_power_budgets_watts:
            for rack, d in self.rack_delta(config, counts).items():
                budget = cluster.rack_power_budgets_watts.get(rack)
                if budget is not None:
                    racks[rack] = self.idle_rack[rack] + self.rack_watts.get(rack, 0.0) + d - budget
        return over, racks

    def rack_over(self, rack: str) -> float:
        """Watts the rack draws over its budget now (<= 0: within it); the rack has one."""
        budget = self.problem.cluster.rack_power_budgets_watts[rack]
        return self.idle_rack[rack] + self.rack_watts.get(rack, 0.0) - budget

    def within_budgets(self, config: Config, counts: Mapping[str, int]) -> bool:
        """Whether the job may also run so: the power budgets (cluster and racks) and its
        queue's quota."""
        cluster = self.problem.cluster
        if self.quotas.active and not self.quotas.fits(self._jobs[config.job], config):
            return False
        if cluster.power_budget_watts is not None and (
            self.idle_total + self.job_watts + self.extra_watts(config) > cluster.power_budget_watts
        ):
            return False
        if not cluster.rack_power_budgets_watts:
            return True
        for rack, d in self.rack_delta(config, counts).items():
            budget = cluster.rack_power_budgets_watts.get(rack)
            if budget is not None and (
                self.idle_rack[rack] + self.rack_watts.get(rack, 0.0) + d > budget
            ):
                return False
        return True

    def take(self, job: str, config: Config, counts: Mapping[str, int]) -> None:
        self.version = next(self._stamps)
        self.placer.take(counts)
        if self.quotas.active:
            self.quotas.take(self._jobs[job], config)
        self.job_watts += self.extra_watts(config)
        for rack, d in self.rack_delta(config, counts).items():
            self.rack_watts[rack] = self.rack_watts.get(rack, 0.0) + d
            self._rack_drawn[self._rack_id[rack]] += d
        self.choices[job] = (config, dict(counts))

    def release(self, job: str) -> Choice:
        """Stop the job; returns what it ran, so a rejected move can put it back."""
        self.version = next(self._stamps)
        config, counts = self.choices.pop(job)
        self.placer.give(counts)
        if self.quotas.active:
            self.quotas.release(self._jobs[job], config)
        self.job_watts -= self.extra_watts(config)
        for rack, d in self.rack_delta(config, counts).items():
            self.rack_watts[rack] -= d
            self._rack_drawn[self._rack_id[rack]] -= d
        return config, counts

    def fit(self, job: Job, config: Config) -> tuple[dict[str, int], bool] | None:
        """GPUs per node for the job in `config`, and whether it stays where it runs."""
        counts = keep_counts(job, config, self.placer)
        if counts is not None:
            return counts, True
        placed = self.fit_anew(config)
        return (placed, False) if placed is not None else None

    def barred(self, job: str) -> frozenset[str]:
        """Nodes the job may not be newly placed on (``Job.barred_nodes``)."""
        return self._barred.get(job, _NONE)

    def _tries(self, job: str) -> tuple[frozenset[str], ...]:
        """The nodes a new placement keeps off, in turn: the job's barred ones with those it
        would rather not run on, then its barred ones alone."""
        avoided = self._avoided.get(job)
        return (self.barred(job),) if avoided is None else (avoided, self.barred(job))

    def fit_anew(self, config: Config) -> dict[str, int] | None:
        """GPUs per node for a new placement of `config` (not where its job runs): best fit,
        off its job's barred nodes (and off those it would rather not use, where it can), away
        from racks short of power for it where it can."""
        if config.kept_only:
            return None
        for barred in self._tries(config.job):
            placed = self.place(config.gpu_type, config.num_gpus, config.tensor_parallel, barred)
            if placed is not None and self.problem.cluster.rack_power_budgets_watts:
                placed = self._rack_fit(config, placed, barred)
            if placed is not None:
                return placed
        return None

    def fit_split(
        self, job: Job, config: Config, split: Mapping[str, float]
    ) -> tuple[dict[str, int], bool] | None:
        """GPUs per node for the job in `config` with its tensor groups spread over racks as
        `split` says (GPUs per rack, fractional; UNBUDGETED: the type's racks without a
        budget), rounded to whole groups; whether it stays where it runs. None if a rack
        cannot hold its share."""
        counts = keep_counts(job, config, self.placer)
        if counts is not None:
            return counts, True
        if config.kept_only:
            return None
        groups = config.num_gpus // config.tensor_parallel
        shares = {r: v / config.tensor_parallel for r, v in split.items()}
        whole = {r: int(v) for r, v in shares.items()}
        left = groups - sum(whole.values())
        for r in sorted(shares, key=lambda r: (-(shares[r] - whole[r]), r))[: max(left, 0)]:
            whole[r] += 1
        budgets = self.problem.cluster.rack_power_budgets_watts
        quotas: dict[frozenset[str], int] = {}
        for rack, g in whole.items():
            racks = self._unbudgeted if rack == UNBUDGETED else frozenset({rack})
            quotas[racks] = quotas.get(racks, 0) + g * config.tensor_parallel
        if sum(quotas.values()) != config.num_gpus or not budgets:
            return None
        for barred in self._tries(config.job):
            placed = self.placer.place_split(
                config.gpu_type, config.tensor_parallel, quotas, barred
            )
            if placed is not None:
                return placed, False
        return None

    def _rack_fit(
        self, config: Config, placed: dict[str, int], barred: frozenset[str]
    ) -> dict[str, int]:
        """`placed` if its racks have the power for it; else the best fit outside the racks
        that lack it, rack after rack; else `placed` (a clock repair may still make room
        there). The racks that could hold the whole job but lack the watts for it are skipped
        at once: best fit would try them one by one, tightest first."""
        _, racks = self.deficits(config, placed)
        if not any(d > POWER_SLACK for d in racks.values()):
            return placed
        hidden = self._short_for_all(config, barred)
        position = self.placer.rack_position(config.gpu_type)
        while True:
            again = self.placer.place(
                config.gpu_type, config.num_gpus, config.tensor_parallel, hidden, barred
            )
            if again is None:
                return placed
            _, racks = self.deficits(config, again)
            short = [position[r] for r, d in racks.items() if d > POWER_SLACK]
            if not short:
                return again
            hidden[short] = True

    def _short_for_all(self, config: Config, barred: frozenset[str]) -> BoolArray:
        """Per rack of the configuration's GPU type (``Placer.rack_names``): whether it has
        the GPUs for the whole job (off `barred`) but not the watts (as ``deficits`` sums
        them)."""
        ids = self._type_racks.get(config.gpu_type)
        if ids is None:
            names = self.placer.rack_names(config.gpu_type)
            ids = np.array([self._rack_id[r] for r in names], dtype=np.int64)
            self._type_racks[config.gpu_type] = ids
        per_gpu = budgets.extra_watts_per_gpu(self.problem.cluster, config)
        delta = 0.0 + per_gpu * config.num_gpus  # as rack_delta sums it: the same rounding
        over = self._rack_idle[ids] + self._rack_drawn[ids] + delta - self._rack_budget[ids]
        room = self.placer.rack_room(config.gpu_type, config.tensor_parallel, barred)
        short: BoolArray = (room >= config.num_gpus) & (over > POWER_SLACK)
        return short

    def place(
        self, gpu_type: str, num_gpus: int, tensor_parallel: int, barred: frozenset[str] = _NONE
    ) -> dict[str, int] | None:
        """Best-fit placement on the free GPUs off the nodes `barred`, remembered until the
        state changes (the clocks of one shape, and jobs of one exclusion rule, share it)."""
        if self._placed_at != self.version:
            self._placed.clear()
            self._placed_at = self.version
        key = (gpu_type, num_gpus, tensor_parallel, barred)
        if key not in self._placed:
            if barred:
                # The placement without exclusions on one node the job may use is also its
                # placement with them (the tightest node holds it, and masking others keeps
                # it the tightest): jobs that each bar their own nodes share it.
                free = self.place(gpu_type, num_gpus, tensor_parallel)
                if free is not None and len(free) == 1 and not barred.intersection(free):
                    self._placed[key] = free
                    return free
            self._placed[key] = self.placer.place(
                gpu_type, num_gpus, tensor_parallel, barred=barred
            )
        return self._placed[key]

    def cluster_over(self, config: Config) -> float:
        """Watts over the cluster budget were the configuration to start (-inf: no budget)."""
        budget = self.problem.cluster.power_budget_watts
        if budget is None:
            return float("-inf")
        return self.idle_total + self.job_watts + self.extra_watts(config) - budget


def keep_counts(job: Job, config: Config, placer: Placer) -> dict[str, int] | None:
    """The job's current GPUs, if the configuration has its current shape and they are free."""
    if job.current is None or config.shape != job.current.shape:
        return None
    counts = job.current.gpus_per_node()
    if placer.fits(counts):
        return counts
    return None


class Journal:
    """Changes made to a state through it, so that a tentative move can be undone exactly."""

    def __init__(self, state: SearchState) -> None:
        self.state = state
        self.before: dict[str, Choice | None] = {}
        """Each touched job's choice before its first change (None: it was queued)."""

    def take(self, job: str, config: Config, counts: Mapping[str, int]) -> None:
        self.before.setdefault(job, self.state.choices.get(job))
        self.state.take(job, config, counts)

    def release(self, job: str) -> Choice:
        self.before.setdefault(job, self.state.choices.get(job))
        return self.state.release(job)

    def undo(self) -> None:
        """Put every touched job back as it was (all released first: their GPUs may cross)."""
        for job in self.before:
            if job in self.state.choices:
                self.state.release(job)
        for job, choice in self.before.items():
            if choice is not None:
                self.state.take(job, *choice)
        self.before.clear()


def state_of(problem: Problem, plan: Plan) -> SearchState:
    """The search state of a checked plan: its running jobs on their GPUs (per node)."""
    state = SearchState(problem)
    for a in plan.assignments:
        if a.state is JobState.RUNNING and a.config is not None:
            state.take(a.job, a.config, gpus_per_node(a.placement))
    return state


def avoided_nodes(problem: Problem) -> dict[str, frozenset[str]]:
    """Per job with node preferences (priced: a positive weight), its barred nodes with the
    ones it would rather not run on; one set per distinct pair (placements are cached by it),
    made once a problem (every search state asks)."""
    if problem.weights.node_preference <= 0:
        return {}
    memo: dict[str, frozenset[str]] | None = problem.__dict__.get("_avoided_nodes")
    if memo is not None:
        return memo
    made: dict[tuple[frozenset[str], int], frozenset[str]] = {}
    out: dict[str, frozenset[str]] = problem.__dict__.setdefault("_avoided_nodes", {})
    for j in problem.jobs:
        if j.preference is not None and j.preference.dislike:
            key = (j.barred_nodes, id(j.preference))
            if key not in made:
                made[key] = j.barred_nodes | j.preference.disliked
            out[j.name] = made[key]
    return out
