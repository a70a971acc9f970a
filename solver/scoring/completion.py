"""The completion priority (docs/objective.md, "Completion priority"): the jobs closest to
finishing, at their best pace, have their throughput counted again, halved per rank.

Maximising normalized throughput is indifferent between two jobs sharing GPUs and one after the
other, and mean JCT is not: run in turn, the first finishes early and the other as late as
shared (shortest remaining first, SRPT). So with weight ``l_C`` the objective adds
``l_C C``, ``C = sum_running w_j pi_j u_j``, with ``pi_j = 2^-rank_j`` over the jobs ranked by
remaining time at their best configuration (remaining samples / ``T*_j``), shortest first, ties
by name. The priorities sum to less than 2 whatever the number of jobs, so the weight keeps one
meaning at any size. A constant of the job, like its weight: every path reads it from the job.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from solver.domain import Job, Problem
from solver.perfmodel.configs import best_rates

COMPLETION_DECAY = 0.5
"""pi of rank r is COMPLETION_DECAY ** r: each rank counts half the one before."""


def completion_priorities(jobs: Sequence[Job], best: Mapping[str, float]) -> dict[str, float]:
    """pi_j of every job: COMPLETION_DECAY ** rank by remaining time at its best pace; 0 for a
    job that cannot run (no best pace) or has no work left."""
    remaining = {
        j.name: j.remaining_samples / best[j.name]
        for j in jobs
        if best.get(j.name, 0.0) > 0 and j.remaining_samples > 0
    }
    order = sorted(remaining, key=lambda name: (remaining[name], name))
    ranked = {name: COMPLETION_DECAY**rank for rank, name in enumerate(order)}
    return {j.name: ranked.get(j.name, 0.0) for j in jobs}


def with_completion_priorities(problem: Problem, best: Mapping[str, float]) -> Problem:
    """`problem` with each job's completion priority set from `best` (each job's T*); the
    problem as it is when the completion weight is 0 (no job then carries a priority)."""
    if problem.weights.completion == 0.0:
        return problem
    pi = completion_priorities(problem.jobs, best)
    if all(math.isclose(pi[j.name], j.completion_priority) for j in problem.jobs):
        return problem
    jobs = tuple(dataclasses.replace(j, completion_priority=pi[j.name]) for j in problem.jobs)
    return dataclasses.replace(problem, jobs=jobs)


def ranked_for_completion(problem: Problem) -> Problem:
    """`problem` with its completion priorities, from each job's best pace (enumerated once
    here: the solve builds its configurations later, or never on the quick plan's path)."""
    if problem.weights.completion == 0.0:
        return problem
    return with_completion_priorities(problem, best_rates(problem))
