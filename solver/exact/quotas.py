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

from solver.domain import POWER, Quota
from solver.exact.milp import Formulation
from solver.exact.rows import IntArray, ints
from solver.perfmodel.quotas import TOLERANCE

MILLIWATTS = 1000
"""Power quotas count milliwatts, as the power budget rows do."""


def _usage_terms(f: Formulation, cfgs: IntArray, resource: str) -> tuple[IntArray, IntArray]:
    """(y indices, coefficients): what configurations `cfgs` use of `resource`."""
    lay = f.layout
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


Member = tuple[str, Quota, IntArray, IntArray]
"""A cohort's queue for one resource: its name, its quota, and its usage (y indices, coefs)."""


def add_queue_quotas(f: Formulation) -> None:
    """Each queue within its limit per resource; each cohort within its nominal quota."""
    cluster = f.problem.cluster
    if not cluster.queues:
        return
    lay = f.layout
    queue_of_job = [cluster.queue_of(j.tenant) for j in f.problem.jobs]
    cohorts: dict[tuple[str, str], list[Member]] = {}
    for q in cluster.queues:
        member = np.array([queue is q for queue in queue_of_job], dtype=bool)
        cfgs = ints(np.flatnonzero(member[lay.cfg_job]))
        for resource in [*lay.type_names, POWER]:
            quota = q.quota(resource)
            if quota is None:
                continue
            cols, coef = _usage_terms(f, cfgs, resource)
            if q.cohort:
                cohorts.setdefault((q.cohort, resource), []).append((q.name, quota, cols, coef))
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
    for (cohort, resource), members in cohorts.items():
        _add_cohort(f, cohort, resource, members)


def _add_cohort(f: Formulation, cohort: str, resource: str, members: list[Member]) -> None:
    """claim_q >= usage_q, claim_q >= kept unlent (its lower bound), sum_q claim_q <= nominal."""
    kept = [_ceil(quota.guaranteed, resource) for _, quota, _, _ in members]
    # Finite upper bounds (CP-SAT needs them): every configuration of the queue's jobs at once.
    most = [max(k, int(m[3].sum())) for k, m in zip(kept, members, strict=True)]
    names = [m[0] for m in members]
    claims = f.add_vars(
        "quota_claim",
        np.asarray(kept, dtype=float),
        np.asarray(most, dtype=float),
        lambda: [f"{n},{resource}" for n in names],
    )
    for (name, _, cols, coef), claim in zip(members, claims.tolist(), strict=True):
        f.index.quota_claims.append((claim, cols, coef))
        f.add_rows(
            "queue_quota",
            "quota_claim_covers_usage",
            ints([0, cols.size + 1]),
            ints(np.concatenate([cols, [claim]])),
            ints(np.concatenate([coef, [-1]])),
            -np.inf,
            0,
            _key(f"{name},{resource}"),
        )
    f.add_rows(
        "queue_quota",
        "cohort_quota",
        ints([0, claims.size]),
        claims,
        ints(np.ones(claims.size)),
        -np.inf,
        _floor(sum(quota.nominal for _, quota, _, _ in members), resource),
        _key(f"{cohort},{resource}"),
    )
