"""Finish-time fairness' leases: a running job that its current configuration finishes within
the fairness horizon keeps its GPUs for the round.

Why: finish-time fairness lifts the worst job of one round. When two jobs cannot run together,
whichever waits is the worst off, so each round swaps them, each start pays a restart, and
neither gets far (docs/evaluation.md: two 16-GPU borrowers on `tenants-a` took turns 4 and 6
times and finished at rho 75 and 63). Themis allocates by leases for the same reason. A job
that will be done within the round keeps its GPUs, in its shape (its clock may change); the
jobs it keeps waiting wait at most that round.

A lease is granted only when every job that must keep its GPUs (leased, and non-preemptible)
fits the request's budgets and quotas on its own, at its least draw among the configurations the
solver plans with: a lease never makes a request infeasible. Jobs on MIG instances get none.
"""

from __future__ import annotations

import dataclasses

from solver.domain import FairnessMode, JobAssignment, JobState, Problem, QueueReason
from solver.perfmodel.configs import build_config_set, resolve_config
from solver.perfmodel.facts import type_facts
from solver.scoring.checker import check_plan


def finish_leases(problem: Problem) -> Problem:
    """`problem` with its jobs that finish within the horizon made non-preemptible for this
    round (the problem itself when none does, or when keeping them would break a limit)."""
    horizon = problem.fairness.horizon_seconds
    if problem.fairness.mode is not FairnessMode.FINISH_TIME or not horizon or horizon <= 0:
        return problem
    facts = type_facts(problem.cluster)
    leased = set()
    for job in problem.jobs:
        cur = job.current
        if cur is None or not job.preemptible or cur.mig is not None:
            continue
        config = resolve_config(problem, job, cur.shape, cur.sm_clock_mhz, facts)
        if config is None or config.samples_per_second <= 0:
            continue
        if job.remaining_samples / config.samples_per_second <= horizon:
            leased.add(job.name)
    if not leased:
        return problem
    jobs = tuple(
        dataclasses.replace(j, preemptible=False) if j.name in leased else j for j in problem.jobs
    )
    with_leases = dataclasses.replace(problem, jobs=jobs)
    return with_leases if _kept_jobs_fit(with_leases) else problem


def _kept_jobs_fit(problem: Problem) -> bool:
    """Whether the running non-preemptible jobs alone, each in its shape at its least draw
    among the configurations the solver plans with, and everyone else queued, make a valid
    plan. (At the GPU's lowest clock instead, which a profile measured at one clock does not
    offer, a lease at 64 nodes was granted that the solver could not keep: 1,507 W planned
    in a rack of 1,120, and the request answered INFEASIBLE.)"""
    kept = [j for j in problem.jobs if j.current is not None and not j.preemptible]
    # A job's configurations do not depend on the others': only the kept jobs' are built.
    configs = build_config_set(dataclasses.replace(problem, jobs=tuple(kept)))
    assignments = []
    for job in problem.jobs:
        if job.current is None or job.preemptible:
            queued = QueueReason.INSUFFICIENT_RESOURCES
            assignments.append(JobAssignment(job.name, JobState.QUEUED, queue_reason=queued))
            continue
        cur = job.current
        own = [c for c in configs.by_job.get(job.name, ()) if c.shape == cur.shape]
        if cur.mig is not None or not own:  # on a MIG instance, or no estimate: no leases
            return False
        least = min(own, key=lambda c: c.watts)
        assignments.append(JobAssignment(job.name, JobState.RUNNING, least, cur.placement))
    return not check_plan(problem, assignments)
