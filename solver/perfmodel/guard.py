"""The power margin and the GPU power limits: what keeps the true draw under the budget when the
watts a plan was made with are predictions.

Each running job's draw is a random quantity: mean its predicted watts (scaled by what it was
observed to draw, when the snapshot carries that), standard deviation a relative uncertainty
times that mean. A plan satisfies the margin when

    expected draw + z * sqrt(sum of the jobs' variances) <= budget

(idle GPUs draw their idle power exactly). Large jobs weigh more: their variance grows with the
square of their draw. The per-GPU power limit (``nvidia-smi -pl``) cuts each job's error at
``limit_z`` of its own standard deviations, within the GPU type's supported range.
docs/objective.md, "Power margin", says why and how every solver path honours it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from solver.domain import Config, GpuType, Job, JobAssignment, JobState, Problem, ThroughputProfile
from solver.perfmodel.budgets import floor_watts
from solver.perfmodel.configs import TypeFacts, resolve_config, type_facts
from solver.perfmodel.guard_params import GuardParams

MIN_POWER_LIMIT_FRACTION = 0.3923
"""Lowest supported power limit over TDP, where the catalog has no figure: the median over the
four GPUs of the Zeus sweeps (data/zeus) of the lowest limit swept over the highest (A40
100/300 W, P100 125/250 W, RTX 6000 100/260 W, V100 100/250 W: 0.333, 0.5, 0.385, 0.4)."""


@dataclass(frozen=True)
class JobDraw:
    """What one running job is expected to draw, and how sure that is."""

    job: str
    mean: float
    """W of all its GPUs (its predicted watts times its observed ratio)."""
    sd: float
    idle: float
    """Idle W of its GPUs (drawn whether it runs or not; 0 on a MIG instance)."""
    gpus: int
    """Whole GPUs it holds (0 on a MIG instance)."""
    limit_per_gpu: float | None
    """The power limit of each of its GPUs; None on a MIG instance."""
    floor_per_gpu: float = 0.0
    """The lowest limit its GPUs support."""

    @property
    def headroom(self) -> float:
        """How far above its mean the job may draw with its limits set (W, all its GPUs);
        infinite on a MIG instance (no limit of its own)."""
        if self.limit_per_gpu is None:
            return math.inf
        return self.limit_per_gpu * self.gpus - self.mean


@dataclass(frozen=True)
class Margin:
    """A plan's draw against the cluster budget."""

    budget: float
    predicted: float
    margin: float
    limited: float
    """Sum of the running jobs' limits over their GPUs plus idle power of every other GPU."""
    z: float

    @property
    def slack(self) -> float:
        return self.budget - self.predicted - self.margin


def relative_uncertainty(job: Job, params: GuardParams) -> float:
    """The job's relative uncertainty: observed < measured profile < model only."""
    if job.current is not None and job.current.observed_watts is not None:
        return params.observed_uncertainty
    if isinstance(job.workload, ThroughputProfile):
        return params.measured_uncertainty
    return params.model_uncertainty


def observed_ratio(problem: Problem, job: Job, facts: Mapping[str, TypeFacts]) -> float:
    """Observed over predicted watts of the job's current allocation; 1 without an observation
    (or when the current shape has no prediction)."""
    cur = job.current
    if cur is None or cur.observed_watts is None or cur.mig is not None:
        return 1.0
    predicted = resolve_config(problem, job, cur.shape, cur.sm_clock_mhz, facts)
    if predicted is None or predicted.watts <= 0:
        return 1.0
    return cur.observed_watts / predicted.watts


def power_limit_range(gpu: GpuType) -> tuple[float, float]:
    """(lowest, highest) power limit of one GPU: TDP on top, and at the bottom the Zeus-measured
    fraction of TDP (never below idle)."""
    return max(gpu.idle_watts, MIN_POWER_LIMIT_FRACTION * gpu.tdp_watts), gpu.tdp_watts


def power_limit(gpu: GpuType, mean_per_gpu: float, sd_per_gpu: float, limit_z: float) -> float:
    """The limit of one GPU: mean plus ``limit_z`` standard deviations, within the range."""
    low, high = power_limit_range(gpu)
    return min(high, max(low, mean_per_gpu + limit_z * sd_per_gpu))


def job_draw(
    problem: Problem,
    job: Job,
    config: Config,
    params: GuardParams,
    facts: Mapping[str, TypeFacts] | None = None,
) -> JobDraw:
    """The job's expected draw in `config`, its standard deviation and its power limit."""
    facts = facts if facts is not None else type_facts(problem.cluster)
    mean = config.watts * observed_ratio(problem, job, facts)
    sd = relative_uncertainty(job, params) * mean
    if config.mig_profile:
        return JobDraw(job.name, mean, sd, 0.0, 0, None)
    gpu = problem.cluster.gpu_types[config.gpu_type]
    n = config.num_gpus
    limit = power_limit(gpu, mean / n, sd / n, params.limit_z)
    floor = power_limit_range(gpu)[0]
    return JobDraw(job.name, mean, sd, gpu.idle_watts * n, n, limit, floor)


def plan_draws(
    problem: Problem, assignments: Iterable[JobAssignment], params: GuardParams
) -> list[JobDraw]:
    """The draw of every running job of a plan."""
    facts = type_facts(problem.cluster)
    jobs = {j.name: j for j in problem.jobs}
    return [
        job_draw(problem, jobs[a.job], a.config, params, facts)
        for a in assignments
        if a.state is JobState.RUNNING and a.config is not None
    ]


def margin_of(
    problem: Problem, draws: Iterable[JobDraw], params: GuardParams, woken: float = 0.0
) -> Margin | None:
    """The margin of a plan's running jobs; None without a cluster budget. The margin is the
    smaller of z standard deviations of the draw and the sum of the jobs' headrooms under
    their limits (the most they can draw above their means: a hard bound). `woken`: what the
    plan adds to the floor by waking suspended nodes (budgets.woken_watts)."""
    budget = problem.cluster.power_budget_watts
    if budget is None:
        return None
    predicted = floor_watts(problem.cluster) + woken
    variance = headroom = 0.0
    for d in draws:
        predicted += d.mean - d.idle
        variance += d.sd * d.sd
        headroom += max(d.headroom, 0.0)
    margin = min(params.z * math.sqrt(variance), headroom)
    return Margin(budget, predicted, margin, predicted + headroom, params.z)


@dataclass(frozen=True)
class Settlement:
    """What makes a plan keep its margin: jobs to queue and each running job's power limit."""

    shed: tuple[str, ...]
    limits: dict[str, float | None]
    margin: Margin | None
    """The margin of the running jobs with these limits (None without a budget)."""
    lowered: float = 0.0
    """How far the limits came down: 0 not at all, 1 every limit at its floor (the job's mean
    draw, or its GPUs' lowest limit when that is higher), or the margin still broken."""


def settle(
    problem: Problem,
    draws: Iterable[JobDraw],
    params: GuardParams,
    keep: Iterable[str] = (),
    first: Iterable[str] = (),
    woken: float = 0.0,
) -> Settlement:
    """The limits (and, failing them, the jobs to queue) that keep the margin: while the plan
    breaks it, the limits come down towards the jobs' means, every job's headroom by the same
    factor (never below its GPUs' lowest limit), until the sum of limits plus idle power of
    the other GPUs fits the budget: the cap is then hard. When even the lowest limits do not
    fit, jobs are queued (those in `first`, the new starts, then the others, each by
    decreasing standard deviation; never those in `keep`), one at a time. `woken`: as for
    margin_of (a queued job's node stays counted woken: the floor is not over-promised)."""
    running = list(draws)
    kept, early = set(keep), set(first)
    order = sorted(
        (d for d in running if d.job not in kept), key=lambda d: (d.job not in early, -d.sd, d.job)
    )
    shed: list[str] = []
    while True:
        margin = margin_of(problem, running, params, woken)
        limits = {d.job: d.limit_per_gpu for d in running}
        if margin is None or margin.slack >= 0:
            return Settlement(tuple(shed), limits, margin)
        room = margin.budget - margin.predicted
        whole = [d for d in running if d.limit_per_gpu is not None]
        low = sum(max(d.floor_per_gpu * d.gpus - d.mean, 0.0) for d in whole)
        high = sum(max(d.headroom, 0.0) for d in whole)
        fixed = sum(max(d.headroom, 0.0) for d in running if d.limit_per_gpu is None)
        if room - fixed >= low:
            f = (room - fixed - low) / (high - low) if high > low else 0.0
            for d in whole:
                assert d.limit_per_gpu is not None
                floor = max(d.floor_per_gpu * d.gpus - d.mean, 0.0)
                lowered = floor + f * (max(d.headroom, 0.0) - floor)
                limits[d.job] = min(d.limit_per_gpu, (d.mean + lowered) / d.gpus)
            capped = dataclasses.replace(margin, margin=room, limited=margin.predicted + room)
            return Settlement(tuple(shed), limits, capped, min(max(1.0 - f, 0.0), 1.0))
        if not order:  # nothing left to queue: the margin stays broken, counted as at floors
            return Settlement(tuple(shed), limits, margin, 1.0)
        out = order.pop(0)
        shed.append(out.job)
        running = [d for d in running if d.job != out.job]


def expected_margin(problem: Problem, params: GuardParams, *, waiting: bool = False) -> float:
    """z x the standard deviation of the running jobs' draw as they run now: what a plan that
    keeps them will need. With `waiting`, also the variance of the largest waiting job at its
    upper draw (its GPU limit of its allowed types at their TDP), so that room is kept for it
    to start: the estimate a single-call rule must make (solver/simulate/guard.py)."""
    facts = type_facts(problem.cluster)
    variance = largest = 0.0
    installed: dict[str, int] = {}
    for node in problem.cluster.nodes:
        installed[node.gpu_type] = installed.get(node.gpu_type, 0) + node.gpu_count
    for job in problem.jobs:
        cur = job.current
        if cur is not None:
            config = resolve_config(problem, job, cur.shape, cur.sm_clock_mhz, facts)
            if config is not None:
                variance += job_draw(problem, job, config, params, facts).sd ** 2
        elif waiting:
            types = job.allowed_gpu_types or frozenset(installed)
            tdp = max((problem.cluster.gpu_types[t].tdp_watts for t in types), default=0.0)
            gpus = min(job.max_gpus, sum(installed.get(t, 0) for t in types))
            largest = max(largest, relative_uncertainty(job, params) * tdp * gpus)
    return params.z * math.sqrt(variance + largest * largest)


__all__ = [
    "MIN_POWER_LIMIT_FRACTION",
    "GuardParams",
    "JobDraw",
    "Margin",
    "Settlement",
    "expected_margin",
    "job_draw",
    "margin_of",
    "observed_ratio",
    "plan_draws",
    "power_limit",
    "power_limit_range",
    "relative_uncertainty",
    "settle",
]
