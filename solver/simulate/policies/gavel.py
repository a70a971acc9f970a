"""Gavel: heterogeneity-aware max-sum-throughput allocation, realised by time-sharing rounds.

Gavel (Narayanan et al., OSDI'20), policy ``max_sum_throughput_perf`` (stanford-futuredata/gavel
scheduler/utils.py ``get_policy`` -> ``ThroughputSumWithPerf`` in
scheduler/policies/max_sum_throughput.py, constraints in scheduler/policies/policy.py
``get_base_constraints``). The allocation X[j, t] is the share of time job j should run on
GPU type t:

    maximise   sum_j sum_t w[j, t] * X[j, t]
    subject to sum_t X[j, t] <= 1,   sum_j scale_factor_j * X[j, t] <= num_gpus_t,   X >= 0

with w = tput[j, t], the job's throughput at its requested GPU count (scale_factor) on type t.

Round-based mechanism (scheduler/scheduler.py ``_update_priorities`` and
``_schedule_jobs_on_workers_helper``): priority[j, t] = X[j, t] / (share of time j got on t),
X[j, t] * 1e9 before it ran there, 0 where X is 0; per GPU type (fastest type first: Gavel's
fixed order v100, p100, k80, ``enable_global_queue=False``) jobs go in decreasing (priority,
allocation) order, each job at most once per round, when its scale factor still fits on the
type; jobs already on that type keep their GPUs where possible
(``_schedule_jobs_on_workers``). Jobs not picked wait: time sharing across rounds.

Adapted:
- tput[j, t] = DSFRO's predicted samples/s at the requested count at the top clock, with the
  best tensor/pipeline split that fits in memory on t (0 where none fits);
- normalisation: the repository's ThroughputSumWithPerf sums raw throughputs (its
  ``scale = 1.0 / throughputs.sum(axis=1)`` is computed but unused). Samples/s of different
  models are not comparable, so by default w[j, t] = tput[j, t] / max_t tput[j, t] (each job's
  throughput relative to its best type); ``normalize=False`` gives the repository's raw sum;
- share of time on t = seconds_by_type[t] / seconds since submission (the paper's fraction of
  time received; the code divides by all jobs' time on t since the last reset, and keeps a
  deficit as a tie-break: here there are no resets and no deficits);
- fastest type first = highest datasheet peak TFLOP/s;
- the power budget is one more resource at admission (Gavel has no power constraint); the LP
  is solved with HiGHS's interior-point method without crossover instead of cvxpy's default
  ECOS (also interior point: on a tied optimum both give a central point, so equal jobs split
  a type's time, where a simplex vertex would starve one of them). Non-preemptible running
  jobs keep their GPUs and are left out of the LP (their GPUs are taken from num_gpus_t).
"""

from __future__ import annotations

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
)
from solver.simulate.policies.lp import solve_max

NEVER_RUN_PRIORITY = 1e9
"""Gavel's priority multiplier for a job that has not run on a type yet (``* 1e9``)."""


@dataclass(frozen=True)
class TimeShares:
    """The LP's answer: share of time per (job, type), and the configuration behind it."""

    share: Mapping[tuple[str, str], float]
    configs: Mapping[tuple[str, str], Config]


def max_sum_throughput(
    jobs: Sequence[Job],
    types: Sequence[str],
    configs: Mapping[tuple[str, str], Config],
    capacity: Mapping[str, int],
    *,
    normalize: bool = True,
    time_limit_s: float = float("inf"),
) -> dict[tuple[str, str], float]:
    """Gavel's max-sum-throughput LP: X[j, t] for every (job, type) with a configuration."""
    keys = [(j.name, t) for j in jobs for t in types if (j.name, t) in configs]
    best = {
        j.name: max((configs[k].samples_per_second for k in keys if k[0] == j.name), default=1.0)
        for j in jobs
    }
    gains = [configs[k].samples_per_second / (best[k[0]] if normalize else 1.0) for k in keys]
    index = {k: i for i, k in enumerate(keys)}
    rows: list[tuple[Sequence[int], Sequence[float], float]] = []
    for j in jobs:
        cols = [index[(j.name, t)] for t in types if (j.name, t) in index]
        rows.append((cols, [1.0] * len(cols), 1.0))
    for t in types:
        cols = [index[(j.name, t)] for j in jobs if (j.name, t) in index]
        coefs = [float(configs[(j.name, t)].num_gpus) for j in jobs if (j.name, t) in index]
        rows.append((cols, coefs, float(capacity.get(t, 0))))
    x = solve_max(gains, rows, interior=True, time_limit_s=time_limit_s)
    if x is None:
        return {}
    return {k: max(min(x[i], 1.0), 0.0) for k, i in index.items()}


def priority(share: float, seconds_on_type: float, age_s: float) -> float:
    """X[j, t] over the share of time the job got on t so far."""
    if share <= 0.0:
        return 0.0
    received = seconds_on_type / age_s if age_s > 0 else 0.0
    return share * NEVER_RUN_PRIORITY if received <= 0.0 else share / received


class GavelPolicy:
    """Gavel's max_sum_throughput_perf with its round-based time-sharing mechanism."""

    name = "gavel"

    def __init__(self, normalize: bool = True) -> None:
        self.normalize = normalize

    def allocation(self, view: RoundView, jobs: Sequence[Job], pinned: Planner) -> TimeShares:
        """The LP over the jobs not pinned, on the GPUs the pinned jobs leave."""
        configs: dict[tuple[str, str], Config] = {}
        for j in jobs:
            n = rigid_count(view, j)
            for t in view.types_for(j):
                c = fastest_config(view, j, t, n)
                if c is not None:
                    configs[(j.name, t)] = c
        capacity = {
            t: view.available_gpus(t)
            - sum(c.num_gpus for c in pinned.configs.values() if c.gpu_type == t)
            for t in view.facts
        }
        share = max_sum_throughput(
            jobs,
            list(view.facts),
            configs,
            capacity,
            normalize=self.normalize,
            time_limit_s=view.time_budget_s,
        )
        return TimeShares(share, configs)

    def queue(self, view: RoundView, jobs: Sequence[Job], alloc: TimeShares) -> list[Candidate]:
        """(job, type) entries per type, fastest type first, by decreasing priority."""
        by_name = {j.name: j for j in jobs}
        types = sorted(view.facts, key=lambda t: -view.cluster.gpu_types[t].peak_tflops)
        out: list[Candidate] = []
        for t in types:
            entries = []
            for name, job in by_name.items():
                c = alloc.configs.get((name, t))
                if c is None:
                    continue
                x = alloc.share.get((name, t), 0.0)
                h = view.past(job)
                p = priority(x, h.seconds_by_type.get(t, 0.0), view.age_s(job))
                entries.append((-p, -x, h.submit_time_s, name, c))
            out.extend(Candidate(by_name[e[3]], (e[4],)) for e in sorted(entries))
        return out

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        view = RoundView.of(round_input)
        pinned = Planner(view)
        pin_non_preemptible(pinned)
        jobs = [j for j in view.problem.jobs if j.name not in pinned]
        alloc = self.allocation(view, jobs, pinned)
        planner = admit_in_order(view, self.queue(view, jobs, alloc))
        shared = sum(1 for v in alloc.share.values() if 1e-6 < v < 1 - 1e-6)
        detail = f"{len(planner.allocations)} running; {shared} fractional shares in X"
        return planner.decision(started, detail)

    def close(self) -> None:
        """Nothing to release."""
