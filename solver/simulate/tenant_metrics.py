"""Per-tenant numbers of one simulated run (``tenant_summaries``) and their table over runs.

Per tenant (the trace's ``tenant`` column; with queues declared, the queue):

- JCT mean and p95 over its finished jobs; finish-time fairness rho (``metrics``: JCT over
  the isolated duration, unfinished jobs up to the end) mean and max over its jobs;
- GPU-hours received (its jobs' ``gpu_seconds``) and normalized hours (their ``normalized_s``,
  ``solver.simulate.tenants``);
- entitlement: the queue's nominal GPUs (its quotas summed over GPU types) times the time the
  tenant had work (the union of its jobs' [submission, finish] intervals, unfinished ones up to
  the end), in GPU-hours; its share is GPU-hours received over it (1: the tenant got exactly
  its quota while it had work; above 1: it borrowed more than it lent). None without a
  declared queue;
- GPU-hours on borrowed quota (its jobs' ``borrowed_gpu_seconds``: GPUs of the jobs a plan
  marks ``borrowed``);
- DRF's test: its weighted fair entitlement each round (progressive filling of the demand
  shares of the tenants with work, weights from the queues, 1 without one), the time-weighted
  mean shortfall of its dominant share below it, relative to it (``drf_deviation``: above it,
  on resources others leave idle, is no shortfall), and the share of the time it was within
  5 % of it (``drf_within_5pct``), from each round's ``tenant_shares``. A tenant's demand is
  what its jobs can use, each job's largest GPU count as every policy's request says (DSFRO's
  DRF, docs/objective.md); ``drf_within_5pct_requested`` is the same test with the demand
  counted as the trace requests it (the GPUs running jobs hold, waiting jobs' requests).

Quota violations are not counted: the engine checks every plan with the independent checker
(``check_queue_quotas`` among its rules) and a plan that breaks a quota stops the run with the
violation, so every finished run has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from solver.fairness import fair_entitlements
from solver.simulate.core import JobRecord, SimulationLog

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class TenantSummary:
    tenant: str
    weight: float | None
    """The queue's fair-sharing weight; None: no declared queue."""
    jobs: int
    finished: int
    jct_mean_s: float | None
    jct_p95_s: float | None
    rho_mean: float | None
    rho_max: float | None
    gpu_hours: float
    normalized_hours: float
    entitled_gpu_hours: float | None
    entitlement_share: float | None
    borrowed_gpu_hours: float
    drf_deviation: float | None = None
    drf_within_5pct: float | None = None
    drf_within_5pct_requested: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TenantSummary:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def busy_seconds(jobs: Sequence[JobRecord], end_s: float) -> float:
    """Length of the union of the jobs' [submit, finish] intervals (unfinished: to end_s); a
    job submitted after end_s (a run stopped early) has none."""
    spans = sorted(
        (j.submit_s, end_s if j.finish_s is None else j.finish_s)
        for j in jobs
        if j.submit_s < end_s
    )
    total = 0.0
    start, stop = None, None
    for a, b in spans:
        if stop is None or a > stop:
            if start is not None and stop is not None:
                total += stop - start
            start, stop = a, b
        else:
            stop = max(stop, b)
    if start is not None and stop is not None:
        total += stop - start
    return total


def _rho(j: JobRecord, end_s: float) -> float | None:
    if j.isolated_s <= 0 or j.submit_s >= end_s:
        return None
    return ((end_s if j.finish_s is None else j.finish_s) - j.submit_s) / j.isolated_s


def tenant_summaries(log: SimulationLog) -> dict[str, TenantSummary]:
    """The module docstring's numbers, per tenant in name order."""
    queues = {q.name: q for q in log.queues}
    by_tenant: dict[str, list[JobRecord]] = {}
    for j in log.jobs:
        by_tenant.setdefault(j.tenant, []).append(j)
    drf = drf_deviations(log)
    requested = drf_deviations(log, requested=True)
    out = {}
    for tenant, jobs in sorted(by_tenant.items()):
        jcts = [j.finish_s - j.submit_s for j in jobs if j.finish_s is not None]
        rhos = [r for j in jobs if (r := _rho(j, log.end_s)) is not None]
        gpu_hours = sum(j.gpu_seconds for j in jobs) / SECONDS_PER_HOUR
        q = queues.get(tenant)
        entitled = None
        if q is not None:
            entitled = q.nominal_gpus * busy_seconds(jobs, log.end_s) / SECONDS_PER_HOUR
        out[tenant] = TenantSummary(
            tenant=tenant,
            weight=None if q is None else q.weight,
            jobs=len(jobs),
            finished=len(jcts),
            jct_mean_s=sum(jcts) / len(jcts) if jcts else None,
            jct_p95_s=float(np.percentile(jcts, 95)) if jcts else None,
            rho_mean=sum(rhos) / len(rhos) if rhos else None,
            rho_max=max(rhos, default=None),
            gpu_hours=gpu_hours,
            normalized_hours=sum(j.normalized_s for j in jobs) / SECONDS_PER_HOUR,
            entitled_gpu_hours=entitled,
            entitlement_share=gpu_hours / entitled if entitled else None,
            borrowed_gpu_hours=sum(j.borrowed_gpu_seconds for j in jobs) / SECONDS_PER_HOUR,
            drf_deviation=drf.get(tenant, (None, None))[0],
            drf_within_5pct=drf.get(tenant, (None, None))[1],
            drf_within_5pct_requested=requested.get(tenant, (None, None))[1],
        )
    return out


DRF_TOLERANCE = 0.05


def drf_deviations(log: SimulationLog, requested: bool = False) -> dict[str, tuple[float, float]]:
    """Per tenant: (time-weighted mean shortfall of its dominant share below its weighted fair
    entitlement, relative to it; share of the time it was within DRF_TOLERANCE of it). The
    entitlement is DRF's progressive filling over the tenants with work, on their demand
    shares (`requested`: their requested shares): a tenant asking less than its weighted share
    is entitled to what it asks; above the entitlement (idle resources used) is no
    shortfall."""
    which = 2 if requested else 1
    weight = {q.name: q.weight for q in log.queues}
    rounds = log.rounds
    deviation: dict[str, float] = {}
    within: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for k, r in enumerate(rounds):
        until = rounds[k + 1].time_s if k + 1 < len(rounds) else log.end_s
        dt = max(until - r.time_s, 0.0)
        if dt <= 0 or not r.tenant_shares:
            continue
        entitled = fair_entitlements({t: v[which] for t, v in r.tenant_shares.items()}, weight)
        for tenant, (share, *_) in r.tenant_shares.items():
            e = entitled.get(tenant, 0.0)
            if e <= 0:
                continue
            shortfall = max(e - share, 0.0) / e
            deviation[tenant] = deviation.get(tenant, 0.0) + shortfall * dt
            within[tenant] = within.get(tenant, 0.0) + (dt if shortfall <= DRF_TOLERANCE else 0.0)
            seconds[tenant] = seconds.get(tenant, 0.0) + dt
    return {t: (deviation[t] / s, within[t] / s) for t, s in seconds.items() if s > 0}


# ---------------------------------------------------------------- over runs

TENANT_COLUMNS = (
    ("jct_mean_s", "mean JCT (s)", ".4g"),
    ("jct_p95_s", "p95 JCT (s)", ".4g"),
    ("rho_mean", "mean rho", ".3g"),
    ("rho_max", "max rho", ".3g"),
    ("gpu_hours", "GPU-h", ".4g"),
    ("entitled_gpu_hours", "entitled GPU-h", ".4g"),
    ("entitlement_share", "received / entitled", ".3g"),
    ("borrowed_gpu_hours", "borrowed GPU-h", ".4g"),
    ("drf_deviation", "DRF: shortfall / entitlement", ".3g"),
    ("drf_within_5pct", "DRF: time within 5 %", ".3g"),
    ("drf_within_5pct_requested", "DRF: time within 5 % (trace requests)", ".3g"),
)
"""(TenantSummary field, label, format) of the comparison's per-tenant table."""


def tenant_table(
    summaries: Sequence[tuple[str, str, int, Mapping[str, TenantSummary]]],
) -> list[tuple[str, str, str, int, dict[str, float | None]]]:
    """Rows (scenario, policy, tenant, runs, means over seeds of TENANT_COLUMNS) from each
    run's (scenario, policy, seed, tenants), groups in order of first appearance."""
    groups: dict[tuple[str, str, str], list[TenantSummary]] = {}
    for scenario, policy, _, tenants in summaries:
        for name, t in tenants.items():
            groups.setdefault((scenario, policy, name), []).append(t)
    rows = []
    for (scenario, policy, tenant), runs in groups.items():
        means: dict[str, float | None] = {}
        for key, _, _ in TENANT_COLUMNS:
            values = [v for t in runs if (v := getattr(t, key)) is not None]
            means[key] = sum(values) / len(values) if values else None
        rows.append((scenario, policy, tenant, len(runs), means))
    return rows
