"""Tenants in the simulation: the queue each trace job belongs to, and the attained service the
simulator reports each round (docs/simulation.md, "Tenants").

Attained service (``AttainedService`` of a job, and of its queue: the sum over the queue's
jobs, finished ones included):

- ``gpu_seconds``: GPU-seconds the job has held its GPUs (restarts included);
- ``normalized_seconds``: the integral over time of the job's normalized throughput, its
  predicted rate in its allocation over its *equal-share rate* (0 while waiting or restarting).
  The equal-share rate of job j in a round with n active jobs (submitted, unfinished) is the
  rate j would get from an equal 1/n share of every GPU type, time-shared at its requested
  GPU count k (Gavel's X^equal, Narayanan et al., OSDI'20, section 3.1): on type t with G_t
  available GPUs it runs a time fraction ``x_t = G_t / (n k)``, scaled down together so that
  ``sum_t x_t <= 1`` (a job cannot run more than all the time), and the rate is ``sum_t x_t
  r_t``, with ``r_t`` the predicted samples/s of j's fastest shape of k GPUs of type t at the
  top clock (0 where it cannot run so). Both rates are the scheduler's model's predictions (the
  one every policy sees), not the truth: what a scheduler can compute. A job alone has the
  whole cluster as its share (its k GPUs all the time, spread over the types in proportion to
  their GPUs): running on a type faster than that mix it earns more than 1 s per second.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import DEFAULT_QUEUE, Job, Problem
from solver.perfmodel.configs import type_facts
from solver.simulate.core import JobHistory
from solver.simulate.policies.common import RoundView, fastest_config, rigid_count


class EqualShare:
    """Each job's equal-share rate (module docstring) from the scenario as one problem."""

    def __init__(self, problem: Problem, requested: Mapping[str, int]) -> None:
        history = {j.name: JobHistory(0.0, requested.get(j.name, j.min_gpus)) for j in problem.jobs}
        view = RoundView(problem, type_facts(problem.cluster), history, 0.0, 0.0)
        self._gpus: dict[str, int] = {}
        self._rates: dict[str, dict[str, float]] = {}
        for job in problem.jobs:
            k = rigid_count(view, job)
            self._gpus[job.name] = k
            self._rates[job.name] = type_rates(view, job, k)

    def rate(self, job: str, available: Mapping[str, int], active: int) -> float:
        """The job's equal-share rate (samples/s) with `available` GPUs per type and `active`
        jobs sharing them."""
        return equal_share_rate(self._rates.get(job, {}), self._gpus.get(job, 1), available, active)


def type_rates(view: RoundView, job: Job, gpus: int) -> dict[str, float]:
    """The job's predicted samples/s at `gpus` GPUs of each allowed type, in its fastest shape
    at the top clock (types where it cannot run so left out)."""
    rates = {}
    for t in view.types_for(job):
        c = fastest_config(view, job, t, gpus)
        if c is not None:
            rates[t] = c.samples_per_second
    return rates


def equal_share_rate(
    rates: Mapping[str, float], gpus: int, available: Mapping[str, int], active: int
) -> float:
    """The rate on an equal 1/`active` share of the `available` GPUs of each type, time-shared
    at `gpus` GPUs (module docstring); `rates` per type as ``type_rates`` gives them."""
    if active < 1 or gpus < 1 or not rates:
        return 0.0
    x = {t: available.get(t, 0) / (active * gpus) for t in rates}
    total = sum(x.values())
    scale = 1.0 / total if total > 1.0 else 1.0
    return sum(x[t] * scale * r for t, r in rates.items())


def available_by_type(cluster: pb.ClusterSnapshot) -> dict[str, int]:
    """Available GPUs of each type of a snapshot (installed minus unavailable)."""
    out: dict[str, int] = {}
    for n in cluster.nodes:
        out[n.gpu_type] = out.get(n.gpu_type, 0) + n.gpu_count - len(set(n.unavailable_gpu_indices))
    return out


def queue_of(tenant: str, queues: Iterable[str]) -> str | None:
    """The declared queue a job of this tenant belongs to (None: not limited)."""
    name = tenant or DEFAULT_QUEUE
    return name if name in set(queues) else None


def queue_attained(
    queues: Sequence[str], jobs: Iterable[tuple[str, float, float]]
) -> dict[str, tuple[float, float]]:
    """Per declared queue, the sums of (gpu_seconds, normalized_seconds) over its jobs, given
    as (tenant, gpu_seconds, normalized_seconds)."""
    out = {q: (0.0, 0.0) for q in queues}
    for tenant, gpu_s, norm_s in jobs:
        q = queue_of(tenant, out)
        if q is not None:
            g, n = out[q]
            out[q] = (g + gpu_s, n + norm_s)
    return out


def dominant_shares(
    running: Iterable[tuple[str, str, int, float, int]],
    waiting: Iterable[tuple[str, int, int]],
    available: Mapping[str, int],
    budget_watts: float | None,
) -> dict[str, tuple[float, float, float]]:
    """Per tenant with work: (its dominant share, its demand share, its requested share). The
    dominant share is the largest over GPU types of its GPUs there over the type's available
    GPUs, and of its predicted watts over the budget (DRF's, over the resources DSFRO plans).
    The demand share is the most GPUs its running and waiting jobs can use (each job's largest
    count, as every policy's round request says) over all available GPUs; the requested share
    counts the GPUs its running jobs hold and its waiting jobs' trace requests instead (both
    capped at 1). `running`: (tenant, GPU type, GPUs, predicted watts, largest count) per
    running job; `waiting`: (tenant, requested GPUs, largest count) per waiting job."""
    gpus: dict[str, dict[str, int]] = {}
    watts: dict[str, float] = {}
    most: dict[str, int] = {}
    asked: dict[str, int] = {}
    for tenant, gpu_type, n, w, top in running:
        by_type = gpus.setdefault(tenant, {})
        by_type[gpu_type] = by_type.get(gpu_type, 0) + n
        watts[tenant] = watts.get(tenant, 0.0) + w
        asked[tenant] = asked.get(tenant, 0) + n
        most[tenant] = most.get(tenant, 0) + top
    for tenant, n, top in waiting:
        asked[tenant] = asked.get(tenant, 0) + n
        most[tenant] = most.get(tenant, 0) + top
    total = max(sum(available.values()), 1)
    out = {}
    for tenant, n in asked.items():
        shares = [k / available[t] for t, k in gpus.get(tenant, {}).items() if available.get(t)]
        if budget_watts:
            shares.append(watts.get(tenant, 0.0) / budget_watts)
        out[tenant] = (
            max(shares, default=0.0),
            min(most[tenant] / total, 1.0),
            min(n / total, 1.0),
        )
    return out
