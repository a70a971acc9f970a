"""FIFO: first come, first served gang scheduling with strict head-of-line blocking.

The common definition, as in Tiresias' simulator (``one_queue_fifo_sim_jobs`` in
SymbioticLab/Tiresias simulator/run_sim.py: pending jobs start in arrival order and the first
one that does not fit stops the scan) and Gavel's ``FIFOPolicy`` (scheduler/policies/fifo.py:
"no jobs being able to jump ahead in the queue"):

- jobs start in submission order, each with its requested GPU count (``rigid_count``), data
  parallel, or the smallest tensor (then pipeline) degree that fits in memory, at the top clock;
- a job goes on the fastest predicted allowed GPU type that has the GPUs and the power, else the
  next fastest (a user picks the fastest free type);
- the first job that fits no type blocks every job behind it. A job that could not run even on
  the idle cluster under the budget in force (too large, no configuration) is skipped, as a
  real scheduler would reject it, rather than blocking the queue forever. Nor does a job that
  its tenant queue's quota (with what its cohort can lend) keeps out block the others: it waits
  for its queue, as Kueue leaves it pending while other queues' jobs start;
- running jobs keep their allocation (no preemption). Only when the budget in force falls
  below what they draw are running jobs stopped: they are kept in start order (submission
  order, which is FIFO's start order) while the power allows, so the latest started stop first.
  A stopped job goes back to its place in the queue. Non-preemptible jobs are never stopped
  (``pin_non_preemptible`` lowers their clocks instead).
"""

from __future__ import annotations

import time

from solver.domain import Config, Job
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


class FifoPolicy:
    """First come, first served with head-of-line blocking; no preemption."""

    name = "fifo"

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        planner = Planner(RoundView.of(round_input))
        return planner.decision(started, self.fill(planner))

    def fill(self, planner: Planner) -> str:
        """FIFO's plan of the round into `planner` (which may hold allocations already: their
        GPUs, power and quota are taken); its detail."""
        view = planner.view
        pin_non_preemptible(planner)
        jobs = submission_order(view, view.problem.jobs)
        stopped = [
            j.name
            for j in jobs
            if j.current is not None
            and j.name not in planner
            and not keep_running(planner, j, self.running_clocks(view, j))
        ]
        blocked = ""
        for job in jobs:
            if job.name in planner:
                continue
            options = self.options(view, job)
            if any(planner.place(job, c) for c in options):
                continue
            if any(fits_idle_cluster(view, c) and planner.quota_fits(job, c) for c in options):
                blocked = job.name
                break
        detail = f"{len(planner.allocations)} running"
        if stopped:
            detail += f", stopped by the power budget: {', '.join(stopped)}"
        if blocked:
            detail += f", head of line: {blocked}"
        return detail

    def options(self, view: RoundView, job: Job) -> list[Config]:
        """A waiting job's configurations, in the order it tries them."""
        return fastest_first(view, job, rigid_count(view, job))

    def running_clocks(self, view: RoundView, job: Job) -> list[int]:
        """Clocks a running job may keep running at: FIFO does not touch clocks."""
        assert job.current is not None
        return [job.current.sm_clock_mhz]

    def close(self) -> None:
        """Nothing to release."""
