"""Exact objective change of running one job in a configuration and placement.

`Scorer.gain` is docs/objective.md for one job against leaving it queued: its configuration's
value, the locality spread of its placement, what its placement costs its node preferences, and
the migration it avoids by staying. The sum of
gains over running jobs plus a constant is the plan's objective, so moves compare gains and
never re-score a whole plan. Under a fairness mode each value also carries the configuration's
estimated worth to the fairness term (``FairnessTerms.surrogates``, exact only for per-job
proportional fairness): the search steers by it, and every plan it returns is scored exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat

from solver.domain import Config, Job, ObjectiveWeights, Problem, Shape
from solver.perfmodel import budgets
from solver.perfmodel.configs import ConfigSet
from solver.preferences import preference_cost
from solver.scoring.fairness import FairnessTerms
from solver.scoring.objective import migration_cost, running_gains
from solver.scoring.plans import Choice
from solver.search.pricing import Prices


def placement_charge(
    w: ObjectiveWeights,
    job: Job,
    c: Config,
    counts: Mapping[str, int],
    rack_of: Mapping[str, str],
) -> float:
    """What a placement of `job` in `c` (GPUs per node) costs the objective: its spread over
    more nodes and racks than the least (locality) and its GPUs on nodes the job dislikes."""
    racks = len({rack_of[n] for n in counts})
    spread = (len(counts) - c.min_nodes) + (racks - c.min_racks)
    charge = w.locality * spread
    if job.preference is not None:
        charge += w.node_preference * preference_cost(job.preference, job.max_gpus, counts)
    return charge


class Scorer:
    """Exact objective change of running one job in a configuration and placement."""

    def __init__(self, problem: Problem, configs: ConfigSet) -> None:
        self.problem = problem
        self.configs = configs
        self.jobs = {j.name: j for j in problem.jobs}
        self.order = [j.name for j in problem.jobs]
        self._rack_of = {n.name: n.rack for n in problem.cluster.nodes}
        self._choice_gains: dict[str, tuple[Choice, float]] = {}
        max_watts = problem.cluster.max_gpu_watts()
        self.value: dict[tuple[str, int], float] = {}
        self._values: dict[str, list[float]] = {}
        terms = (
            FairnessTerms(problem, configs.best_samples_per_second)
            if problem.fairness.active
            else None
        )
        fair = terms.surrogates(configs.by_job) if terms is not None else {}
        self.exact = terms is None or terms.separable()
        """Whether the gains are exact: without a fairness term, or with a separable one (per-job
        proportional fairness); otherwise they carry an estimate of F, and a move the search
        takes can lower the plan's true objective."""
        for job in problem.jobs:
            best = configs.best_samples_per_second[job.name]
            least = configs.least_joules(job.name)
            options = configs.by_job[job.name]
            gains = running_gains(job, options, best, problem.weights, max_watts, least)
            if job.name in fair:
                gains = [g + f for g, f in zip(gains, fair[job.name], strict=True)]
            self._values[job.name] = gains
            keys = zip(repeat(job.name), range(len(gains)))
            self.value.update(zip(keys, gains, strict=False))
        # Built per job on first use, so that the first greedy pass pays only for the values.
        self._positions: dict[str, dict[int, int]] = {}
        self._ranked: dict[str, list[int]] = {}
        self._variants: dict[str, dict[Shape, list[int]]] = {}
        self._extra: dict[str, list[float]] = {}
        self._costs: tuple[Prices, dict[str, list[float]]] | None = None

    def values(self, job: str) -> list[float]:
        """The running gain of each of the job's configurations, in their order."""
        return self._values[job]

    def position(self, job: str, config: Config) -> int:
        """The index of `config` among the job's configurations."""
        own = self._positions.get(job)
        if own is None:
            own = self._positions[job] = {}
            for i, c in enumerate(self.configs.by_job[job]):
                own.setdefault(id(c), i)
        found = own.get(id(config))
        return found if found is not None else self.configs.by_job[job].index(config)

    def ranked(self, job: str) -> list[int]:
        """The job's configuration indices, most valuable first (ties: enumeration order)."""
        out = self._ranked.get(job)
        if out is None:
            count = len(self.configs.by_job[job])
            out = self._ranked[job] = sorted(range(count), key=lambda i: -self.value[job, i])
        return out

    def extra(self, job: str) -> list[float]:
        """Watts over idle of each configuration of the job."""
        out = self._extra.get(job)
        if out is None:
            cluster = self.problem.cluster
            out = self._extra[job] = [
                budgets.extra_watts(cluster, c) for c in self.configs.by_job[job]
            ]
        return out

    def gain(self, job: Job, index: int, counts: Mapping[str, int], keep: bool) -> float:
        """Objective gained by running the job so, against leaving it queued."""
        c = self.configs.by_job[job.name][index]
        w = self.problem.weights
        return (
            self.value[job.name, index]
            - placement_charge(w, job, c, counts, self._rack_of)
            + (migration_cost(job, w) if keep else 0.0)
        )

    def ceiling(self, job: Job) -> float:
        """The most running the job could gain: its most valuable configuration, kept in place
        (-inf for a job without configurations)."""
        ranked = self.ranked(job.name)
        if not ranked:
            return float("-inf")
        return self.value[job.name, ranked[0]] + migration_cost(job, self.problem.weights)

    def kept(self, job: Job, config: Config, counts: Mapping[str, int]) -> bool:
        """Whether running so leaves the job on its current GPUs in its current shape."""
        return (
            job.current is not None
            and config.shape == job.current.shape
            and dict(counts) == job.current.gpus_per_node()
        )

    def choice_gain(self, job: Job, choice: Choice) -> float:
        """The gain of a job's current choice in a state (remembered while the choice is)."""
        cached = self._choice_gains.get(job.name)
        if cached is not None and cached[0] is choice:
            return cached[1]
        config, counts = choice
        g = self.gain(job, self.position(job.name, config), counts, self.kept(job, config, counts))
        self._choice_gains[job.name] = (choice, g)
        return g

    def costs(self, job: str, prices: Prices) -> list[float]:
        """What `prices` charge for each configuration of the job (kept for the last prices)."""
        if self._costs is None or self._costs[0] is not prices:
            self._costs = (prices, {})
        table = self._costs[1]
        if job not in table:
            table[job] = [
                prices.cost(c, e)
                for c, e in zip(self.configs.by_job[job], self.extra(job), strict=True)
            ]
        return table[job]

    def variants(self, job: str, config: Config) -> list[int]:
        """The job's configurations of the same shape as `config` (every clock of it)."""
        own = self._variants.get(job)
        if own is None:
            own = self._variants[job] = {}
            for i, c in enumerate(self.configs.by_job[job]):
                own.setdefault(c.shape, []).append(i)
        return own.get(config.shape, [])

    def fixed(self, job: Job) -> bool:
        """A running job that is not preemptible: it keeps its shape and GPUs."""
        return job.current is not None and not job.preemptible
