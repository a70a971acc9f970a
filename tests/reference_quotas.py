"""The queue-quota family of the reference model (tests/reference_model.py), written plainly
from docs/fairness.md, apart from solver.exact.quotas: a row per queue and quota resource, and
per cohort a claim variable per queue (at least its usage and what it keeps unlent) whose sum
stays within the cohort's nominal quota. GPUs count as they are, watts in mW; limits are
rounded down and what a queue keeps up."""

from __future__ import annotations

import math

from tests.reference_model import RefFormulation, Term

MILLIWATTS = 1000
SLACK = 1e-6


def _down(value: float) -> int:
    return math.floor(value + SLACK * max(abs(value), 1.0))


def _up(value: float) -> int:
    return math.ceil(value - SLACK * max(abs(value), 1.0))


def add_queue_quotas(f: RefFormulation) -> None:
    cluster = f.problem.cluster
    if not cluster.queues:
        return
    resources = [*cluster.gpu_types, "power"]
    cohorts: dict[tuple[str, str], list[tuple[str, list[Term], int, float]]] = {}
    for q in cluster.queues:
        for resource in resources:
            quota = q.quotas.get(resource)
            if quota is None and resource == "power":
                continue
            nominal = 0.0 if quota is None else quota.nominal
            borrowing = None if quota is None else quota.borrowing_limit
            lending = None if quota is None else quota.lending_limit
            scale = MILLIWATTS if resource == "power" else 1
            terms: list[Term] = []
            for name in f.jobs_with_configs():
                job = next(j for j in f.problem.jobs if j.name == name)
                if (job.tenant or "default") != q.name:
                    continue
                for i, c in enumerate(f.configs.by_job[name]):
                    if resource == "power":
                        amount = math.ceil(c.watts * MILLIWATTS)
                    else:
                        amount = c.num_gpus if c.gpu_type == resource else 0
                    if amount:
                        terms.append((f.y[name, i], amount))
            key = f"{q.name},{resource}"
            if q.cohort:
                kept = 0.0 if lending is None else max(nominal - lending, 0.0)
                cohorts.setdefault((q.cohort, resource), []).append(
                    (key, terms, _up(kept * scale), nominal)
                )
                if borrowing is None:
                    continue
                f.add_row(
                    "queue_quota",
                    f"queue_quota[{key}]",
                    terms,
                    hi=_down((nominal + borrowing) * scale),
                )
            else:
                f.add_row("queue_quota", f"queue_quota[{key}]", terms, hi=_down(nominal * scale))
    for (cohort, resource), members in cohorts.items():
        scale = MILLIWATTS if resource == "power" else 1
        claims = []
        for key, terms, kept, _ in members:
            most = max(kept, sum(k for _, k in terms))
            claim = f.add_var(f"quota_claim[{key}]", kept, most)
            claims.append(claim)
            f.add_row(
                "queue_quota", f"quota_claim_covers_usage[{key}]", [*terms, (claim, -1)], hi=0
            )
        nominal = sum(m[3] for m in members)
        f.add_row(
            "queue_quota",
            f"cohort_quota[{cohort},{resource}]",
            [(c, 1) for c in claims],
            hi=_down(nominal * scale),
        )
