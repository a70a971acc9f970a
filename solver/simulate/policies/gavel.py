"""Gavel: heterogeneity-aware allocation over GPU types, realised by time-sharing rounds; its
max-sum-throughput and max-min-fairness policies, and POP-k over the latter.

Gavel (Narayanan et al., OSDI'20), stanford-futuredata/gavel. An allocation X[j, t] is the
share of time job j should run on GPU type t, under Gavel's base constraints
(scheduler/policies/policy.py ``Policy.get_base_constraints``):

    sum_t X[j, t] <= 1,   sum_j scale_factor_j * X[j, t] <= num_gpus_t,   X >= 0

- ``gavel`` (policy ``max_sum_throughput_perf``: scheduler/utils.py ``get_policy`` ->
  scheduler/policies/max_sum_throughput.py ``ThroughputSumWithPerf`` ->
  ``ThroughputNormalizedByCostSumWithPerfSLOs.get_allocation`` with unit costs): maximise
  sum_j sum_t tput[j, t] X[j, t], the raw throughputs (the ``scale = 1 / throughputs.sum``
  computed there is unused). ``normalize=True`` divides each job's row by its best type's
  throughput instead (an option, not Gavel's).
- ``gavel-maxmin`` (``max_min_fairness_perf``: scheduler/policies/max_min_fairness.py
  ``MaxMinFairnessPolicyWithPerf.get_allocation``): maximise min_j sum_t a[j, t] X[j, t] with
  a[j, t] = tput[j, t] * scale_factor_j / (weight_j * prop_j), where prop_j is the job's
  throughput under scheduler/policies/proportional.py ``ProportionalPolicy``: time on each type
  in proportion to its GPU count (x[t] = num_gpus_t / m, rows scaled to sum to 1, so
  x[t] = num_gpus_t / total GPUs).
- ``pop-maxmin`` (POP, Narayanan et al., SOSP'21, "Solving Large-Scale Granular Resource
  Allocation Problems Efficiently with POP"): jobs are split at random into k equal parts, each
  part gets 1/k of every type's GPUs (fractional counts, as POP's Gavel partitions), Gavel's
  max-min LP is solved per part and the allocations are joined; k = 1 is the full LP.

Mechanism (scheduler/scheduler.py, as its simulator runs it, ``simulate=True``):

- when: at a round boundary (leases, below), the allocation is recomputed only when the job
  set has changed (``add_job`` and ``_remove_job`` set ``_need_to_update_allocation``) and at least
  ``minimum_time_between_allocation_resets`` (1,920 s) has passed since the last reset, or the
  last reset was at time 0 (``_update_priorities``). Jobs that arrive in between are not in the
  allocation: their priority is 0, and if one is picked for leftover GPUs it still does not run
  (``_schedule_jobs_on_workers`` assigns workers only to jobs in ``_allocation``), as in Gavel;
- received share: ``_job_time_so_far[j][t]`` starts at half a round (``time_per_iteration / 2``)
  for every job and type, on arrival and at every reset, and grows by the job's run time on t;
  ``_worker_time_so_far[t]`` is the sum of the credits at the reset plus all run time on t
  since. fraction = job time / worker time; priority[j, t] = X[j, t] / fraction
  (X * 1e9 while the worker time is 0), 0 where X or the throughput is 0 or j is not in the
  allocation;
- deficits (``_reset_time_run_so_far``): at each reset, deficit[t][j] += X_old[j, t] x time since
  the last reset - time received since then; set to 0 when a job arrives; the tie-break after
  the priority;
- leases: Gavel decides at its round boundaries only (``time_per_iteration``, 360 s, or the
  engine's interval when longer; the engine calls it then, ``Decision.next_round_s``); a job
  scheduled again keeps its lease. The engine's other calls (at arrivals and completions, the
  same for every policy) are mid-round: every running job keeps its type and only idle GPUs
  are filled, in the queue's order. Deciding at every call moved jobs more often than Gavel;
- rounds (``_schedule_jobs_on_workers_helper``): per type in Gavel's fixed order v100, p100,
  k80 (here fastest datasheet peak first), entries sorted by (priority, deficit, X) descending
  (ties in arrival order: Python's stable sort over Gavel's insertion-ordered dicts), each job
  at most once per round, where its scale factor still fits the type's free GPU count.

Adapted:
- tput[j, t] = DSFRO's predicted samples/s at the requested count at the top clock, with the
  best tensor/pipeline split that fits in memory on t (0 where none fits). Gavel's unit is
  steps/s: the raw sum weighs jobs by their unit (the gavel-physical scenario's profiles are in
  steps/s for that reason; docs/simulation.md);
- Gavel counts GPUs; here the chosen jobs are then placed (``admit_in_order``: jobs keep their
  GPUs where they can, best-fit otherwise) and a job that no longer fits (fragmentation, power)
  waits. The received time is the engine's time on the type (restart delays included); the
  worker time leaves out a finished job's last round (the policy no longer sees the job), which
  scales every fraction on the type alike and so leaves the order unchanged;
- the power budget is one more resource at admission (Gavel has no power constraint); the LPs
  are solved with HiGHS's interior-point method without crossover instead of cvxpy's default
  ECOS (also interior point: on a tied optimum both give a central point, so equal jobs split a
  type's time, where a simplex vertex would starve one of them). Non-preemptible running jobs
  keep their GPUs and are left out of the LP (their GPUs are taken from num_gpus_t);
- not reproduced: the simulator's forced reset when nothing runs and no job is left to arrive,
  and the rounding of a round's steps down to whole steps.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from solver.domain import Config, Job
from solver.simulate.core import Decision, RoundInput
from solver.simulate.policies.common import (
    Candidate,
    Planner,
    RoundView,
    admit_in_order,
    fastest_config,
    pin_non_preemptible,
    rigid_count,
    submission_order,
)
from solver.simulate.policies.gavel_lp import Shares, max_min_fairness, max_sum_throughput

NEVER_RUN_PRIORITY = 1e9
"""Gavel's priority multiplier while a type's worker time is 0 (``* 1e9``)."""
MIN_RESET_INTERVAL_S = 1920.0
"""Gavel's ``minimum_time_between_allocation_resets`` (scheduler.py default)."""
GAVEL_ROUND_S = 360.0
"""Gavel's ``time_per_iteration``, its round: the physical cluster's driver default and the
paper's 6 minutes."""


def priority(share: float, job_time_s: float, worker_time_s: float) -> float:
    """Gavel's priority of a job in the allocation on a type where it has a throughput:
    X[j, t] over its fraction of the type's time since the last reset."""
    if share <= 0.0:
        return 0.0
    if worker_time_s <= 0.0:
        return share * NEVER_RUN_PRIORITY
    fraction = job_time_s / worker_time_s
    return share / fraction if fraction > 0 else share * NEVER_RUN_PRIORITY


@dataclass(frozen=True)
class TimeShares:
    """The LP's answer: share of time per (job, type), and the configuration behind it."""

    share: Mapping[tuple[str, str], float]
    configs: Mapping[tuple[str, str], Config]


class GavelPolicy:
    """Gavel's round-based mechanism around an allocation LP (max-sum-throughput here)."""

    name = "gavel"

    def __init__(
        self,
        normalize: bool = False,
        min_reset_interval_s: float = MIN_RESET_INTERVAL_S,
        round_s: float = GAVEL_ROUND_S,
    ) -> None:
        self.normalize = normalize
        self.min_reset_interval_s = min_reset_interval_s
        self.round_s = round_s  # Gavel's round (time_per_iteration), unless the engine's is longer
        self.shares: dict[str, dict[str, float]] = {}
        """The allocation in force: X per job in it and type."""
        self.last_reset_s = 0.0
        self.need_update = False
        self.resets = 0
        self.job_time: dict[str, dict[str, float]] = {}
        self.worker_time: dict[str, float] = {}
        self.deficit: dict[str, dict[str, float]] = {}
        """deficit[type][job]."""
        self._seen: dict[str, dict[str, float]] = {}
        self.last_round_s: float | None = None
        """When the last full round (a round boundary of Gavel's) was decided."""

    # ------------------------------------------------------------ the LP

    def solve(
        self,
        jobs: Sequence[Job],
        types: Sequence[str],
        configs: Mapping[tuple[str, str], Config],
        capacity: Mapping[str, float],
        time_limit_s: float,
    ) -> Shares:
        return max_sum_throughput(
            jobs, types, configs, capacity, normalize=self.normalize, time_limit_s=time_limit_s
        )

    def configs(self, view: RoundView, jobs: Sequence[Job]) -> dict[tuple[str, str], Config]:
        """Each job's configuration on each type at its requested count (none: throughput 0)."""
        out: dict[tuple[str, str], Config] = {}
        for j in jobs:
            n = rigid_count(view, j)
            for t in view.types_for(j):
                c = fastest_config(view, j, t, n)
                if c is not None:
                    out[(j.name, t)] = c
        return out

    def allocation(self, view: RoundView, jobs: Sequence[Job], pinned: Planner) -> TimeShares:
        """The LP over the jobs not pinned, on the GPUs the pinned jobs leave."""
        configs = self.configs(view, jobs)
        capacity = {
            t: float(view.available_gpus(t))
            - sum(c.num_gpus for c in pinned.configs.values() if c.gpu_type == t)
            for t in view.facts
        }
        share = self.solve(jobs, list(view.facts), configs, capacity, view.time_budget_s)
        return TimeShares(share, configs)

    # ------------------------------------------------------------ the accounting

    def observe(self, view: RoundView, jobs: Sequence[Job]) -> None:
        """Arrivals and departures since the last round, and the time each job ran."""
        present = {j.name for j in jobs}
        credit = self.round_length(view) / 2.0
        for name in [n for n in self.job_time if n not in present]:
            del self.job_time[name], self._seen[name]
            for d in self.deficit.values():
                d.pop(name, None)
            self.need_update = True
        for job in submission_order(view, jobs):
            by_type = dict(view.past(job).seconds_by_type)
            if job.name not in self.job_time:
                self.job_time[job.name] = {t: credit for t in view.facts}
                for t in view.facts:
                    self.deficit.setdefault(t, {})[job.name] = 0.0
                self.need_update = True
            else:
                for t, s in by_type.items():
                    ran = s - self._seen[job.name].get(t, 0.0)
                    if ran > 0:
                        self.job_time[job.name][t] = self.job_time[job.name].get(t, credit) + ran
                        self.worker_time[t] = self.worker_time.get(t, 0.0) + ran
            self._seen[job.name] = by_type

    def reset(self, view: RoundView) -> None:
        """Gavel's ``_reset_time_run_so_far``: deficits grow by what each job should have had
        under the allocation in force less what it got; every job's time is back to the credit."""
        credit = self.round_length(view) / 2.0
        elapsed = view.now_s - self.last_reset_s
        for t in view.facts:
            self.worker_time[t] = 0.0
            for name, times in self.job_time.items():
                received = times.get(t, credit) - credit
                should = self.shares[name].get(t, 0.0) * elapsed if name in self.shares else 0.0
                per_type = self.deficit.setdefault(t, {})
                per_type[name] = per_type.get(name, 0.0) + should - received
                times[t] = credit
                self.worker_time[t] += credit
        self.last_reset_s = view.now_s
        self.resets += 1

    # ------------------------------------------------------------ a round

    def queue(
        self, view: RoundView, jobs: Sequence[Job], configs: Mapping[tuple[str, str], Config]
    ) -> list[tuple[Job, str]]:
        """(job, type) entries per type, fastest type first, by decreasing (priority, deficit,
        X); ties in arrival order. Only types where the job has a throughput."""
        types = sorted(view.facts, key=lambda t: -view.cluster.gpu_types[t].peak_tflops)
        ordered = submission_order(view, jobs)
        out: list[tuple[Job, str]] = []
        for t in types:
            entries = []
            for job in ordered:
                if (job.name, t) not in configs:
                    continue
                x = self.shares.get(job.name, {}).get(t, 0.0)
                p = 0.0
                if job.name in self.shares:
                    p = priority(x, self.job_time[job.name].get(t, 0.0), self.worker_time.get(t, 0))
                d = self.deficit.get(t, {}).get(job.name, 0.0)
                entries.append(((p, d, x), job))
            entries.sort(key=lambda e: e[0], reverse=True)
            out.extend((job, t) for _, job in entries)
        return out

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        view = RoundView.of(round_input)
        pinned = Planner(view)
        pin_non_preemptible(pinned)
        jobs = [j for j in view.problem.jobs if j.name not in pinned]
        self.observe(view, jobs)
        elapsed = view.now_s - self.last_reset_s
        full = self.begin_round_if_due(view.now_s, self.round_length(view))
        recomputed = False
        if (
            full
            and self.need_update
            and (elapsed >= self.min_reset_interval_s or self.last_reset_s == 0)
        ):
            self.reset(view)
            alloc = self.allocation(view, jobs, pinned)
            self.shares = {}
            for (name, t), x in alloc.share.items():
                self.shares.setdefault(name, {})[t] = x
            for j in jobs:
                self.shares.setdefault(j.name, {})
            self.need_update = False
            recomputed = True
            configs = dict(alloc.configs)
        else:
            configs = self.configs(view, jobs)
        left = {
            t: view.available_gpus(t)
            - sum(c.num_gpus for c in pinned.configs.values() if c.gpu_type == t)
            for t in view.facts
        }
        picked: set[str] = set()
        chosen: list[Candidate] = []
        queue = self.queue(view, jobs, configs)
        if not full:  # mid-round: every lease runs on, idle GPUs are filled
            queue = [*leases(jobs, configs), *queue]
        for job, t in queue:
            c = configs[(job.name, t)]
            if job.name in picked or left[t] <= 0 or c.num_gpus > left[t]:
                continue
            left[t] -= c.num_gpus
            picked.add(job.name)
            if job.name in self.shares:  # Gavel assigns workers only to jobs in the allocation
                chosen.append(Candidate(job, (c,)))
        planner = admit_in_order(view, chosen)
        shared = sum(1 for v in self.shares.values() for x in v.values() if 1e-6 < x < 1 - 1e-6)
        detail = f"{len(planner.allocations)} running; {shared} fractional shares in X" + (
            "; allocation recomputed" if recomputed else ""
        )
        if not full:
            detail += "; mid-round: leases renewed"
        assert self.last_round_s is not None
        next_round = self.last_round_s + self.round_length(view)
        return dataclasses.replace(planner.decision(started, detail), next_round_s=next_round)

    def round_length(self, view: RoundView) -> float:
        """Gavel's round here: its own, or the engine's interval when that is longer."""
        return max(self.round_s, view.round_length_s)

    def begin_round_if_due(self, now_s: float, round_length_s: float) -> bool:
        """Begin a round at `now_s` if it is one of Gavel's boundaries (a round or more after
        the last one); whether it began one."""
        if self.last_round_s is not None and now_s - self.last_round_s < round_length_s - 1e-6:
            return False
        self.last_round_s = now_s
        return True

    def close(self) -> None:
        """Nothing to release."""


def leases(jobs: Sequence[Job], configs: Mapping[tuple[str, str], Config]) -> list[tuple[Job, str]]:
    """(job, type) for every running job on the type it runs on (its lease), where it has a
    configuration there."""
    out = []
    for job in jobs:
        if job.current is not None and (job.name, job.current.shape.gpu_type) in configs:
            out.append((job, job.current.shape.gpu_type))
    return out


class GavelMaxMinPolicy(GavelPolicy):
    """Gavel's max_min_fairness_perf with the same mechanism."""

    name = "gavel-maxmin"

    def solve(
        self,
        jobs: Sequence[Job],
        types: Sequence[str],
        configs: Mapping[tuple[str, str], Config],
        capacity: Mapping[str, float],
        time_limit_s: float,
    ) -> Shares:
        return max_min_fairness(jobs, types, configs, capacity, time_limit_s=time_limit_s)
