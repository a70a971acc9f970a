"""Tenant quotas in Kueue's meaning, as every solver path applies them (the checker keeps its
own arithmetic, on purpose).

A job's queue is the declared queue its tenant names (``Cluster.queue_of``); a job whose queue
is not declared is not limited. What a running job uses: its GPUs, of its type, and its draw in
watts (resource ``POWER``). For a queue ``q`` and resource ``r``, with usage ``u``:

- without a cohort: ``u <= nominal``;
- in a cohort: ``u <= nominal + borrowing_limit`` (when set), and over the cohort
  ``sum_q max(u_q, guaranteed_q) <= sum_q nominal_q``, where ``guaranteed = nominal -
  lending_limit`` is what a queue never lends (``sum_q max(0, u_q - guaranteed_q)``, the quota
  the queues take beyond what is theirs alone, fits in what they lend together).

A queue's running jobs are "borrowed" in admission order (those that keep their allocation
first, then by weight, then by name) from the first one that takes its queue above nominal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from solver.domain import (
    POWER,
    Cluster,
    Config,
    Job,
    JobAssignment,
    JobState,
    Node,
    QueueReason,
    Quota,
    TenantQueue,
)

TOLERANCE = 1e-6
"""Relative slack of a quota comparison (watts are sums of floats)."""


def demand(config: Config) -> dict[str, float]:
    """What a job in `config` uses of each quota resource."""
    return {config.gpu_type: float(config.num_gpus), POWER: config.watts}


def _over(value: float, limit: float) -> bool:
    return value > limit + TOLERANCE * max(abs(limit), 1.0)


class QuotaLedger:
    """Usage per queue and resource as jobs are taken and released, and whether one more fits."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.used: dict[tuple[str, str], float] = {}
        self._cohorts: dict[str, list[TenantQueue]] = {}
        for q in cluster.queues:
            if q.cohort:
                self._cohorts.setdefault(q.cohort, []).append(q)

    @property
    def active(self) -> bool:
        """Whether any quota limits anything (no declared queue: every check passes)."""
        return bool(self.cluster.queues)

    def fits(self, job: Job, config: Config) -> bool:
        """Whether `job` may also run in `config` within its queue's quota and its cohort's."""
        return all(self.allows(job, r, amount) for r, amount in demand(config).items())

    def allows(self, job: Job, resource: str, amount: float) -> bool:
        """Whether `amount` more of `resource` for `job` fits its queue's quota and its
        cohort's."""
        queue = self.cluster.queue_of(job.tenant)
        quota = None if queue is None else queue.quota(resource)
        if queue is None or quota is None:
            return True
        after = self.used.get((queue.name, resource), 0.0) + amount
        if not queue.cohort:
            return not _over(after, quota.nominal)
        if quota.borrowing_limit is not None and _over(
            after, quota.nominal + quota.borrowing_limit
        ):
            return False
        claim = self._cohort_claim(queue, resource, after)
        return not _over(claim, self._cohort_nominal(queue, resource))

    def take(self, job: Job, config: Config) -> None:
        self._add(job, config, 1.0)

    def release(self, job: Job, config: Config) -> None:
        self._add(job, config, -1.0)

    def _add(self, job: Job, config: Config, sign: float) -> None:
        queue = self.cluster.queue_of(job.tenant)
        if queue is None:
            return
        for resource, amount in demand(config).items():
            key = (queue.name, resource)
            self.used[key] = self.used.get(key, 0.0) + sign * amount

    def _cohort_claim(self, queue: TenantQueue, resource: str, after: float) -> float:
        """sum over the cohort of max(usage, guaranteed), with `queue` at `after`."""
        total = 0.0
        for q in self._cohorts[queue.cohort]:
            quota = q.quota(resource)
            if quota is None:
                continue
            u = after if q.name == queue.name else self.used.get((q.name, resource), 0.0)
            total += max(u, quota.guaranteed)
        return total

    def _cohort_nominal(self, queue: TenantQueue, resource: str) -> float:
        return sum(
            quota.nominal
            for q in self._cohorts[queue.cohort]
            if (quota := q.quota(resource)) is not None
        )


@dataclass(frozen=True)
class ResourceUsage:
    resource: str
    used: float
    nominal: float

    @property
    def borrowed(self) -> float:
        return max(self.used - self.nominal, 0.0)


def _running(
    jobs: Mapping[str, Job], assignments: Iterable[JobAssignment]
) -> list[tuple[Job, Config, bool]]:
    """(job, configuration, keeps its allocation) of every running job with a declared queue."""
    out = []
    for a in assignments:
        if a.state is not JobState.RUNNING or a.config is None:
            continue
        job = jobs[a.job]
        kept = job.current is not None and job.current.shape == a.config.shape and not a.migrated
        out.append((job, a.config, kept))
    return out


def queue_usage(
    cluster: Cluster, jobs: Iterable[Job], assignments: Iterable[JobAssignment]
) -> dict[str, list[ResourceUsage]]:
    """Per declared queue, its usage of each resource it has a quota for (GPU types it lists
    no quota for, where it uses them, with nominal 0)."""
    by_name = {j.name: j for j in jobs}
    used: dict[tuple[str, str], float] = {}
    for job, config, _ in _running(by_name, assignments):
        queue = cluster.queue_of(job.tenant)
        if queue is None:
            continue
        for resource, amount in demand(config).items():
            used[queue.name, resource] = used.get((queue.name, resource), 0.0) + amount
    out: dict[str, list[ResourceUsage]] = {}
    for q in cluster.queues:
        resources = list(q.quotas) + sorted(
            r
            for (name, r), u in used.items()
            if name == q.name and r not in q.quotas and r != POWER
        )
        out[q.name] = [
            ResourceUsage(
                r, used.get((q.name, r), 0.0), q.quotas[r].nominal if r in q.quotas else 0.0
            )
            for r in resources
        ]
    return out


def borrowed_jobs(
    cluster: Cluster, jobs: Iterable[Job], assignments: Iterable[JobAssignment]
) -> set[str]:
    """The running jobs on borrowed quota: per queue in admission order, every job from the
    first one that takes the queue above its nominal quota of some resource."""
    by_name = {j.name: j for j in jobs}
    order = sorted(
        _running(by_name, assignments), key=lambda r: (not r[2], -r[0].weight, r[0].name)
    )
    used: dict[tuple[str, str], float] = {}
    out: set[str] = set()
    for job, config, _ in order:
        queue = cluster.queue_of(job.tenant)
        if queue is None:
            continue
        over = False
        for resource, amount in demand(config).items():
            key = (queue.name, resource)
            used[key] = used.get(key, 0.0) + amount
            quota = queue.quota(resource)
            over = over or (quota is not None and _over(used[key], quota.nominal))
        if over:
            out.add(job.name)
    return out


def part_queues(cluster: Cluster, nodes: Sequence[Node]) -> tuple[TenantQueue, ...]:
    """The queues of a part of the cluster (a decomposition's): every quota scaled by the
    part's share of its resource (GPUs of the type; watts by the GPUs' TDP). Parts that keep
    theirs keep the whole: the queue limits add up, and the cohort rule, its left side being
    subadditive, holds summed over the parts."""
    if not cluster.queues:
        return ()

    def shares(ns: Iterable[Node]) -> dict[str, float]:
        out: dict[str, float] = {}
        for n in ns:
            out[n.gpu_type] = out.get(n.gpu_type, 0.0) + n.available_gpus
            tdp = cluster.gpu_types[n.gpu_type].tdp_watts
            out[POWER] = out.get(POWER, 0.0) + n.gpu_count * tdp
        return out

    whole, part = shares(cluster.nodes), shares(nodes)

    def scaled(resource: str, q: Quota) -> Quota:
        s = part.get(resource, 0.0) / whole[resource] if whole.get(resource) else 0.0
        return Quota(
            q.nominal * s,
            None if q.borrowing_limit is None else q.borrowing_limit * s,
            None if q.lending_limit is None else q.lending_limit * s,
        )

    return tuple(
        dataclasses.replace(q, quotas={r: scaled(r, quota) for r, quota in q.quotas.items()})
        for q in cluster.queues
    )


def residual_queues(
    cluster: Cluster, fixed: Iterable[tuple[Job, Config]]
) -> tuple[TenantQueue, ...]:
    """The queues left to the other jobs once the `fixed` jobs run (an LNS neighbourhood's):
    each quota less what its fixed jobs use. With ``u = F + u'`` the rule for ``u'`` is the
    same with nominal ``n - F`` and kept-unlent part ``max(g - F, 0)`` (``u' >= 0``); the
    borrowing limit is unchanged."""
    if not cluster.queues:
        return ()
    used: dict[tuple[str, str], float] = {}
    for job, config in fixed:
        queue = cluster.queue_of(job.tenant)
        if queue is None:
            continue
        for resource, amount in demand(config).items():
            used[queue.name, resource] = used.get((queue.name, resource), 0.0) + amount
    out = []
    for q in cluster.queues:
        resources = set(q.quotas) | {r for (n, r) in used if n == q.name and r != POWER}
        left: dict[str, Quota] = {}
        for resource in resources:
            quota = q.quota(resource)
            assert quota is not None
            f = used.get((q.name, resource), 0.0)
            nominal = quota.nominal - f
            lending = None
            if quota.lending_limit is not None:
                lending = nominal - max(quota.guaranteed - f, 0.0)
            left[resource] = Quota(nominal, quota.borrowing_limit, lending)
        out.append(dataclasses.replace(q, quotas=left))
    return tuple(out)


QUOTA_BOUND = "its queue's quota (with what its cohort lends) leaves fewer GPUs than it needs"
"""A waiting job's reason where no GPU type it may use has room in its queue's quota."""


def quota_reasons(
    cluster: Cluster, jobs: Iterable[Job], plan: Sequence[JobAssignment]
) -> list[JobAssignment]:
    """`plan` with the reason of each job waiting for resources made the quota's where, under
    the plan's usage, its queue has no room for its fewest GPUs on any type it may use."""
    if not cluster.queues:
        return list(plan)
    by_name = {j.name: j for j in jobs}
    ledger = QuotaLedger(cluster)
    for a in plan:
        if a.state is JobState.RUNNING and a.config is not None:
            ledger.take(by_name[a.job], a.config)
    out = []
    for a in plan:
        if a.state is JobState.QUEUED and a.queue_reason is QueueReason.INSUFFICIENT_RESOURCES:
            job = by_name[a.job]
            types = [t for t in cluster.gpu_types if job.allows(t)]
            if types and not any(ledger.allows(job, t, job.min_gpus) for t in types):
                a = dataclasses.replace(a, queue_detail=QUOTA_BOUND)
        out.append(a)
    return out
