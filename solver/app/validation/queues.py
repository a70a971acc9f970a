"""Validation of tenant queues (their quotas, cohorts, weights and attained service) and of the
queue each job names."""

from __future__ import annotations

from collections.abc import Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import MAX_POWER_WATTS, Limits, weight_problem
from solver.app.validation.common import Collector, quoted
from solver.domain import DEFAULT_QUEUE, POWER

MAX_GPUS_QUOTA = 1e7
"""Far above any cluster's GPU count: a larger quota is a unit mistake."""
MAX_ATTAINED_SECONDS = 1e12
"""About 30,000 GPU-years: larger attained service is not a cluster's history."""


def check_queues(
    c: Collector, cluster: pb.ClusterSnapshot, types: dict[str, pb.GpuType], limits: Limits
) -> set[str] | None:
    """Every queue of the snapshot; the names of the declared ones (None: too many to look
    at, and the jobs' queues are not checked against them)."""
    queues: Sequence[pb.TenantQueue] = cluster.queues
    if not c.count("cluster.queues", len(queues), limits.max_queues, "max_queues"):
        return None
    seen: dict[str, str] = {}
    for i, q in enumerate(queues):
        p = f"cluster.queues[{i}]"
        c.name(f"{p}.name", q.name, seen, limits.max_name_length)
        if q.cohort:
            c.text(f"{p}.cohort", q.cohort, limits.max_name_length)
        if q.HasField("weight") and (problem := weight_problem(q.weight)):
            c.add(f"{p}.weight", problem)
        _check_quotas(c, p, q, types, limits)
        check_attained(c, f"{p}.attained", q.attained)
    return set(seen)


def _check_quotas(
    c: Collector, p: str, q: pb.TenantQueue, types: dict[str, pb.GpuType], limits: Limits
) -> None:
    quotas: Sequence[pb.ResourceQuota] = q.quotas
    if not c.count(f"{p}.quotas", len(quotas), limits.max_gpu_types + 1, "max_gpu_types + 1"):
        return
    seen: dict[str, str] = {}
    for k, quota in enumerate(quotas):
        r = f"{p}.quotas[{k}]"
        if quota.resource != POWER and quota.resource not in types:
            c.add(
                f"{r}.resource",
                f"must be a gpu type of the snapshot or {quoted(POWER)}, got "
                f"{quoted(quota.resource)}",
            )
        elif quota.resource in seen:
            c.add(
                f"{r}.resource",
                f"duplicate quota on {quoted(quota.resource)} (also {seen[quota.resource]})",
            )
        else:
            seen[quota.resource] = r
        most = MAX_POWER_WATTS if quota.resource == POWER else MAX_GPUS_QUOTA
        c.non_negative(f"{r}.nominal", quota.nominal, most)
        for limit in ("borrowing_limit", "lending_limit"):
            if not quota.HasField(limit):
                continue
            if not q.cohort:
                c.add(
                    f"{r}.{limit}",
                    "needs the queue's cohort: without one nothing is lent or borrowed",
                )
            c.non_negative(f"{r}.{limit}", getattr(quota, limit), most)


def check_attained(c: Collector, p: str, a: pb.AttainedService) -> None:
    c.non_negative(f"{p}.gpu_seconds", a.gpu_seconds, MAX_ATTAINED_SECONDS)
    c.non_negative(f"{p}.normalized_seconds", a.normalized_seconds, MAX_ATTAINED_SECONDS)


def check_job_queue(c: Collector, p: str, job: pb.Job, queues: set[str] | None) -> None:
    """A job names a declared queue when the snapshot declares any (no tenant: the default
    queue, which needs no declaration); `queues` None: not checked."""
    if queues and job.tenant and job.tenant not in queues:
        c.add(
            f"{p}.tenant",
            f"names no queue of cluster.queues: {quoted(job.tenant)} (a job without a tenant "
            f"goes to the {quoted(DEFAULT_QUEUE)} queue)",
        )
    check_attained(c, f"{p}.attained", job.attained)
