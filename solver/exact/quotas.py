"""The queue-quota family of the full model (docs/fairness.md, "The rule every plan keeps").

Per declared queue and quota resource (GPUs of a type, or watts in mW), the configurations of
the queue's jobs sum within the queue's limit; per cohort and resource, each queue's usage is
raised to what it keeps unlent (an integer variable ``quota_claim`` at least that, at least the
usage) and the claims sum within the cohort's nominal quota. Limits are rounded down and what a
queue keeps up, draws up, so the model can only be stricter than the checker.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from solver.domain import POWER, TenantQueue
from solver.exact.milp import Formulation
from solver.exact.rows import IntArray, ints
from solver.perfmodel.quotas import TOLERANCE

MILLIWATTS = 1000
"""Power quotas count milliwatts, as the power budget rows do."""


def _usage_terms(f: Formulation, queue: TenantQueue, resource: str) -> tuple[IntArray, IntArray]:
    """(y indices, coefficients): what the queue's jobs use of `resource` per configuration."""
    lay, cluster = f.layout, f.problem.cluster
    members = np.array([cluster.queue_of(j.tenant) is queue for j in f.problem.jobs], dtype=bool)
    cfgs = np.flatnonzero(members[lay.cfg_job])
    if resource == POWER:
        coef = ints(np.ceil(lay.cfg_watts[cfgs] * MILLIWATTS))
    else:
        code = lay.type_names.index(resource) if resource in lay.type_names else -1
        coef = ints(np.where(lay.cfg_type[cfgs] == code, lay.cfg_gpus[cfgs], 0))
    used = np.flatnonzero(coef)
    return ints(f.index.y[cfgs[used]]), coef[used]


def _key(name: str) -> Callable[[], list[str]]:
    """The names of a one-row block."""
    return lambda: [name]


def _scale(resource: str) -> int:
    return MILLIWATTS if resource == POWER else 1


def _floor(value: float, resource: str) -> int:
    v = value * _scale(resource)
    return math.floor(v + TOLERANCE * max(abs(v), 1.0))


def _ceil(value: float, resource: str) -> int:
    v = value * _scale(resource)
    return math.ceil(v - TOLERANCE * max(abs(v), 1.0))


def add_queue_quotas(f: Formulation) -> None:
    """Each queue within its limit per resource; each cohort within its nominal quota."""
    cluster = f.problem.cluster
    if not cluster.queues:
        return
    lay = f.layout
    resources = [*lay.type_names, POWER]
    cohorts: dict[tuple[str, str], list[tuple[TenantQueue, IntArray, IntArray]]] = {}
    for q in cluster.queues:
        for resource in resources:
            quota = q.quota(resource)
            if quota is None:
                continue
            cols, coef = _usage_terms(f, q, resource)
            if q.cohort:
                cohorts.setdefault((q.cohort, resource), []).append((q, cols, coef))
                if quota.borrowing_limit is None:
                    continue
                cap = _floor(quota.nominal + quota.borrowing_limit, resource)
            else:
                cap = _floor(quota.nominal, resource)
            f.add_rows(
                "queue_quota",
                "queue_quota",
                ints([0, cols.size]),
                cols,
                coef,
                -np.inf,
                cap,
                _key(f"{q.name},{resource}"),
            )
    for (cohort, resource), parts in cohorts.items():
        _add_cohort(f, cohort, resource, parts)


def _add_cohort(
    f: Formulation,
    cohort: str,
    resource: str,
    parts: list[tuple[TenantQueue, IntArray, IntArray]],
) -> None:
    """claim_q >= usage_q, claim_q >= kept unlent (its lower bound), sum_q claim_q <= nominal."""
    kept = []
    for q, _, _ in parts:
        quota = q.quota(resource)
        assert quota is not None
        kept.append(_ceil(quota.guaranteed, resource))
    names = [q.name for q, _, _ in parts]
    # Finite upper bounds (CP-SAT needs them): every configuration of the queue's jobs at once.
    most = [max(k, int(coef.sum())) for k, (_, _, coef) in zip(kept, parts, strict=True)]
    claims = f.add_vars(
        "quota_claim",
        np.asarray(kept, dtype=float),
        np.asarray(most, dtype=float),
        lambda: [f"{n},{resource}" for n in names],
    )
    for (q, cols, coef), claim in zip(parts, claims.tolist(), strict=True):
        f.index.quota_claims.append((claim, cols, coef))
        f.add_rows(
            "queue_quota",
            "quota_claim_covers_usage",
            ints([0, cols.size + 1]),
            ints(np.concatenate([cols, [claim]])),
            ints(np.concatenate([coef, [-1]])),
            -np.inf,
            0,
            _key(f"{q.name},{resource}"),
        )
    nominal = 0.0
    for q, _, _ in parts:
        quota = q.quota(resource)
        assert quota is not None
        nominal += quota.nominal
    f.add_rows(
        "queue_quota",
        "cohort_quota",
        ints([0, claims.size]),
        claims,
        ints(np.ones(claims.size)),
        -np.inf,
        _floor(nominal, resource),
        lambda: [f"{cohort},{resource}"],
    )
