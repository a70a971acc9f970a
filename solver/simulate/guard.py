"""The power margin and the power limits in the simulator: one rule for every policy.

Each round the policy is told the budget less the expected margin of the running jobs
(``solver.perfmodel.guard.expected_margin``, the product's first estimate too), asked once
(baselines keep state per round, so they are never asked twice), and its plan is checked
against the whole budget by ``solver.perfmodel.guard.settle``, the product's last step: when the
margin breaks, the jobs' power limits come down until their sum fits (the cap is then hard),
failing that jobs are queued. Every running job gets its per-GPU power limit from the same
function the product uses, and the truth caps it there (``solver.simulate.power_cap``).
DSFRO's own margin loop is off in the simulator (its solver's ``power_margin_z`` is 0 there),
so that it gets exactly this rule too.
"""

from __future__ import annotations

import dataclasses

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import JobAssignment, JobState, Problem
from solver.perfmodel.budgets import extra_watts, floor_watts, woken_watts
from solver.perfmodel.configs import build_config_set, resolve_config, type_facts
from solver.perfmodel.guard import GuardParams, expected_margin, plan_draws, settle
from solver.simulate.core import Decision
from solver.simulate.power_cap import capped
from solver.simulate.truth import Rate


class RoundGuard:
    """The margin rule and the power limits of one simulation (``params`` None: neither)."""

    def __init__(self, params: GuardParams | None) -> None:
        self.params = params
        self.limits: dict[str, float | None] = {}
        """This round's per-GPU power limit of each running job."""
        self.shed = 0
        """Jobs queued by the rule over the run."""
        self._whole: Problem | None = None

    def tell(self, request: pb.SolveRequest, problem: Problem) -> tuple[pb.SolveRequest, Problem]:
        """The round's request and problem with the budget less the expected margin."""
        self._whole = problem
        budget = problem.cluster.power_budget_watts
        if self.params is None or budget is None:
            return request, problem
        # Never below what the cluster draws idle and its running non-preemptible jobs need:
        # a policy told less can only answer that nothing fits (DSFRO: INFEASIBLE, an empty
        # plan that stops those jobs; found by sim_unseen --seed 24, case 11).
        floor = floor_watts(problem.cluster) + kept_watts(problem)
        told = max(budget - expected_margin(problem, self.params), floor)
        told = min(told, budget)
        request.cluster.power_budget_watts = told
        cluster = dataclasses.replace(problem.cluster, power_budget_watts=told)
        return request, dataclasses.replace(problem, cluster=cluster)

    def enforce(self, decision: Decision) -> Decision:
        """The decision held to the margin on the whole budget (``settle``: limits lowered,
        failing that jobs queued); sets the running jobs' power limits."""
        self.limits = {}
        problem = self._whole
        if self.params is None or problem is None:
            return decision
        jobs = {j.name: j for j in problem.jobs}
        facts = type_facts(problem.cluster)
        assignments = []
        for name, a in decision.allocations.items():
            config = resolve_config(problem, jobs[name], a.shape, a.sm_clock_mhz, facts)
            if config is not None:
                assignments.append(JobAssignment(name, JobState.RUNNING, config, a.placement))
        draws = plan_draws(problem, assignments, self.params)
        keep = [n for n, j in jobs.items() if not j.preemptible and j.current is not None]
        first = [n for n in decision.allocations if jobs[n].current is None]
        woken = woken_watts(problem.cluster, assignments)
        settled = settle(problem, draws, self.params, keep, first, woken)
        self.limits = dict(settled.limits)
        if settled.shed:
            self.shed += len(settled.shed)
            kept = {n: a for n, a in decision.allocations.items() if n not in settled.shed}
            note = f"{len(settled.shed)} queued for the power margin"
            detail = f"{decision.detail}; {note}" if decision.detail else note
            decision = dataclasses.replace(decision, allocations=kept, detail=detail)
        return decision

    def hold(self, job: str, rate: Rate, gpus: int) -> Rate:
        """The job's true rate this round held to its power limit."""
        return capped(rate, gpus, self.limits.get(job))


def kept_watts(problem: Problem) -> float:
    """What the running non-preemptible jobs draw above their GPUs' idle power, each in its
    own shape (or MIG instance) at its least draw among the configurations the solver plans
    with; a job without such a configuration counts 0."""
    kept = [j for j in problem.jobs if j.current is not None and not j.preemptible]
    if not kept:
        return 0.0
    configs = build_config_set(dataclasses.replace(problem, jobs=tuple(kept)))
    total = 0.0
    for job in kept:
        cur = job.current
        assert cur is not None
        if cur.mig is None:
            own = [c for c in configs.by_job.get(job.name, ()) if c.shape == cur.shape]
        else:
            own = [c for c in configs.slices.get(job.name, ()) if c.mig_profile == cur.mig.profile]
        if own:
            total += extra_watts(problem.cluster, min(own, key=lambda c: c.watts))
    return total


__all__ = ["RoundGuard", "kept_watts"]
