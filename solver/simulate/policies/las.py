"""LAS: Tiresias' discretized two-dimensional least-attained-service scheduling.

Tiresias (Gu et al., NSDI'19) ranks jobs by attained service in GPU-time (GPUs x time run: the
"2D" of 2D-LAS) and discretizes it into priority queues, FIFO inside each queue, preempting
whatever the queues do not reach. Rules as in its simulator (SymbioticLab/Tiresias,
simulator/run_sim.py ``dlas_sim_jobs(gputime=True)``, the ``dlas-gpu`` schedule of
sim_runs.sh; thresholds in simulator/jobs.py):

- three queues (``num_queue = 3``) with thresholds 3250 and 7200 GPU-seconds
  (``queue_limit = [3250, 7200, 18000]``; the last entry is unused with three queues): a job
  is in queue k once its attained GPU-seconds reach the k-th threshold;
- queues are served highest first; inside a queue running jobs come first, then waiting ones
  in submission order (after each round the simulator moves pending jobs to the back of
  their queue);
- each job in that order runs if its requested GPUs are free, else it is skipped (``continue``:
  later, smaller jobs may still start); every running job not reached is preempted;
- starvation avoidance (promotion back to queue 0, ``solve_starvation``) is off, as in the
  ``dlas-gpu`` schedule.

Adapted: the requested count is placed as a gang (tensor groups inside a node) on the job's
current type and GPUs where it runs, else on the fastest predicted allowed type with room
(Tiresias assumes one GPU type), at the top clock; predicted watts are one more resource at
admission (Tiresias has no power budget). Non-preemptible running jobs are never preempted.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence

from solver.domain import Config, Job
from solver.simulate.core import Decision, RoundInput
from solver.simulate.policies.common import (
    Candidate,
    RoundView,
    admit_in_order,
    fastest_first,
    rigid_count,
)

QUEUE_THRESHOLDS_GPU_S = (3250.0, 7200.0)
"""Tiresias' default queue limits for dlas-gpu (simulator/jobs.py, with num_queue = 3)."""


class LasPolicy:
    """Discretized 2D-LAS (Tiresias), preemptive."""

    name = "las"

    def __init__(self, thresholds_gpu_s: Sequence[float] = QUEUE_THRESHOLDS_GPU_S) -> None:
        if list(thresholds_gpu_s) != sorted(thresholds_gpu_s):
            raise ValueError("queue thresholds must be ascending")
        self.thresholds = tuple(thresholds_gpu_s)

    def queue(self, attained_gpu_s: float) -> int:
        """The priority queue of a job with this attained service (0: highest)."""
        return bisect.bisect_right(self.thresholds, attained_gpu_s)

    def order(self, view: RoundView) -> list[Job]:
        """Jobs in service order: queue, then running before waiting, then submission."""

        def key(j: Job) -> tuple[int, bool, float, str]:
            h = view.past(j)
            return (self.queue(h.attained_gpu_seconds), j.current is None, h.submit_time_s, j.name)

        return sorted(view.problem.jobs, key=key)

    def options(self, view: RoundView, job: Job) -> tuple[Config, ...]:
        """Its current shape at the top clock where it runs, then every allowed type."""
        n = rigid_count(view, job)
        out = fastest_first(view, job, n)
        cur = job.current
        if cur is not None and cur.shape.num_gpus == n:
            here = view.config(job, cur.shape, view.top_clock(cur.shape.gpu_type))
            if here is not None:
                out = [here, *(c for c in out if c.shape != here.shape)]
        return tuple(out)

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        view = RoundView.of(round_input)
        ordered = self.order(view)
        planner = admit_in_order(view, [Candidate(j, self.options(view, j)) for j in ordered])
        queues = [self.queue(view.past(j).attained_gpu_seconds) for j in ordered]
        detail = f"{len(planner.allocations)} running; queue sizes " + "/".join(
            str(queues.count(k)) for k in range(len(self.thresholds) + 1)
        )
        return planner.decision(started, detail)

    def close(self) -> None:
        """Nothing to release."""
