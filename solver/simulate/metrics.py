"""The numbers of one simulated run: ``summarize`` turns a ``SimulationLog`` into a ``Summary``.

Definitions (each metric is None where it is undefined: no finished job, no budget, no round):

- JCT: ``finish_s - submit_s`` of the finished jobs;
- queueing delay: ``first_start_s - submit_s`` of the jobs that started at least once;
- makespan: the last finish minus the first submission (None without a finished job);
- energy, three ways (docs/simulation.md, "Metrics and outputs"):

  - to the run's own makespan, ``energy_kwh``: the cluster's true draw integrated over the power
    segments (``true_watts x duration``, idle GPUs included), which cover the run's ``span_s``,
    from the first submission to ``end_s``;
  - at a horizon, ``energy_horizon_kwh``: the same plus the cluster's idle draw
    (``idle_watts``, every installed GPU idle) from ``end_s`` to ``horizon_s`` after the first
    submission. A cluster keeps running after a trace ends: a policy that finishes sooner stops
    paying the idle floor sooner only if the runs compared end at different times, so runs are
    compared at an equal horizon, the longest span among them (``equal_horizon``); a single
    run's horizon is its own span unless one is given (``summarize(log, horizon_s)``);
  - the jobs' own energy, ``jobs_energy_kwh`` (the sum of the jobs' ``energy_j``: their GPUs'
    true draw while they held them) and per sample, ``jobs_energy_per_sample_j``;

  ``energy_per_sample_j`` is the cluster energy to the own makespan (J) over all samples;
  under the cluster's node power saving the idle draw after the run is the rule's
  (``idle_watts`` at the end in the nodes' states, falling at each ``idle_tail`` step as the
  idle nodes suspend after ``suspend_after_s``), so the comparison stays at an equal horizon;
- node power states (runs with the rule on, else None): suspends and resumes, node-hours
  suspended, and the GPU-hours jobs held their GPUs waiting for a resume (no progress);
- over budget: of the time a budget was in force, the share during which the draw exceeded it
  (by more than a relative 1e-9, so rounding is not an excess), and the largest excess
  ``(watts - budget) / budget`` (0 if never exceeded; budgets of 0 W are left out of it), for
  the true and the predicted draw;
- utilisation: GPU-seconds held by running jobs (``gpus_busy``) or making progress
  (``gpus_computing``) over GPU-seconds available, time-weighted over the segments;
- migrations, preemptions and restarts per job: their totals over the number of jobs (a
  restart is a start after a stop or a migration: each pays the restart delay); the share of
  GPU time lost to restarts: GPU-seconds held during restart delays over all GPU-seconds held;
- deadline hit rate: among the jobs with a deadline, the share finished by it (an unfinished
  job misses);
- finish-time fairness (Themis: Mahajan et al., "Themis: Fair and Efficient GPU Cluster
  Scheduling", NSDI 2020): ``rho = JCT / isolated_s`` per job; an unfinished job counts with
  ``end_s - submit_s``, a lower bound, so starving a job never looks fair; jobs with
  ``isolated_s <= 0`` are left out. Reported: the mean rho per tenant, the largest rho of any
  job, the largest tenant mean (Themis' objective with tenants as its apps) and Jain's index
  ``(sum x)^2 / (n sum x^2)`` of the tenant means (1: equal);
- solver time: p50, p99 and max of the rounds' ``solver_seconds``; against the round's time
  budget (rounds with a positive budget): the share of rounds over it and the p99 of
  ``solver_seconds / budget_seconds``;
- per tenant (``tenants``, ``solver.simulate.tenant_metrics``): JCT, rho, GPU-hours against
  the queue's entitlement, GPU-hours on borrowed quota; ``fairness_jain_entitlement`` is Jain's
  index of the tenants' received / entitled shares (tenants with a declared queue).

Percentiles are numpy's default (linear interpolation between the closest ranks). Segments of
zero or negative length weigh nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from solver.simulate.carbon_metrics import idle_steps, pad_carbon, run_carbon
from solver.simulate.core import JobRecord, PowerSegment, SimulationLog
from solver.simulate.grid import GridSettings
from solver.simulate.tenant_metrics import TenantSummary, tenant_summaries

JOULES_PER_KWH = 3.6e6
EXCESS_TOLERANCE = 1e-9
"""Relative margin above the budget before a draw counts as exceeding it."""


@dataclass(frozen=True)
class Summary:
    """The metrics of one run (see the module docstring); JSON-ready through ``to_dict``."""

    policy: str
    seed: int
    scenario: str
    end_s: float
    jobs_total: int
    jobs_finished: int
    jobs_unfinished: int
    jct_mean_s: float | None
    jct_median_s: float | None
    jct_p95_s: float | None
    queue_mean_s: float | None
    queue_median_s: float | None
    queue_p95_s: float | None
    makespan_s: float | None
    energy_kwh: float
    jobs_energy_kwh: float
    samples: float
    energy_per_sample_j: float | None
    over_budget_share: float | None
    max_excess: float | None
    predicted_over_budget_share: float | None
    predicted_max_excess: float | None
    utilisation_busy: float | None
    utilisation_computing: float | None
    migrations_per_job: float | None
    preemptions_per_job: float | None
    deadline_jobs: int
    deadline_hit_rate: float | None
    fairness_by_tenant: Mapping[str, float]
    fairness_max_rho: float | None
    fairness_max_tenant_rho: float | None
    fairness_jain: float | None
    rounds: int
    solver_p50_s: float | None
    solver_p99_s: float | None
    solver_max_s: float | None
    solver_over_budget_share: float | None
    solver_p99_budget_ratio: float | None
    restarts_per_job: float | None = None
    restart_gpu_share: float | None = None
    tenants: Mapping[str, TenantSummary] = field(default_factory=dict)
    fairness_jain_entitlement: float | None = None
    span_s: float = 0.0
    """From the first submission to ``end_s``: the time ``energy_kwh`` covers."""
    idle_watts: float = 0.0
    """The cluster's draw with every installed GPU idle."""
    horizon_s: float = 0.0
    """The time ``energy_horizon_kwh`` covers (>= ``span_s``)."""
    energy_horizon_kwh: float = 0.0
    """``energy_kwh`` plus ``idle_watts`` from ``span_s`` to ``horizon_s``."""
    jobs_energy_per_sample_j: float | None = None
    """The jobs' own energy (J) over all samples trained."""
    jct_small_mean_s: float | None = None
    """Mean JCT of the small jobs (those allowed MIG slices; None: the trace has none)."""
    jct_large_mean_s: float | None = None
    """Mean JCT of the other jobs, where the trace has small jobs."""
    gpu_work_per_gpu_hour: float | None = None
    """Work done per available GPU-hour while the trace arrives (first to last submission):
    reference GPU-seconds of work (a job's trace GPUs x trace duration x share of its samples
    done in the interval) over GPU-seconds available, x 3600 (1: as busy as the reference
    GPUs; above 1 where faster GPUs or shared ones do more)."""
    small_on_slices: float | None = None
    """Share of the small jobs that ran on a MIG instance at some time."""
    reconfigurations: int = 0
    """GPUs whose MIG layout plans changed, over the run."""
    invalid_layouts: int = 0
    """GPUs with a layout that cannot exist, summed over rounds (must be 0)."""
    idle_tail: tuple[tuple[float, float], ...] = ()
    """(seconds after the end, idle draw from then on) under node power saving (``pad``)."""
    suspends: int | None = None
    """Nodes suspended over the run (None: the rule was off)."""
    resumes: int | None = None
    node_hours_suspended: float | None = None
    resume_gpu_hours: float | None = None
    """GPU-hours jobs held their GPUs waiting for suspended nodes to resume."""
    queue_max_s: float | None = None
    """The longest queueing delay of any job (starvation shows here)."""
    carbon_kg: float | None = None
    """kg CO2 of the run's true draw on the true grid (None: no grid given)."""
    cost: float | None = None
    """The same draw's cost at the grid's hourly prices (None: no prices)."""
    carbon_horizon_kg: float | None = None
    """``carbon_kg`` plus the idle cluster's up to the horizon, at those hours' intensity."""
    cost_horizon: float | None = None
    grid: GridSettings | None = None
    """The true grid, for the padding to a horizon."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {
            "fairness_by_tenant": dict(self.fairness_by_tenant),
            "tenants": {k: asdict(v) for k, v in self.tenants.items()},
            "idle_tail": [list(step) for step in self.idle_tail],
            "grid": None if self.grid is None else asdict(self.grid),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        """The inverse of ``to_dict`` (e.g. a ``<prefix>-summary.json`` read back; one written
        before the per-tenant fields has none)."""
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        values["tenants"] = {
            k: TenantSummary.from_dict(v) for k, v in data.get("tenants", {}).items()
        }
        values.setdefault("energy_horizon_kwh", values.get("energy_kwh", 0.0))  # (no span then)
        values["idle_tail"] = tuple((float(a), float(w)) for a, w in values.get("idle_tail", ()))
        if (grid := values.get("grid")) is not None:
            prices = grid.get("price_per_kwh")
            values["grid"] = GridSettings(
                **grid
                | {"carbon_g_per_kwh": tuple(grid["carbon_g_per_kwh"])}
                | {"price_per_kwh": None if prices is None else tuple(prices)}
            )
        return cls(**values)

    def at_horizon(self, horizon_s: float) -> Summary:
        """The summary with its energy padded with idle power to ``horizon_s`` after the first
        submission (never shorter than its own span)."""
        horizon = max(horizon_s, self.span_s)
        pad = self.pad(horizon - self.span_s) / JOULES_PER_KWH
        out = replace(self, horizon_s=horizon, energy_horizon_kwh=self.energy_kwh + pad)
        if self.grid is None or self.carbon_kg is None:
            return out
        kg, cost = pad_carbon(
            self.grid, self.end_s, horizon - self.span_s, self.idle_watts, self.idle_tail
        )
        return replace(
            out,
            carbon_horizon_kg=self.carbon_kg + kg,
            cost_horizon=None if self.cost is None or cost is None else self.cost + cost,
        )

    def pad(self, seconds: float) -> float:
        """The idle cluster's energy (J) over ``seconds`` after the run's end: ``idle_watts``,
        then each ``idle_tail`` step's draw from its time on."""
        steps = idle_steps(0.0, seconds, self.idle_watts, self.idle_tail)
        return sum(watts * (end - start) for start, end, watts in steps)


def equal_horizon(summaries: Sequence[Summary], horizon_s: float = 0.0) -> list[Summary]:
    """Each summary at the equal horizon of the runs compared with it: the longest horizon (each
    at least its span) among the runs of its scenario and seed, and at least ``horizon_s``."""
    longest: dict[tuple[str, int], float] = defaultdict(lambda: horizon_s)
    for s in summaries:
        key = (s.scenario, s.seed)
        longest[key] = max(longest[key], s.horizon_s, s.span_s)
    return [s.at_horizon(longest[(s.scenario, s.seed)]) for s in summaries]


# ---------------------------------------------------------------- helpers


def percentile(values: Sequence[float], q: float) -> float | None:
    """numpy's default (linear) percentile; None for no values."""
    return float(np.percentile(values, q)) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _duration(s: PowerSegment) -> float:
    return max(0.0, s.end_s - s.start_s)


def jct(job: JobRecord) -> float | None:
    return None if job.finish_s is None else job.finish_s - job.submit_s


def queue_delay(job: JobRecord) -> float | None:
    return None if job.first_start_s is None else job.first_start_s - job.submit_s


def _budget_exceedance(
    segments: Iterable[PowerSegment], watts: Callable[[PowerSegment], float]
) -> tuple[float | None, float | None]:
    """(share of budgeted time over the budget, largest excess over it as a share of it)."""
    budgeted = over = 0.0
    excess: float | None = None
    for s in segments:
        d = _duration(s)
        if s.budget_watts is None or d == 0:
            continue
        budgeted += d
        w = watts(s)
        if w > s.budget_watts * (1 + EXCESS_TOLERANCE):
            over += d
        if s.budget_watts > 0:
            excess = max(excess or 0.0, (w - s.budget_watts) / s.budget_watts)
    return _share(over, budgeted), excess


def _fairness(log: SimulationLog) -> dict[str, list[float]]:
    """Per tenant, the jobs' finish-time fairness rho (unfinished: up to ``end_s``)."""
    rho: dict[str, list[float]] = defaultdict(list)
    for j in log.jobs:
        if j.isolated_s <= 0:
            continue
        finish = log.end_s if j.finish_s is None else j.finish_s
        rho[j.tenant].append((finish - j.submit_s) / j.isolated_s)
    return dict(sorted(rho.items()))


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index ``(sum x)^2 / (n sum x^2)``: 1 when all are equal."""
    squares = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * squares) if squares > 0 else None


# ---------------------------------------------------------------- the summary


def summarize(log: SimulationLog, horizon_s: float = 0.0) -> Summary:
    """The run's metrics; its energy at a horizon is padded to ``horizon_s`` after the first
    submission, or to the run's own span if that is longer (the default)."""
    jobs = log.jobs
    finished = [j for j in jobs if j.finish_s is not None]
    jcts = [t for j in jobs if (t := jct(j)) is not None]
    queues = [t for j in jobs if (t := queue_delay(j)) is not None]
    segments = [s for s in log.power if _duration(s) > 0]
    energy_j = sum(s.true_watts * _duration(s) for s in segments)
    samples = sum(j.samples for j in jobs)
    available = sum(s.gpus_available * _duration(s) for s in segments)
    over, excess = _budget_exceedance(segments, lambda s: s.true_watts)
    p_over, p_excess = _budget_exceedance(segments, lambda s: s.predicted_watts)
    with_deadline = [j for j in jobs if j.deadline_s is not None]
    hits = sum(
        1
        for j in with_deadline
        if j.finish_s is not None and j.deadline_s is not None and j.finish_s <= j.deadline_s
    )
    rho = _fairness(log)
    tenant_means = {t: sum(v) / len(v) for t, v in rho.items()}
    solver = [r.solver_seconds for r in log.rounds]
    budgeted_rounds = [r for r in log.rounds if r.budget_seconds > 0]
    tenants = tenant_summaries(log)
    shares = [t.entitlement_share for t in tenants.values() if t.entitlement_share is not None]
    n = len(jobs)
    span = log.end_s - min(j.submit_s for j in jobs) if jobs else 0.0
    jobs_energy_j = sum(j.energy_j for j in jobs)
    summary = Summary(
        policy=log.policy,
        seed=log.seed,
        scenario=log.scenario,
        end_s=log.end_s,
        jobs_total=n,
        jobs_finished=len(finished),
        jobs_unfinished=n - len(finished),
        jct_mean_s=_mean(jcts),
        jct_median_s=percentile(jcts, 50),
        jct_p95_s=percentile(jcts, 95),
        queue_mean_s=_mean(queues),
        queue_median_s=percentile(queues, 50),
        queue_p95_s=percentile(queues, 95),
        makespan_s=(
            max(j.finish_s for j in finished if j.finish_s is not None)
            - min(j.submit_s for j in jobs)
            if finished
            else None
        ),
        energy_kwh=energy_j / JOULES_PER_KWH,
        jobs_energy_kwh=jobs_energy_j / JOULES_PER_KWH,
        samples=samples,
        energy_per_sample_j=_share(energy_j, samples),
        over_budget_share=over,
        max_excess=excess,
        predicted_over_budget_share=p_over,
        predicted_max_excess=p_excess,
        utilisation_busy=_share(sum(s.gpus_busy * _duration(s) for s in segments), available),
        utilisation_computing=_share(
            sum(s.gpus_computing * _duration(s) for s in segments), available
        ),
        migrations_per_job=_share(sum(j.migrations for j in jobs), n),
        preemptions_per_job=_share(sum(j.preemptions for j in jobs), n),
        restarts_per_job=_share(sum(j.restarts for j in jobs), n),
        restart_gpu_share=_share(
            sum(j.restart_gpu_seconds for j in jobs), sum(j.gpu_seconds for j in jobs)
        ),
        deadline_jobs=len(with_deadline),
        deadline_hit_rate=_share(hits, len(with_deadline)),
        fairness_by_tenant=tenant_means,
        fairness_max_rho=max((r for v in rho.values() for r in v), default=None),
        fairness_max_tenant_rho=max(tenant_means.values(), default=None),
        fairness_jain=jain_index(list(tenant_means.values())),
        rounds=len(log.rounds),
        solver_p50_s=percentile(solver, 50),
        solver_p99_s=percentile(solver, 99),
        solver_max_s=max(solver, default=None),
        solver_over_budget_share=_share(
            sum(1 for r in budgeted_rounds if r.solver_seconds > r.budget_seconds),
            len(budgeted_rounds),
        ),
        solver_p99_budget_ratio=percentile(
            [r.solver_seconds / r.budget_seconds for r in budgeted_rounds], 99
        ),
        tenants=tenants,
        fairness_jain_entitlement=jain_index(shares),
        span_s=max(span, 0.0),
        idle_watts=log.idle_watts,
        jobs_energy_per_sample_j=_share(jobs_energy_j, samples),
    )
    carbon, cost = run_carbon(log.grid, segments)
    summary = replace(summary, **mig_metrics(log), **power_state_metrics(log))
    summary = replace(
        summary, carbon_kg=carbon, cost=cost, grid=log.grid, queue_max_s=max(queues, default=None)
    )
    return summary.at_horizon(horizon_s)


def power_state_metrics(log: SimulationLog) -> dict[str, Any]:
    """The node power-state fields of ``Summary`` (from ``idle_tail``); none when it was off."""
    if not log.power_saving:
        return {}
    return {
        "idle_tail": log.idle_tail,
        "suspends": log.suspends,
        "resumes": log.resumes,
        "node_hours_suspended": log.suspended_node_seconds / 3600,
        "resume_gpu_hours": sum(j.resume_gpu_seconds for j in log.jobs) / 3600,
    }


def mig_metrics(log: SimulationLog) -> dict[str, Any]:
    """The MIG scenario's metrics (``Summary``'s fields from ``jct_small_mean_s``)."""
    small = [j for j in log.jobs if j.slices]
    out: dict[str, Any] = {
        "reconfigurations": sum(r.reconfigurations for r in log.rounds),
        "invalid_layouts": sum(r.invalid_layouts for r in log.rounds),
    }
    if small:
        out["jct_small_mean_s"] = _mean([t for j in small if (t := jct(j)) is not None])
        large = [t for j in log.jobs if not j.slices and (t := jct(j)) is not None]
        out["jct_large_mean_s"] = _mean(large)
        out["small_on_slices"] = _share(sum(1 for j in small if j.slice_seconds > 0), len(small))
    if log.jobs:
        first = min(j.submit_s for j in log.jobs)
        last = max(j.submit_s for j in log.jobs)
        window = [s for s in log.power if first <= s.start_s < last and _duration(s) > 0]
        gpu_s = sum(s.gpus_available * _duration(s) for s in window)
        work = sum(s.work_gpu_s for s in window)
        out["gpu_work_per_gpu_hour"] = _share(work, gpu_s)
    return out
