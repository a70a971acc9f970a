"""The checker's report of a plan's power margin, re-derived from the request and the plan alone
(it shares no code with ``solver.perfmodel.guard``, which the solver uses, on purpose: the two
must agree, and tests check that they do).

Report, not violation: the budget is the hard rule (``check_plan``); the margin is the solver's
rule for keeping the true draw under it, whose slack a caller may want to see (``PowerMargin``
on the wire; docs/objective.md, "Power margin").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from solver.domain import Job, JobAssignment, JobState, Problem, ThroughputProfile, busy_nodes
from solver.perfmodel.configs import resolve_config
from solver.perfmodel.guard import GuardParams
from solver.power_states import NodePowerState


@dataclass(frozen=True)
class PowerMarginReport:
    """The plan's draw against the cluster budget (all in W)."""

    budget: float
    predicted: float
    """Every node's floor (base power and idle GPUs; suspended and not woken by the plan: the
    policy's draw), plus each running job's mean above its GPUs' idle."""
    margin: float
    """The smaller of z standard deviations of the draw and ``limited - predicted``."""
    limited: float
    """Each running job's power limits over its GPUs, plus idle power of every other GPU: the
    most the cluster draws with the limits set (infinite when a running job has no limit,
    e.g. on a MIG instance, or when the plan carries none)."""
    z: float

    @property
    def slack(self) -> float:
        return self.budget - self.predicted - self.margin


def _uncertainty(job: Job, guard: GuardParams) -> float:
    cur = job.current
    if cur is not None and cur.observed_watts is not None:
        return guard.observed_uncertainty
    if isinstance(job.workload, ThroughputProfile):
        return guard.measured_uncertainty
    return guard.model_uncertainty


def _ratio(problem: Problem, job: Job) -> float:
    """Observed over predicted watts of the current allocation (1 without an observation)."""
    cur = job.current
    if cur is None or cur.observed_watts is None or cur.mig is not None:
        return 1.0
    predicted = resolve_config(problem, job, cur.shape, cur.sm_clock_mhz)
    if predicted is None or predicted.watts <= 0:
        return 1.0
    return cur.observed_watts / predicted.watts


def power_margin(
    problem: Problem, assignments: Iterable[JobAssignment], guard: GuardParams | None = None
) -> PowerMarginReport | None:
    """The report; None without a cluster budget. `guard`: the solver's parameters (defaults
    when None)."""
    cluster = problem.cluster
    if cluster.power_budget_watts is None:
        return None
    g = guard if guard is not None else GuardParams()
    jobs = {j.name: j for j in problem.jobs}
    assignments = tuple(assignments)
    used = busy_nodes(assignments)
    idle = 0.0
    for node in cluster.nodes:  # suspended nodes the plan leaves asleep at the policy's draw
        if node.power.state is NodePowerState.SUSPENDED and node.name not in used:
            idle += cluster.power_saving.suspended_node_watts
        else:
            idle += node.power.base_watts
            idle += node.gpu_count * cluster.gpu_types[node.gpu_type].idle_watts
    predicted = limited = idle
    variance = 0.0
    for a in assignments:
        c = a.config
        if a.state is not JobState.RUNNING or c is None:
            continue
        job = jobs[a.job]
        mean = c.watts * _ratio(problem, job)
        variance += (_uncertainty(job, g) * mean) ** 2
        held = 0.0 if c.mig_profile else c.num_gpus * cluster.gpu_types[c.gpu_type].idle_watts
        predicted += mean - held
        if a.power_limit_watts is not None and not c.mig_profile:
            limited += max(a.power_limit_watts * c.num_gpus, mean) - held
        else:
            limited = math.inf  # no limit: no hard bound
    return PowerMarginReport(
        budget=cluster.power_budget_watts,
        predicted=predicted,
        margin=min(g.z * math.sqrt(variance), limited - predicted),
        limited=limited,
        z=g.z,
    )


__all__ = ["PowerMarginReport", "power_margin"]
