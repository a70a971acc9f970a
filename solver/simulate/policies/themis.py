"""Themis: finish-time fairness with partial allocation (docs/simulation.md, "themis").

Themis (Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI'20) judges a
job by its finish-time fairness ``rho = T_shared / T_isolated``: its finish time in the shared
cluster over its finish time alone on a 1/N share of the cluster (N contending jobs). Each
round (the lease) the arbiter offers the GPUs to the fraction ``1 - f`` of the jobs with the
worst rho; what they leave is given to the others (work conservation). Here, each round:

- every active job's rho is estimated as ``(age + remaining / r_alloc) / (attained normalized
  seconds + remaining / r_equal)``: ``r_alloc`` the predicted rate of its current allocation
  (a waiting job: of its user configuration on the fastest allowed type, as if it started
  now), ``r_equal`` its rate on an equal 1/N share of every GPU type (``solver.simulate.
  tenants``, N the active jobs); the denominator is the job's whole run on that share, the
  work done so far counted by its attained normalized service (the request's
  ``Job.attained``). This is Gavel's ``FinishTimeFairnessPolicyWithPerf`` estimate (its
  ``expected_time_allocation / expected_time_isolated``), with the isolated time of the whole
  job rather than from its submission;
- the ``ceil((1 - f) N)`` jobs with the worst (largest) rho are offered the GPUs first, worst
  first, each with its requested GPUs on its current shape, else the fastest allowed type;
  then the other jobs, running ones first (they keep their lease where the GPUs remain), each
  group worst rho first. Admission is ``admit_in_order``: the preemptive policies' priority
  admission, with the power budget and the tenant quotas as every baseline keeps them.

Adapted: Themis' auction, where each app bids its rho under every bundle of the offered GPUs
and the arbiter picks the partial allocation that maximises the product of the rho
improvements, becomes the order of the offer (each job takes its user configuration); apps are
single jobs; ``f`` (``fairness_knob``) is 0.8 by default, a choice (the paper studies the knob
between 0 and 1).
"""

from __future__ import annotations

import math
import time

from solver.domain import Job
from solver.simulate.core import Decision, RoundInput
from solver.simulate.policies.common import (
    Candidate,
    RoundView,
    admit_in_order,
    fastest_first,
    rigid_count,
)
from solver.simulate.policies.las import LasPolicy
from solver.simulate.tenants import equal_share_rate, type_rates

FAIRNESS_KNOB = 0.8


class ThemisPolicy:
    """Worst finish-time fairness first, partial allocation to the 1 - f worst."""

    name = "themis"

    def __init__(self, fairness_knob: float = FAIRNESS_KNOB) -> None:
        if not 0.0 <= fairness_knob < 1.0:
            raise ValueError("the fairness knob f must be in [0, 1)")
        self.fairness_knob = fairness_knob
        self._las = LasPolicy()

    def rho(self, view: RoundView, job: Job) -> float:
        """The job's estimated finish-time fairness (module docstring); inf where it has no
        rate (no allocation it could start in)."""
        gpus = rigid_count(view, job)
        active = len(view.problem.jobs)
        available = {t: view.available_gpus(t) for t in view.facts}
        equal = equal_share_rate(type_rates(view, job, gpus), gpus, available, active)
        rate = 0.0
        cur = job.current
        if cur is not None:
            c = view.config(job, cur.shape, cur.sm_clock_mhz)
            rate = 0.0 if c is None else c.samples_per_second
        else:
            options = fastest_first(view, job, gpus)
            rate = options[0].samples_per_second if options else 0.0
        if rate <= 0 or equal <= 0:
            return math.inf
        remaining = job.remaining_samples
        isolated = job.attained.normalized_seconds + remaining / equal
        if isolated <= 0:
            return 1.0
        return (view.age_s(job) + remaining / rate) / isolated

    def order(self, view: RoundView) -> tuple[list[Job], int]:
        """The jobs in the order of the offer, and how many are in the auction."""
        rho = {j.name: self.rho(view, j) for j in view.problem.jobs}

        def worst(j: Job) -> tuple[float, float, str]:
            return (-rho[j.name], view.past(j).submit_time_s, j.name)

        ranked = sorted(view.problem.jobs, key=worst)
        k = min(len(ranked), max(1, math.ceil((1.0 - self.fairness_knob) * len(ranked))))
        rest = sorted(ranked[k:], key=lambda j: (j.current is None, *worst(j)))
        return ranked[:k] + rest, k

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        view = RoundView.of(round_input)
        ordered, k = self.order(view)
        planner = admit_in_order(view, [Candidate(j, self._las.options(view, j)) for j in ordered])
        return planner.decision(started, f"{len(planner.allocations)} running, {k} in the auction")

    def close(self) -> None:
        """Nothing to release."""
