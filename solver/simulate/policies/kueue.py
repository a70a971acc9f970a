"""Kueue: quota admission per ClusterQueue, StrictFIFO, borrowing within a cohort, and fair
sharing's preemption to reclaim (docs/simulation.md, "kueue").

Each tenant queue is a ClusterQueue (a job whose tenant names no declared queue is in one
unlimited queue); GPU types are its resource flavors. Every round:

- admitted workloads (running jobs) keep their GPUs at their clock: Kueue never stops an
  admitted workload except to preempt it (below). When the power budget in force falls below
  what they draw, they are kept in submission order while the power allows (as ``fifo``);
- pending workloads wait in their queue in creation (submission) order, StrictFIFO: only the
  head of a queue is considered, and a head that cannot be admitted blocks its queue for the
  round (not the others). Among the queues' heads, the scheduler takes first those that fit
  without borrowing, then the lowest share value (below) with the head admitted, then the
  oldest;
- a head is admitted with its requested GPUs, data parallel or the smallest model-parallel
  degree that fits (``user_config``), on the first flavor, fastest predicted first, where its
  queue's quota, borrowing from the cohort up to the borrowing limit (``QuotaLedger``), the
  GPUs and the power fit (FlavorFungibility ``whenCanBorrow: Borrow``, ``whenCanPreempt:
  TryNextFlavor``: every flavor is tried without preemption first);
- if no flavor fits for lack of quota, fair sharing's preemption looks for targets among the
  running preemptible jobs on that flavor of the other queues of the cohort that borrow
  (share above 0): repeatedly the queue with the highest share, its most recently submitted
  job first (ties: the last by name, as admission breaks ties by name), under the strategies
  ``LessThanOrEqualToFinalShare`` (the preempting queue's share with the job <= the target
  queue's share without the target) then ``LessThanInitialShare`` (< the target queue's
  share), until the job fits the quota; the targets are then minimized
  (in reverse, a target whose quota the job does not need is kept). The job is admitted in the
  same round if it then also fits the GPUs (Kueue evicts, then admits in a later cycle; the
  round stands for both). All workloads have one priority, so none preempts within its own
  queue.

Share value (Kueue's dominant resource share, ``.status.fairSharing.weightedShare``): over the
resources (GPUs of every type together, as Kueue sums a resource over its flavors, and watts
where a queue has a power quota), the largest of (usage above nominal) / (what the cohort's
queues can lend: each one's lending limit, else its nominal), divided by the queue's weight; 0
when the queue does not borrow, infinite for weight 0 when it does.

Sources: Kueue's documentation, kubernetes-sigs/kueue ``site/content/en/docs/concepts/
preemption.md`` (Fair Sharing: share value, strategies, ``FindFairPreemptionTargets``;
Classic Preemption: candidates, their order, the minimisation), ``cluster_queue.md``
(StrictFIFO, flavor fungibility), and ``dominantResourceShare`` in ``pkg/cache``
(``fair_sharing.go``). Ours: the physical GPUs and the power as admission conditions (Kueue
admits on quota and leaves the pods to kube-scheduler), submission time for admission time in
the candidates' order, one round for Kueue's eviction and admission cycles.
"""

from __future__ import annotations

import math
import time
from collections import deque

from solver.domain import POWER, Config, Job, TenantQueue
from solver.perfmodel.quotas import QuotaLedger, demand
from solver.simulate.core import Decision, RoundInput
from solver.simulate.policies.common import (
    Planner,
    RoundView,
    fastest_first,
    fits_idle_cluster,
    keep_running,
    pin_non_preemptible,
    rigid_count,
    submission_order,
)

GPUS = "gpus"
"""Every GPU type as one resource, as Kueue sums a resource over its flavors for the share."""


def _resource(r: str) -> str:
    return POWER if r == POWER else GPUS


class Shares:
    """Share values of a cohort's queues from a ledger's usage (module docstring)."""

    def __init__(self, view: RoundView) -> None:
        self.cluster = view.cluster
        self.gpu_types = tuple(view.facts)
        self._lendable: dict[tuple[str, str], float] = {}
        for q in self.cluster.queues:
            if not q.cohort:
                continue
            for r in (*self.gpu_types, POWER):
                quota = q.quota(r)
                if quota is None:
                    continue
                lend = quota.nominal if quota.lending_limit is None else quota.lending_limit
                key = (q.cohort, _resource(r))
                self._lendable[key] = self._lendable.get(key, 0.0) + max(lend, 0.0)

    def share(
        self, ledger: QuotaLedger, q: TenantQueue, delta: Config | None = None, sign: float = 1.0
    ) -> float:
        """The queue's share with `delta`'s demand added (sign 1) or removed (-1)."""
        if not q.cohort:
            return 0.0
        extra = demand(delta) if delta is not None else {}
        borrowed: dict[str, float] = {}
        for r in (*self.gpu_types, POWER):
            quota = q.quota(r)
            if quota is None:
                continue
            used = ledger.used.get((q.name, r), 0.0) + sign * extra.get(r, 0.0)
            if used > quota.nominal:
                borrowed[_resource(r)] = borrowed.get(_resource(r), 0.0) + used - quota.nominal
        ratios = [
            b / lend
            for r, b in borrowed.items()
            if (lend := self._lendable.get((q.cohort, r), 0.0)) > 0
        ]
        if not ratios or max(ratios) <= 0:
            return 0.0
        return math.inf if q.weight <= 0 else max(ratios) / q.weight


def _copy(ledger: QuotaLedger) -> QuotaLedger:
    out = QuotaLedger(ledger.cluster)
    out.used = dict(ledger.used)
    return out


class KueuePolicy:
    """Quota admission per queue (StrictFIFO), borrowing, fair-sharing preemption."""

    name = "kueue"

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        view = RoundView.of(round_input)
        shares = Shares(view)
        jobs = submission_order(view, view.problem.jobs)
        running = [j for j in jobs if j.current is not None]
        evicted: set[str] = set()
        admitted: list[tuple[Job, Config]] = []
        planner = self._build(view, running, evicted, admitted)
        pending: dict[str, deque[Job]] = {}
        for j in jobs:
            if j.name not in planner:
                pending.setdefault(self._queue_name(view, j), deque()).append(j)
        blocked: list[str] = []
        while True:
            heads = [(q, d[0]) for q, d in pending.items() if d and q not in blocked]
            if not heads:
                break
            options = {job.name: self.options(view, job) for _, job in heads}
            q, job = min(
                heads, key=lambda h: self._order(view, planner, shares, h[1], options[h[1].name])
            )
            opts = options[job.name]
            if job.name in planner:  # a job the power had stopped, kept again by a rebuild
                pending[q].popleft()
                continue
            if not self._ever_fits(view, job, opts):
                pending[q].popleft()  # never admissible: Kueue marks it inadmissible
                continue
            if any(planner.place(job, c) for c in opts):
                admitted.append((job, planner.configs[job.name]))
                pending[q].popleft()
                continue
            reclaimed = self._preempt(view, shares, planner, running, evicted, admitted, job, opts)
            if reclaimed is None:
                blocked.append(q)
                continue
            planner, targets = reclaimed
            evicted |= targets
            admitted.append((job, planner.configs[job.name]))
            pending[q].popleft()
        detail = f"{len(planner.allocations)} running"
        if evicted:
            detail += f", preempted to reclaim quota: {', '.join(sorted(evicted))}"
        if blocked:
            detail += f", blocked queues: {', '.join(sorted(blocked))}"
        return planner.decision(started, detail)

    def options(self, view: RoundView, job: Job) -> list[Config]:
        """The job's flavors, fastest predicted first, at its requested GPUs."""
        return fastest_first(view, job, rigid_count(view, job))

    @staticmethod
    def _queue_name(view: RoundView, job: Job) -> str:
        q = view.cluster.queue_of(job.tenant)
        return "" if q is None else q.name

    @staticmethod
    def _ever_fits(view: RoundView, job: Job, options: list[Config]) -> bool:
        empty = QuotaLedger(view.cluster)
        return any(fits_idle_cluster(view, c) and empty.fits(job, c) for c in options)

    @staticmethod
    def _order(
        view: RoundView, planner: Planner, shares: Shares, job: Job, options: list[Config]
    ) -> tuple[bool, float, float, str]:
        """Heads fitting without borrowing first, then the lowest share with the head
        admitted, then the oldest."""
        q = view.cluster.queue_of(job.tenant)
        submit = view.past(job).submit_time_s
        if q is None or not options:
            return (False, 0.0, submit, job.name)
        c = options[0]
        borrows = any(
            planner.quotas.used.get((q.name, r), 0.0) + amount > quota.nominal
            for r, amount in demand(c).items()
            if (quota := q.quota(r)) is not None
        )
        return (borrows, shares.share(planner.quotas, q, c), submit, job.name)

    def _build(
        self,
        view: RoundView,
        running: list[Job],
        evicted: set[str],
        admitted: list[tuple[Job, Config]],
    ) -> Planner:
        """The plan with the running jobs not evicted kept where they are (submission order,
        while the power allows) and the jobs admitted so far placed."""
        planner = Planner(view)
        pin_non_preemptible(planner)
        for j in running:
            if j.name not in evicted and j.name not in planner:
                assert j.current is not None
                keep_running(planner, j, [j.current.sm_clock_mhz])
        for j, c in admitted:
            planner.admit(j, c)
        return planner

    def _preempt(
        self,
        view: RoundView,
        shares: Shares,
        planner: Planner,
        running: list[Job],
        evicted: set[str],
        admitted: list[tuple[Job, Config]],
        job: Job,
        options: list[Config],
    ) -> tuple[Planner, set[str]] | None:
        """The plan with `job` admitted after preempting fair-sharing targets, and the
        targets; None if no flavor gets it in."""
        q = view.cluster.queue_of(job.tenant)
        if q is None or not q.cohort:
            return None
        for c in options:
            if not fits_idle_cluster(view, c):
                continue
            targets = self._targets(view, shares, planner, job, q, c)
            if not targets:
                continue
            trial = self._build(view, running, evicted | targets, admitted)
            if trial.place(job, c):
                return trial, targets
        return None

    def _targets(
        self,
        view: RoundView,
        shares: Shares,
        planner: Planner,
        job: Job,
        q: TenantQueue,
        c: Config,
    ) -> set[str]:
        """Kueue's FindFairPreemptionTargets for `job` in `c` (module docstring); empty if
        the quota is not what keeps it out, or if preempting cannot make it fit."""
        ledger = _copy(planner.quotas)
        if ledger.fits(job, c):
            return set()
        by_name = {j.name: j for j in view.problem.jobs}
        candidates: dict[str, list[Job]] = {}
        for name, cfg in planner.configs.items():
            other = by_name[name]
            oq = view.cluster.queue_of(other.tenant)
            if oq is None or oq.name == q.name or oq.cohort != q.cohort:
                continue
            if not other.preemptible or cfg.gpu_type != c.gpu_type:
                continue
            candidates.setdefault(oq.name, []).append(other)
        for group in candidates.values():  # the latest in admission order first
            group.sort(key=lambda j: (view.past(j).submit_time_s, j.name), reverse=True)
        queues = {x.name: x for x in view.cluster.queues}
        targets: list[Job] = []
        for strict in (False, True):  # LessThanOrEqualToFinalShare, then LessThanInitialShare
            left = {n: list(g) for n, g in candidates.items()}
            while not ledger.fits(job, c):
                live = [n for n, g in left.items() if g and shares.share(ledger, queues[n]) > 0]
                if not live:
                    break
                y = max(live, key=lambda n: (shares.share(ledger, queues[n]), n))
                mine = shares.share(ledger, q, c)
                for u in left[y]:
                    cu = planner.configs[u.name]
                    if strict:
                        ok = mine < shares.share(ledger, queues[y])
                    else:
                        ok = mine <= shares.share(ledger, queues[y], cu, -1.0)
                    if ok:
                        targets.append(u)
                        ledger.release(u, cu)
                        left[y].remove(u)
                        for g in candidates.values():
                            if u in g:
                                g.remove(u)
                        break
                else:
                    left[y] = []
            if ledger.fits(job, c):
                break
        if not ledger.fits(job, c):
            return set()
        for u in reversed(list(targets)):  # minimise: keep a target the job does not need
            cu = planner.configs[u.name]
            ledger.take(u, cu)
            if ledger.fits(job, c):
                targets.remove(u)
            else:
                ledger.release(u, cu)
        return {u.name for u in targets}

    def close(self) -> None:
        """Nothing to release."""
