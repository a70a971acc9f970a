"""Checking and scoring a plan that the caller made (EvaluatePlan)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from solver.domain import Allocation, Config, Job, JobAssignment, JobState, Plan, Problem
from solver.mig import LayoutChange, MigInstance
from solver.perfmodel.configs import ConfigSet, build_config_set, resolve_config, type_facts
from solver.power_states import PowerAction
from solver.scoring.checker import PlanViolation, check_plan
from solver.scoring.completion import with_completion_priorities
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
    layout_changes: Sequence[LayoutChange] = (),
    power_actions: Sequence[PowerAction] = (),
    power_limits: Mapping[str, float] | None = None,
    scored: Problem | None = None,
) -> Evaluation:
    """Check and score job -> allocation (None: queued) and the plan's MIG layout changes with
    the solver's own checker and objective; the scored plan keeps `power_limits` (per-GPU, by
    running job), which its power margin report reads. `scored`: the round the objective is
    taken on when it is not `problem` itself (``solver.app.evaluate``: the solver's view of the
    snapshot, its completion priorities already set), with a subset of its jobs; the plan is
    checked against `problem` all the same.

    Each allocation's performance comes from the unfiltered model or profile, so that shapes a
    backend would have pruned can still be scored; a job on a MIG instance gets its slice
    configuration of that profile and clock (docs/mig.md).
    """
    facts = type_facts(problem.cluster)
    configs = build_config_set(problem, facts)
    problem = with_completion_priorities(problem, configs.best_samples_per_second)
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
        if alloc.mig is not None:
            config = _slice_config(configs, job, alloc)
            if config is None:
                violations.append(PlanViolation("configuration", name, _no_slice(job, alloc)))
                continue
            mig = MigInstance(alloc.mig.profile, alloc.mig.start)
            a = JobAssignment(name, JobState.RUNNING, config, alloc.placement, mig=mig)
            if is_migrated(job, a):
                a = JobAssignment(name, a.state, config, alloc.placement, True, mig=mig)
            assignments.append(a)
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
    changes = tuple(layout_changes)
    actions = tuple(power_actions)
    violations.extend(check_plan(problem, assignments, changes, actions))
    if violations:
        return Evaluation(tuple(violations), None)
    counted: Sequence[JobAssignment] = assignments
    if scored is not None:
        configs = build_config_set(scored, type_facts(scored.cluster))
        kept = {j.name for j in scored.jobs}
        counted = [a for a in assignments if a.job in kept]
    objective = score_plan(
        scored or problem,
        counted,
        configs.best_samples_per_second,
        changes,
        configs.least_joules_per_sample,
    )
    limits = power_limits or {}
    limited = tuple(
        dataclasses.replace(a, power_limit_watts=limits[a.job]) if a.job in limits else a
        for a in assignments
    )
    return Evaluation((), Plan(limited, objective, changes, actions))


def _slice_config(configs: ConfigSet, job: Job, alloc: Allocation) -> Config | None:
    """The job's slice configuration on the allocation's profile, GPU type and clock."""
    assert alloc.mig is not None
    for c in configs.slices.get(job.name, ()):
        if (c.mig_profile, c.gpu_type, c.sm_clock_mhz) == (
            alloc.mig.profile,
            alloc.shape.gpu_type,
            alloc.sm_clock_mhz,
        ):
            return c
    return None


def _no_slice(job: Job, alloc: Allocation) -> str:
    assert alloc.mig is not None
    where = f"{alloc.mig.profile} on {alloc.shape.gpu_type} at {alloc.sm_clock_mhz} MHz"
    if job.slices is None:
        return f"{where}: the job does not allow slices (jobs[].slices.allow)"
    return (
        f"{where} cannot run: the profile is outside the job's bounds, its memory exceeds the "
        "instance's, or the clock is not offered"
    )


def _describe(alloc: Allocation) -> str:
    s = alloc.shape
    return (
        f"{s.gpu_type} {s.data_parallel}x{s.tensor_parallel}x{s.pipeline_parallel} "
        f"at {alloc.sm_clock_mhz} MHz"
    )
