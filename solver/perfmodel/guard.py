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

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from solver.domain import Config, GpuType, Job, JobAssignment, JobState, Problem, ThroughputProfile
from solver.perfmodel.budgets import idle_watts
from solver.perfmodel.configs import TypeFacts, resolve_config, type_facts

MIN_POWER_LIMIT_FRACTION = 0.3923
"""Lowest supported power limit over TDP, where the catalog has no figure: the median over the
four GPUs of the Zeus sweeps (data/zeus) of the lowest limit swept over the highest (A40
100/300 W, P100 125/250 W, RTX 6000 100/260 W, V100 100/250 W: 0.333, 0.5, 0.385, 0.4)."""


@dataclass(frozen=True)
class GuardParams:
    """How the margin and the limits are sized (``SolverSettings.power_guard``)."""

    z: float = 2.5
    """Standard deviations of the planned draw kept below the budget (2.5: a one-sided normal
    tail of 0.6 %); 0 turns the margin off (the budget alone binds)."""
    model_uncertainty: float = 0.15
    """Relative standard deviation of a model-only power prediction."""
    measured_uncertainty: float = 0.05
    """... of a measured profile's watts."""
    observed_uncertainty: float = 0.03
    """... of a job whose current allocation carries its observed watts."""
    limit_z: float = 2.0
    """A job's power limit sits this many of its standard deviations above its mean draw."""


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
    return JobDraw(job.name, mean, sd, gpu.idle_watts * n, n, limit)


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


def margin_of(problem: Problem, draws: Iterable[JobDraw], params: GuardParams) -> Margin | None:
    """The margin of a plan's running jobs; None without a cluster budget."""
    budget = problem.cluster.power_budget_watts
    if budget is None:
        return None
    base = idle_watts(problem.cluster)
    predicted = limited = base
    variance = 0.0
    for d in draws:
        predicted += d.mean - d.idle
        variance += d.sd * d.sd
        capped = d.limit_per_gpu * d.gpus if d.limit_per_gpu is not None else d.mean
        limited += capped - d.idle
    return Margin(budget, predicted, params.z * math.sqrt(variance), limited, params.z)


def to_shed(
    margin: Margin, draws: Iterable[JobDraw], keep: Iterable[str], first: Iterable[str]
) -> list[str]:
    """Jobs to queue so that the margin holds: those in `first` (jobs that did not run before)
    then the others, each by decreasing standard deviation, never those in `keep`
    (non-preemptible); stops as soon as the margin holds. May not reach it (all kept)."""
    kept, early = set(keep), set(first)
    order = sorted(
        (d for d in draws if d.job not in kept), key=lambda d: (d.job not in early, -d.sd, d.job)
    )
    predicted = margin.predicted
    variance = (margin.margin / margin.z) ** 2 if margin.z > 0 else 0.0
    out: list[str] = []
    for d in order:
        if predicted + margin.z * math.sqrt(max(variance, 0.0)) <= margin.budget:
            break
        out.append(d.job)
        predicted -= d.mean - d.idle
        variance -= d.sd * d.sd
    return out


__all__ = [
    "MIN_POWER_LIMIT_FRACTION",
    "GuardParams",
    "JobDraw",
    "Margin",
    "job_draw",
    "margin_of",
    "observed_ratio",
    "plan_draws",
    "power_limit",
    "power_limit_range",
    "relative_uncertainty",
    "to_shed",
]
