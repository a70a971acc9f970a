"""The fairness term F of the objective (docs/objective.md, "Fairness"): its single definition.

Every mode compares *entities* (jobs, or tenant queues with their jobs) on a row each: the
entity's value with all its jobs queued (``Row.intercept``, from its attained service) plus
what each of its running jobs adds in its configuration (``terms``); under DRF the largest of
its shares of one resource (a GPU type, the watts) over its fair share, at most 1. F aggregates the
rows: the least row (max-min, DRF, finish-time fairness), plus ``mean_weight`` times the mean
row so that every entity counts, or the weighted sum of ``ln(1 + row)`` (proportional
fairness). Plans are scored with ``FairnessTerms.value``; the
full model maximises the same rows exactly (solver.exact.fairness); the search reads
``surrogate`` (a separable estimate of each configuration's worth to F) and the bounds add
``upper_bound``, a proven bound on F alone.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from solver.domain import (
    DEFAULT_QUEUE,
    AttainedService,
    Config,
    Fairness,
    FairnessMode,
    FairnessScope,
    Job,
    Problem,
)
from solver.fairness import LEAST_ROW_MODES, fair_entitlements

POWER = "power budget"
"""DRF's name of the watts resource beside the GPU types."""
SUM_LOG_MODES = frozenset({FairnessMode.PROPORTIONAL})
"""Modes whose F is a weighted sum of logs; the others take the least row."""


@dataclass(frozen=True)
class Row:
    """One entity's linear value: intercept + sum over its jobs of terms[job](config)."""

    entity: str
    weight: float
    intercept: float
    jobs: tuple[Job, ...]


class FairnessTerms:
    """F of one problem: its entities' rows and how they aggregate.

    `best` is each job's best samples/s on an empty cluster (0: the job cannot run; it is no
    entity's demand)."""

    def __init__(self, problem: Problem, best: Mapping[str, float]) -> None:
        self.mode = problem.fairness.mode
        self.scope = problem.fairness.scope
        self.weight = problem.weights.fairness
        self.horizon = problem.fairness.horizon_seconds
        self.mean_weight = problem.fairness.mean_weight if self.mode in LEAST_ROW_MODES else 0.0
        cluster = problem.cluster
        demand = [j for j in problem.jobs if best.get(j.name, 0.0) > 0]
        if self.mode is FairnessMode.FINISH_TIME:
            demand = [j for j in demand if j.remaining_samples > 0]
        self._gpus = max(sum(n.available_gpus for n in cluster.nodes), 1)
        self._type_gpus = {
            t: sum(n.available_gpus for n in cluster.nodes if n.gpu_type == t)
            for t in cluster.gpu_types
        }
        self._budget = cluster.power_budget_watts
        share = problem.fairness.equal_share_gpus or equal_share_gpus(problem, best)
        self._equal_rate = {
            j.name: best[j.name] * min(1.0, share / max(j.min_gpus, 1)) for j in demand
        }
        groups: dict[str, list[Job]] = {}
        for j in demand:
            groups.setdefault(self._entity_of(j), []).append(j)
        weights = {e: self._entity_weight(e, members, problem) for e, members in groups.items()}
        total_weight = sum(weights.values()) or 1.0
        mean_entity_weight = total_weight / max(len(weights), 1)
        entitled = fair_entitlements(
            {
                e: min(1.0, sum(j.max_gpus for j in members) / self._gpus)
                for e, members in groups.items()
            },
            weights,
        )
        self.rows: list[Row] = []
        self._scale: dict[str, float] = {}
        """Per entity: the factor of its jobs' terms."""
        for e, members in groups.items():
            w = weights[e]
            attained = self._attained(e, members, problem)
            if self.mode is FairnessMode.MAX_MIN:
                scale, intercept = 1.0 / w, attained.normalized_seconds / (self.horizon * w)
            elif self.mode is FairnessMode.DRF:  # this plan's share over the fair one
                scale, intercept = 1.0 / entitled[e], 0.0
            elif self.mode is FairnessMode.FINISH_TIME:
                scale = -(w / mean_entity_weight) / len(members)
                intercept = scale * sum(self._rho(j, None) for j in members)
            else:  # PROPORTIONAL: rounds of equal-share service
                scale, intercept = 1.0, attained.normalized_seconds / self.horizon
            self._scale[e] = scale
            self.rows.append(Row(e, w, intercept, tuple(members)))
        self._row_of_job = {j.name: r for r in self.rows for j in r.jobs}
        self._held: dict[str, dict[str, float]] = {}
        """DRF: per entity, its running jobs' shares of each GPU type as the snapshot has them."""
        if self.mode is FairnessMode.DRF:
            for j in demand:
                if j.current is not None:
                    gpu_type, share = self._current_share(j)
                    held = self._held.setdefault(self._entity_of(j), {})
                    held[gpu_type] = held.get(gpu_type, 0.0) + share

    # ------------------------------------------------------------ entities

    def _entity_of(self, job: Job) -> str:
        if self.scope is FairnessScope.JOB:
            return job.name
        return job.tenant or DEFAULT_QUEUE

    def _entity_weight(self, entity: str, members: Sequence[Job], problem: Problem) -> float:
        if self.scope is FairnessScope.JOB:
            return members[0].weight
        queue = problem.cluster.queue_of(entity)
        return queue.weight if queue is not None else 1.0

    def _attained(self, entity: str, members: Sequence[Job], problem: Problem) -> AttainedService:
        """A job's own; a declared queue's as the snapshot says; else its present jobs' sum."""
        if self.scope is FairnessScope.JOB:
            return members[0].attained
        queue = problem.cluster.queue_of(entity)
        if queue is not None and queue.name == entity:
            return queue.attained
        return AttainedService(
            sum(j.attained.gpu_seconds for j in members),
            sum(j.attained.normalized_seconds for j in members),
        )

    # ------------------------------------------------------------ per configuration

    def usage(self, config: Config) -> tuple[tuple[str, float], ...]:
        """DRF's resources a configuration takes, as shares: its GPU type's GPUs, and the
        cluster power budget's watts (``POWER``) when there is one."""
        gpus = config.num_gpus / max(self._type_gpus.get(config.gpu_type, 0), 1)
        if self._budget is None or self._budget <= 0:
            return ((config.gpu_type, gpus),)
        return (config.gpu_type, gpus), (POWER, config.watts / self._budget)

    def _current_share(self, job: Job) -> tuple[str, float]:
        """The GPU type of a running job's allocation and its share of the type's GPUs."""
        assert job.current is not None
        gpu_type = job.current.shape.gpu_type
        return gpu_type, job.current.shape.num_gpus / max(self._type_gpus.get(gpu_type, 0), 1)

    def _drf_row(self, entity: str, totals: Mapping[str, float]) -> float:
        """DRF's row: the entity's dominant share (its largest total share of a resource)
        over its fair share, at most 1 (at its fair share an entity asks no more)."""
        return min(1.0, self._scale[entity] * max(totals.values(), default=0.0))

    def _drf_totals(self, row: Row, chosen: Mapping[str, Config]) -> dict[str, float]:
        totals: dict[str, float] = {}
        for j in row.jobs:
            if j.name in chosen:
                for resource, share in self.usage(chosen[j.name]):
                    totals[resource] = totals.get(resource, 0.0) + share
        return totals

    def _rho(self, job: Job, config: Config | None) -> float:
        """Themis' finish-time fairness: time to finish shared (elapsed + remaining at this
        rate; queued: after this horizon at the equal share) over time to finish on an equal
        share (service so far at it + remaining)."""
        equal = self._equal_rate[job.name]
        ideal = job.attained.normalized_seconds + job.remaining_samples / equal
        if config is None:
            shared = job.age_seconds + self.horizon + job.remaining_samples / equal
        else:
            shared = job.age_seconds + job.remaining_samples / config.samples_per_second
        return shared / ideal

    def term(self, job: Job, config: Config) -> float:
        """What running `job` in `config` adds to its entity's row."""
        return self.terms(job, (config,))[0]

    def terms(self, job: Job, configs: Sequence[Config]) -> list[float]:
        """What running `job` in each configuration adds to its entity's row (normalized
        rate or change of rho, times the entity's scale; under DRF, ``_drf_gains``); zeros for
        a job that is no entity's demand."""
        row = self._row_of_job.get(job.name)
        if row is None:
            return [0.0] * len(configs)
        scale = self._scale[row.entity]
        if self.mode is FairnessMode.DRF:
            return self._drf_gains(row.entity, job, configs, scale)
        if self.mode is FairnessMode.FINISH_TIME:
            equal = self._equal_rate[job.name]
            ideal = job.attained.normalized_seconds + job.remaining_samples / equal
            queued = self._rho(job, None)
            age, rem = job.age_seconds, job.remaining_samples
            return [scale * ((age + rem / c.samples_per_second) / ideal - queued) for c in configs]
        rate = scale / self._equal_rate[job.name]
        return [rate * c.samples_per_second for c in configs]

    def _drf_gains(
        self, entity: str, job: Job, configs: Sequence[Config], scale: float
    ) -> list[float]:
        """DRF: how much each configuration raises the entity's row with its other jobs where
        the snapshot has them running: its share of a resource counts where it takes the
        entity past its largest share, up to the fair share (the row's cap). So the search
        grows a tenant below its fair share on the resource it holds most of, not across
        types (summing the jobs' own dominant shares would count a tenant spread over four
        types four times), and leaves a tenant at its fair share to throughput. With nothing
        running it is the configuration's dominant share over the fair share, capped at 1."""
        held = dict(self._held.get(entity, {}))
        if job.current is not None:
            gpu_type, own = self._current_share(job)
            held[gpu_type] = held.get(gpu_type, 0.0) - own
        top = max(held.values(), default=0.0)
        room = max(0.0, 1.0 - scale * top)
        return [
            min(room, scale * max(0.0, *(held.get(r, 0.0) + s - top for r, s in self.usage(c))))
            for c in configs
        ]

    # ------------------------------------------------------------ F

    def row_values(self, chosen: Mapping[str, Config]) -> dict[str, float]:
        """Each entity's row for the running jobs' configurations in `chosen`."""
        out = {}
        for r in self.rows:
            if self.mode is FairnessMode.DRF:
                out[r.entity] = self._drf_row(r.entity, self._drf_totals(r, chosen))
                continue
            out[r.entity] = r.intercept + sum(
                self.term(j, chosen[j.name]) for j in r.jobs if j.name in chosen
            )
        return out

    def aggregate(self, values: Mapping[str, float]) -> float:
        """F from the rows' values."""
        if not self.rows:
            return 0.0
        if self.mode in SUM_LOG_MODES:
            return sum(r.weight * math.log1p(max(values[r.entity], 0.0)) for r in self.rows)
        least = min(values.values())
        if not self.mean_weight:
            return least
        return least + self.mean_weight * sum(values.values()) / len(values)

    def value(self, chosen: Mapping[str, Config]) -> float:
        """F of a plan whose running jobs have these configurations."""
        return self.aggregate(self.row_values(chosen))

    def upper_bound(self, configs: Mapping[str, Sequence[Config]]) -> float:
        """A proven bound on F: every entity's jobs at once at their largest term among
        `configs` (0 if none is positive), capacity aside; under DRF, each resource's
        largest share per job."""
        if self.mode is FairnessMode.DRF:
            return self.aggregate({r.entity: self._drf_top(r, configs) for r in self.rows})
        tops = {
            r.entity: r.intercept
            + sum(max([0.0, *self.terms(j, configs.get(j.name, ()))]) for j in r.jobs)
            for r in self.rows
        }
        return self.aggregate(tops)

    def _drf_top(self, row: Row, configs: Mapping[str, Sequence[Config]]) -> float:
        totals: dict[str, float] = {}
        for j in row.jobs:
            most: dict[str, float] = {}
            for c in configs.get(j.name, ()):
                for resource, share in self.usage(c):
                    most[resource] = max(most.get(resource, 0.0), share)
            for resource, share in most.items():
                totals[resource] = totals.get(resource, 0.0) + share
        return self._drf_row(row.entity, totals)

    def drf_scale(self, entity: str) -> float:
        """DRF: the factor of an entity's shares in its row (one over its fair share)."""
        return self._scale[entity]

    # ------------------------------------------------------------ for the search

    def _level(self, row: Row) -> float:
        """The entity's row with nothing changed: its intercept; under DRF (no memory), its
        share as the snapshot's running jobs hold it."""
        if self.mode is FairnessMode.DRF:
            return self._drf_row(row.entity, self._held.get(row.entity, {}))
        return row.intercept

    def separable(self) -> bool:
        """Whether F is a sum over jobs (per-job proportional fairness): then ``surrogates``
        are exact, and the full model needs no epigraph."""
        return self.mode in SUM_LOG_MODES and self.scope is FairnessScope.JOB

    def surrogates(self, configs: Mapping[str, Sequence[Config]]) -> dict[str, list[float]]:
        """Per job, each configuration's estimated worth to weight x F over leaving it queued.

        Exact when ``separable``. For a sum of logs, the log's slope at the entity's
        intercept. For the least row, the term scaled by how close the entity's row with
        nothing changed (``_level``) is to the least one, exp(-distance / a typical job's
        largest term): the entities a plan can lift off the bottom count most, those far
        above it hardly at all; plus the mean row's share of the term, which is exact."""
        terms = {j.name: self.terms(j, configs.get(j.name, ())) for r in self.rows for j in r.jobs}
        out: dict[str, list[float]] = {}
        if self.mode in SUM_LOG_MODES:
            for r in self.rows:
                base = math.log1p(max(r.intercept, 0.0))
                slope = self.weight * r.weight / (1.0 + max(r.intercept, 0.0))
                for j in r.jobs:
                    if self.separable():
                        out[j.name] = [
                            self.weight * r.weight * (math.log1p(max(r.intercept + t, 0.0)) - base)
                            for t in terms[j.name]
                        ]
                    else:
                        out[j.name] = [slope * t for t in terms[j.name]]
            return out
        sizes = [max(map(abs, ts), default=0.0) for ts in terms.values()]
        typical = max(statistics.median(sizes) if sizes else 1.0, 1e-9)
        levels = {r.entity: self._level(r) for r in self.rows}
        lowest = min(levels.values(), default=0.0)
        mean_share = self.mean_weight / max(len(self.rows), 1)
        for r in self.rows:
            factor = self.weight * (math.exp(-(levels[r.entity] - lowest) / typical) + mean_share)
            for j in r.jobs:
                out[j.name] = [factor * t for t in terms[j.name]]
        return out


def equal_share_gpus(problem: Problem, best: Mapping[str, float] | None) -> float:
    """Available GPUs over the jobs that can run (every job when `best` is unknown): an equal
    1/n share of the cluster."""
    gpus = sum(n.available_gpus for n in problem.cluster.nodes)
    jobs = [j for j in problem.jobs if best is None or best.get(j.name, 0.0) > 0]
    return max(gpus, 1) / max(len(jobs), 1)


def part_fairness(problem: Problem, best: Mapping[str, float] | None) -> Fairness:
    """The fairness policy of a part of `problem`: its equal share pinned to the whole's."""
    if not problem.fairness.active:
        return problem.fairness
    return dataclasses.replace(
        problem.fairness,
        equal_share_gpus=problem.fairness.equal_share_gpus or equal_share_gpus(problem, best),
    )


def fairness_value(
    problem: Problem, best: Mapping[str, float], chosen: Iterable[tuple[str, Config]]
) -> float:
    """F of a plan (0 under WEIGHTED_SUM)."""
    if not problem.fairness.active:
        return 0.0
    return FairnessTerms(problem, best).value(dict(chosen))


def fairness_headroom(
    problem: Problem, configs: Mapping[str, Sequence[Config]], best: Mapping[str, float]
) -> float:
    """A proven bound on weight x F (0 under WEIGHTED_SUM): what to add to a bound of the
    objective without its fairness term."""
    if not problem.fairness.active:
        return 0.0
    return problem.weights.fairness * FairnessTerms(problem, best).upper_bound(configs)
