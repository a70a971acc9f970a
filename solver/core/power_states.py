"""Node power states in a solve (docs/power-states.md): every path plans the snapshot with its
suspended nodes left out; then queued jobs may wake suspended nodes and the policy's idle nodes
are suspended (solver.search.resume), the result checked with its actions.

The whole-GPU paths' bound is of the snapshot without its suspended nodes: where some exist,
the bound reported is the aggregated LP's over every node (a relaxation of the snapshot), or
none when it does not fit the time left.
"""

from __future__ import annotations

import dataclasses
import logging
import time

from solver.core.incumbent import relative_gap, termination
from solver.domain import JobState, Plan, Problem, SolveResult, Termination
from solver.perfmodel.configs import build_config_set
from solver.power_states import NodePowerState, PowerActionKind
from solver.scoring.checker import check_plan
from solver.scoring.fairness import fairness_headroom
from solver.scoring.objective import score_plan
from solver.scoring.plans import on_this_cluster
from solver.search.bound import solve_aggregate
from solver.search.resume import asleep, resume_for_queued, suspend_idle

log = logging.getLogger(__name__)


def uses_power_states(problem: Problem) -> bool:
    """Whether the snapshot has a power-saving policy on or a suspended node."""
    return problem.cluster.power_saving.enabled or any(
        n.power.state is NodePowerState.SUSPENDED for n in problem.cluster.nodes
    )


def awake_problem(problem: Problem) -> Problem:
    """The snapshot with every suspended node's GPUs unavailable; the same object if none."""
    if not any(n.power.state is NodePowerState.SUSPENDED for n in problem.cluster.nodes):
        return problem
    nodes = tuple(
        dataclasses.replace(n, unavailable_gpu_indices=frozenset(range(n.gpu_count)))
        if n.power.state is NodePowerState.SUSPENDED
        else n
        for n in problem.cluster.nodes
    )
    return dataclasses.replace(problem, cluster=dataclasses.replace(problem.cluster, nodes=nodes))


def without_unused_resumes(plan: Plan) -> Plan:
    """`plan` without the RESUME of a node no running job uses any more (a job queued after the
    actions were planned, as the power margin queues one: a node woken for nothing breaks the
    checker's rule and draws for nothing)."""
    used = {
        s.node
        for a in plan.assignments
        if a.state is JobState.RUNNING
        for s in a.placement
        if s.gpu_indices
    }
    actions = tuple(
        a for a in plan.power_actions if a.kind is not PowerActionKind.RESUME or a.node in used
    )
    return (
        plan
        if len(actions) == len(plan.power_actions)
        else dataclasses.replace(plan, power_actions=actions)
    )


def with_power_actions(problem: Problem, result: SolveResult, seconds: float) -> SolveResult:
    """`result` (a solve of `awake_problem(problem)`) with queued jobs on resumed nodes and the
    idle nodes suspended, checked against `problem`; `seconds` left for the bound."""
    s = result.stats
    if s.termination is Termination.INFEASIBLE:
        return result
    started = time.monotonic()
    configs = build_config_set(problem)
    assignments, resumes = resume_for_queued(problem, configs, result.plan.assignments)
    suspends = suspend_idle(problem, assignments)
    actions = (*resumes, *suspends)
    changes = result.plan.layout_changes
    violations = check_plan(problem, assignments, changes, actions)
    if violations:  # the solvers' plan, with only its suspends
        log.error("power actions rejected by the checker: %s", violations[0])
        assignments = list(result.plan.assignments)
        actions = tuple(suspend_idle(problem, assignments))
        resumes = []
        if check_plan(problem, assignments, changes, actions):
            actions = ()
    best = configs.best_samples_per_second
    objective = score_plan(problem, assignments, best, changes, configs.least_joules_per_sample)
    plan = dataclasses.replace(
        result.plan,
        assignments=tuple(assignments),
        objective=objective,
        power_actions=tuple(actions),
    )
    # The solvers planned on the nodes awake: least nodes and racks are the whole cluster's.
    plan = on_this_cluster(problem, configs, plan)
    objective = plan.objective
    bound, how = s.best_bound, ""
    if asleep(problem):  # the solvers' bound left the suspended nodes out
        bound, how = None, "no bound over the suspended nodes in the time left"
        left = seconds - (time.monotonic() - started)
        if left > 0:
            lp = solve_aggregate(problem, configs, time_limit=left, slices=bool(configs.slices))
            if lp.best_bound is not None:
                headroom = fairness_headroom(problem, configs.by_job, best)
                bound, how = lp.best_bound + headroom, "bound: the aggregated LP over every node"
    counts = {k: sum(1 for a in actions if a.kind is k) for k in PowerActionKind}
    note = (
        f"power states: {counts[PowerActionKind.RESUME]} resumed, "
        f"{counts[PowerActionKind.SUSPEND]} suspended" + (f" ({how})" if how else "")
    )
    value = objective.total
    stats = dataclasses.replace(
        s,
        objective=value,
        best_bound=None if bound is None else max(bound, value),
        relative_gap=relative_gap(value, bound),
        termination=termination(value, bound, degraded=s.termination is Termination.FALLBACK),
        wall_seconds=s.wall_seconds + (time.monotonic() - started),
        detail=f"{s.detail}; {note}" if s.detail else note,
    )
    return dataclasses.replace(result, plan=plan, stats=stats)
