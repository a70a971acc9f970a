"""Carbon-aware rounds (docs/carbon.md): a waiting job may wait for cleaner electricity.

The rule is Let's Wait Awhile's non-interrupting shifting (Wiesner et al., Middleware 2021),
taken one round at a time. A job that is not running and may wait (its deadline leaves slack,
or it has a ``max_deferral``) is held out of this round when some later start within its
slack makes its predicted run's mean carbon intensity lower than starting now by at least the
forecast's ``min_saving``. Each round decides again on the newest forecast, so a wrong forecast
costs one round, not the job's deadline: the slack counts the run ``carbon_deadline_margin``
longer than predicted at half its largest shape on the slowest GPU type it may get, and a
node's resume time, and a job whose
slack is gone starts like any other.

A deferred job is out of the round, as a job not yet submitted would be: the plan lists it
QUEUED with reason DEFERRED, and the objective, bound and gap are those of the round without
it. Running jobs are never stopped for carbon (a restart costs more than most waits save).

With ``scale_energy``, the energy weight is scaled by the intensity now over its mean over the
next 24 h, so that dirty hours price energy higher and clocks drop.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from solver.core.settings import SolverSettings
from solver.domain import (
    Config,
    Job,
    JobAssignment,
    JobState,
    Plan,
    Problem,
    QueueReason,
    SolveResult,
)
from solver.grid import GridForecast
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.completion import ranked_for_completion

log = logging.getLogger(__name__)

Floats = npt.NDArray[np.float64]

MAX_SCALE = 10.0
"""The energy weight's scale stays within [1/10, 10]: real grids swing a few-fold within a day
(Great Britain 2020: a day's cleanest hour 0.72 of its mean), and a forecast near zero must not
make the weight, and the models' coefficients, explode."""

SCALE_WINDOW_SECONDS = 24 * 3600.0
"""The window whose mean intensity is the energy weight's reference: a day, the grid's cycle."""


@dataclasses.dataclass(frozen=True)
class Deferral:
    """The round without its deferred jobs, and why each waits."""

    problem: Problem
    held: Mapping[str, str]
    """Deferred job -> why (the queue detail)."""


def defer_for_carbon(problem: Problem, settings: SolverSettings) -> Deferral:
    """The round to solve under the snapshot's grid forecast (the problem itself without one)."""
    grid = problem.cluster.grid
    if grid is None:
        return Deferral(problem, {})
    problem = scaled_energy(problem, grid)
    candidates = [j for j in problem.jobs if j.current is None and _may_wait(j)]
    if not candidates:
        return Deferral(problem, {})
    configs = build_config_set(dataclasses.replace(problem, jobs=tuple(candidates)))
    resume = problem.cluster.power_saving
    start_up = resume.resume_seconds if resume.enabled else 0.0
    intensity = _Intensity(grid)
    held: dict[str, str] = {}
    for job in candidates:
        rate = _planning_rate(job, configs.by_job.get(job.name, ()))
        rate = rate or configs.best_samples_per_second.get(job.name, 0.0)
        if rate <= 0:
            continue  # it cannot run anyway: its own queue reason says why
        duration = job.remaining_samples / rate
        slack = _slack(job, duration, settings) - start_up
        why = _wait_reason(intensity, duration, slack, grid)
        if why:
            held[job.name] = why
    kept = tuple(j for j in problem.jobs if j.name not in held)
    return Deferral(dataclasses.replace(problem, jobs=kept), held)


def scored_round(problem: Problem, settings: SolverSettings, queued: Collection[str]) -> Problem:
    """The round a plan of `problem` is scored on, as the solver scores its own (EvaluatePlan):
    completion priorities ranked over the whole snapshot, the energy weight scaled under
    ``scale_energy``, and the jobs the rule defers left out where the plan queues them (`queued`);
    a deferred job the plan runs counts. `problem` itself without a grid forecast."""
    grid = problem.cluster.grid
    if grid is None:
        return problem
    ranked = ranked_for_completion(problem)
    out = set(defer_for_carbon(ranked, settings).held) & set(queued)
    scaled = scaled_energy(ranked, grid)
    if not out:
        return scaled
    return dataclasses.replace(scaled, jobs=tuple(j for j in scaled.jobs if j.name not in out))


def scaled_energy(problem: Problem, grid: GridForecast) -> Problem:
    """`problem` with its energy weight scaled by the intensity now over the next day's mean,
    within [1/MAX_SCALE, MAX_SCALE] (the problem itself unless the forecast asks for it)."""
    if not grid.scale_energy:
        return problem
    mean = grid.mean_carbon(0.0, SCALE_WINDOW_SECONDS)
    if not mean:
        return problem
    factor = min(max(grid.now_g_per_kwh / mean, 1 / MAX_SCALE), MAX_SCALE)
    weights = dataclasses.replace(problem.weights, energy=problem.weights.energy * factor)
    return dataclasses.replace(problem, weights=weights)


def with_deferred(problem: Problem, deferral: Deferral, result: SolveResult) -> SolveResult:
    """`result` (a solve of ``deferral.problem``) with the deferred jobs queued, checked
    against `problem`; `result` itself when nothing was deferred."""
    if not deferral.held:
        return result
    plan = plan_with_deferred(deferral, result.plan)
    violations = check_plan(problem, plan.assignments, plan.layout_changes, plan.power_actions)
    if violations:  # cannot happen: a waiting job queued breaks no rule
        raise AssertionError(f"deferred plan rejected by the checker: {violations[0]}")
    now = deferral.problem.cluster.grid.now_g_per_kwh if deferral.problem.cluster.grid else 0.0
    note = f"carbon: {len(deferral.held)} jobs deferred (intensity now {now:.0f} gCO2/kWh)"
    s = result.stats
    stats = dataclasses.replace(s, detail=f"{s.detail}; {note}" if s.detail else note)
    return dataclasses.replace(result, plan=plan, stats=stats)


def plan_with_deferred(deferral: Deferral, plan: Plan) -> Plan:
    """`plan` (of ``deferral.problem``) with the deferred jobs queued, reason DEFERRED."""
    if not deferral.held:
        return plan
    held = [
        JobAssignment(job, JobState.QUEUED, queue_reason=QueueReason.DEFERRED, queue_detail=why)
        for job, why in deferral.held.items()
    ]
    return dataclasses.replace(plan, assignments=(*plan.assignments, *held))


def plans_with_deferred(
    deferral: Deferral, told: Callable[[Plan], None] | None
) -> Callable[[Plan], None] | None:
    """`told`, given plans sent ahead with the deferred jobs queued: the service answers with
    the last one when a solve's worker dies, and that answer must list every job."""
    if told is None or not deferral.held:
        return told
    hook = told

    def tell(plan: Plan) -> None:
        hook(plan_with_deferred(deferral, plan))

    return tell


def _planning_rate(job: Job, configs: Sequence[Config]) -> float:
    """The rate a deferred job's deadline is planned on: on the slowest GPU type it may get,
    its best with at most half its largest GPU count (never below its smallest). A job that
    waited for the same clean hours as others rarely gets its largest shape or the fastest
    type, and the model's speed-ups across types are its largest errors (docs/calibration.md);
    0 without such a configuration."""
    usable = max(job.min_gpus, job.max_gpus // 2)
    best: dict[str, float] = {}
    for c in configs:  # tens of thousands a round: the shape's fields, not its properties
        shape = c.shape
        if shape.data_parallel * shape.tensor_parallel * shape.pipeline_parallel > usable:
            continue
        if not c.mig_profile and c.samples_per_second > best.get(shape.gpu_type, 0.0):
            best[shape.gpu_type] = c.samples_per_second
    return min(best.values(), default=0.0)


def _may_wait(job: Job) -> bool:
    return job.deadline_seconds is not None or job.max_deferral_seconds is not None


def _slack(job: Job, duration: float, settings: SolverSettings) -> float:
    """How long the job may still wait: the tighter of its deadline's slack (the run taken
    ``carbon_deadline_margin`` longer) and what is left of its max_deferral."""
    slack = float("inf")
    if job.deadline_seconds is not None:
        slack = job.deadline_seconds - duration * (1 + settings.carbon_deadline_margin)
    if job.max_deferral_seconds is not None:
        slack = min(slack, job.max_deferral_seconds - job.age_seconds)
    return slack


class _Intensity:
    """The forecast as arrays, for the mean intensity of one run at many starts at once:
    thousands of waiting jobs, each with up to a month of hourly starts, within a round."""

    def __init__(self, grid: GridForecast) -> None:
        periods = list(grid.periods())
        self.starts = np.array([a for a, _, _ in periods])
        self.carbon = np.array([p.carbon_g_per_kwh for _, _, p in periods])
        ends = np.array([b for _, b, _ in periods])
        self.cumulative = np.concatenate(([0.0], np.cumsum((ends - self.starts) * self.carbon)))
        self.end = grid.end_seconds
        self.fill = self.cumulative[-1] / self.end if self.end > 0 else float(self.carbon[0])
        """Unknown hours after the forecast count at its mean."""

    def _period(self, t: Floats) -> npt.NDArray[np.intp]:
        return np.maximum(np.searchsorted(self.starts, t, side="right") - 1, 0)

    def _integral(self, t: Floats) -> Floats:
        inside = np.minimum(t, self.end)
        i = self._period(inside)
        known = self.cumulative[i] + (inside - self.starts[i]) * self.carbon[i]
        out: Floats = known + np.maximum(t - self.end, 0.0) * self.fill
        return out

    def run_means(self, starts: Floats, duration: float) -> Floats:
        """Mean intensity of a run of `duration` s from each of `starts` (within the forecast)."""
        if duration <= 0:
            out: Floats = self.carbon[self._period(starts)]
            return out
        means: Floats = (self._integral(starts + duration) - self._integral(starts)) / duration
        return means


def _wait_reason(intensity: _Intensity, duration: float, slack: float, grid: GridForecast) -> str:
    """Why the job should wait, or "" to start now. The start (now or a period's start within
    the slack) that saves the most of its run's carbon net of ``saving_per_delay`` per
    run-length of waiting (per hour for a run of unknown length); the job waits for it when it
    is later and saves at least ``min_saving``."""
    if slack <= 0:
        return ""
    starts = intensity.starts[intensity.starts <= slack]
    means = intensity.run_means(starts, duration)
    now = float(means[0])
    if now <= 0:
        return ""
    saving = 1.0 - means / now
    net = saving - grid.saving_per_delay * starts / (duration if duration > 0 else 3600.0)
    k = int(np.argmax(net))  # the first of equal values: the earliest start
    best_start, best = float(starts[k]), float(means[k])
    if best_start == 0 or net[k] <= 0 or saving[k] < grid.min_saving:
        return ""
    return (
        f"carbon: a start in {best_start / 3600:.1f} h runs at {best:.0f} gCO2/kWh on average "
        f"against {now:.0f} for a start now (slack {slack / 3600:.1f} h)"
    )
