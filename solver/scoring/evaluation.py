"""Checking and scoring a plan that the caller made (EvaluatePlan)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from solver.domain import Allocation, JobAssignment, JobState, Plan, Problem
from solver.perfmodel.configs import build_config_set, resolve_config, type_facts
from solver.scoring.checker import PlanViolation, check_plan
from solver.scoring.objective import is_migrated, score_plan
from solver.scoring.plans import queued_assignment


@dataclass(frozen=True)
class Evaluation:
    violations: tuple[PlanViolation, ...]
    plan: Plan | None
    """The scored plan; None when it breaks a constraint."""


def evaluate_allocations(
    problem: Problem,
    allocations: Mapping[str, Allocation | None],
) -> Evaluation:
    """Check and score job -> allocation (None: queued) with the solver's own checker and objective.

    Each allocation's performance comes from the unfiltered model or profile, so that shapes a
    backend would have pruned can still be scored.
    """
    facts = type_facts(problem.cluster)
    configs = build_config_set(problem, facts)
    jobs = {j.name: j for j in problem.jobs}
    assignments: list[JobAssignment] = []
    violations: list[PlanViolation] = []
    for name, alloc in allocations.items():
        job = jobs.get(name)
        if job is None:
            violations.append(PlanViolation("known_job", name, "not a job of the request"))
            continue
        if alloc is None:
            assignments.append(queued_assignment(problem, configs, job))
            continue
        config = resolve_config(problem, job, alloc.shape, alloc.sm_clock_mhz, facts)
        if config is None:
            violations.append(
                PlanViolation(
                    "configuration",
                    name,
                    f"{_describe(alloc)} cannot run: it does not fit in memory, is not covered "
                    "by the job's profile, or no node of the type holds it",
                )
            )
            continue
        a = JobAssignment(
            job=name, state=JobState.RUNNING, config=config, placement=alloc.placement
        )
        if is_migrated(job, a):
            a = JobAssignment(
                job=name, state=a.state, config=config, placement=alloc.placement, migrated=True
            )
        assignments.append(a)
    violations.extend(check_plan(problem, assignments))
    if violations:
        return Evaluation(tuple(violations), None)
    objective = score_plan(problem, assignments, configs.best_samples_per_second)
    return Evaluation((), Plan(tuple(assignments), objective))


def _describe(alloc: Allocation) -> str:
    s = alloc.shape
    return (
        f"{s.gpu_type} {s.data_parallel}x{s.tensor_parallel}x{s.pipeline_parallel} "
        f"at {alloc.sm_clock_mhz} MHz"
    )
