"""Fast heuristic: greedy by value per GPU and watt, best-fit placement, then local search.

It always returns a valid plan in milliseconds to a few hundred milliseconds, so the service
has an answer before any exact model starts, and the exact model gets it as a hint.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from solver.domain import Config, Job, Plan, Problem
from solver.model.configs import ConfigSet
from solver.scoring.objective import migration_cost, running_gain
from solver.scoring.plans import Choice, materialize
from solver.search.placement import Placer

GPU_PRICES = (0.0, 0.02, 0.05, 0.1, 0.2)
"""Shadow prices per GPU (in units of a job's weighted utility) tried by the greedy passes.

A price of 0 lets every job take its most valuable configuration; higher prices favour
smaller configurations so that more jobs fit. The best of the passes is kept.
"""
IMPROVE_PASSES = 3
"""Local-search passes over the jobs at most (each stops early once no job moves)."""
MANY_JOBS = 1024
"""Above this many jobs only the first two prices are tried."""


class _State:
    """Free GPUs per node and power drawn, as the greedy fills the cluster."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.placer = Placer(problem.cluster)
        self.job_watts = 0.0
        self.rack_watts: dict[str, float] = {}
        self.choices: dict[str, Choice] = {}
        cluster = problem.cluster
        self.idle_total = 0.0
        self.idle_rack: dict[str, float] = {}
        for n in cluster.nodes:
            idle = n.gpu_count * cluster.gpu_types[n.gpu_type].idle_watts
            self.idle_total += idle
            self.idle_rack[n.rack] = self.idle_rack.get(n.rack, 0.0) + idle

    def _rack_delta(self, config: Config, counts: Mapping[str, int]) -> dict[str, float]:
        cluster = self.problem.cluster
        idle = cluster.gpu_types[config.gpu_type].idle_watts
        per_gpu = config.watts / config.num_gpus - idle
        delta: dict[str, float] = {}
        for node, k in counts.items():
            rack = cluster.node(node).rack
            delta[rack] = delta.get(rack, 0.0) + per_gpu * k
        return delta

    def power_ok(self, config: Config, counts: Mapping[str, int]) -> bool:
        cluster = self.problem.cluster
        idle = cluster.gpu_types[config.gpu_type].idle_watts
        extra = config.watts - idle * config.num_gpus
        if cluster.power_budget_watts is not None and (
            self.idle_total + self.job_watts + extra > cluster.power_budget_watts
        ):
            return False
        if not cluster.rack_power_budgets_watts:
            return True
        for rack, d in self._rack_delta(config, counts).items():
            budget = cluster.rack_power_budgets_watts.get(rack)
            if budget is not None and (
                self.idle_rack[rack] + self.rack_watts.get(rack, 0.0) + d > budget
            ):
                return False
        return True

    def take(self, job: str, config: Config, counts: Mapping[str, int]) -> None:
        idle = self.problem.cluster.gpu_types[config.gpu_type].idle_watts
        self.placer.take(counts)
        self.job_watts += config.watts - idle * config.num_gpus
        for rack, d in self._rack_delta(config, counts).items():
            self.rack_watts[rack] = self.rack_watts.get(rack, 0.0) + d
        self.choices[job] = (config, dict(counts))

    def release(self, job: str) -> None:
        config, counts = self.choices.pop(job)
        idle = self.problem.cluster.gpu_types[config.gpu_type].idle_watts
        self.placer.give(counts)
        self.job_watts -= config.watts - idle * config.num_gpus
        for rack, d in self._rack_delta(config, counts).items():
            self.rack_watts[rack] -= d

    def fit(self, job: Job, config: Config) -> tuple[dict[str, int], bool] | None:
        """GPUs per node for the job in `config`, and whether it stays where it runs."""
        counts = _keep_counts(job, config, self.placer)
        if counts is not None:
            return counts, True
        if config.kept_only:
            return None
        placed = self.placer.place(config.gpu_type, config.num_gpus, config.tensor_parallel)
        return (placed, False) if placed is not None else None


def place(problem: Problem, free: Mapping[str, int], config: Config) -> dict[str, int] | None:
    """Best-fit placement of `config` given free GPUs per node (see solver.search.placement)."""
    return Placer(problem.cluster, free).place(
        config.gpu_type, config.num_gpus, config.tensor_parallel
    )


def _keep_counts(job: Job, config: Config, placer: Placer) -> dict[str, int] | None:
    """The job's current GPUs, if the configuration has its current shape and they are free."""
    if job.current is None or config.shape != job.current.shape:
        return None
    counts = job.current.gpus_per_node()
    if placer.fits(counts):
        return counts
    return None


class Heuristic:
    """Greedy passes at several GPU prices, each followed by local search; keeps the best."""

    name = "heuristic"

    def __init__(self, problem: Problem, configs: ConfigSet) -> None:
        self.problem = problem
        self.configs = configs
        self.jobs = {j.name: j for j in problem.jobs}
        self.first_plan_at: float | None = None
        self.pass_seconds = 0.0
        """Duration of one greedy pass with its plan: what another pass will roughly take."""
        """time.monotonic() when the first complete plan existed."""
        max_watts = problem.cluster.max_gpu_watts()
        self.value: dict[tuple[str, int], float] = {}
        for job in problem.jobs:
            best = configs.best_samples_per_second[job.name]
            for i, c in enumerate(configs.by_job[job.name]):
                self.value[job.name, i] = running_gain(job, c, best, problem.weights, max_watts)

    def gain(self, job: Job, index: int, counts: Mapping[str, int], keep: bool) -> float:
        """Objective gained by running the job so, against leaving it queued."""
        c = self.configs.by_job[job.name][index]
        nodes = len(counts)
        racks = len({self.problem.cluster.node(n).rack for n in counts})
        spread = (nodes - c.min_nodes) + (racks - c.min_racks)
        return (
            self.value[job.name, index]
            - self.problem.weights.locality * spread
            + (migration_cost(job, self.problem.weights) if keep else 0.0)
        )

    def best_move(
        self, state: _State, job: Job, price: float
    ) -> tuple[float, int, dict[str, int]] | None:
        """The job's configuration of most priced gain that fits now."""
        best: tuple[float, int, dict[str, int]] | None = None
        for i, c in enumerate(self.configs.by_job[job.name]):
            upper = self.value[job.name, i] + migration_cost(job, self.problem.weights)
            if best is not None and upper - price * c.num_gpus <= best[0]:
                continue
            fitted = state.fit(job, c)
            if fitted is None or not state.power_ok(c, fitted[0]):
                continue
            counts, keep = fitted
            g = self.gain(job, i, counts, keep) - price * c.num_gpus
            if g > 0 and (best is None or g > best[0]):
                best = (g, i, counts)
        return best

    def greedy(self, price: float) -> _State:
        state = _State(self.problem)
        fixed = [j for j in self.problem.jobs if j.current is not None and not j.preemptible]
        for job in fixed:
            self._place_fixed(state, job)
        running = [j for j in self.problem.jobs if j.current is not None and j.preemptible]
        waiting = [j for j in self.problem.jobs if j.current is None]
        for group in (running, waiting):
            order = sorted(group, key=lambda j: -self._density(j, price))
            for job in order:
                move = self.best_move(state, job, price)
                if move is not None:
                    state.take(job.name, self.configs.by_job[job.name][move[1]], move[2])
        return state

    def _place_fixed(self, state: _State, job: Job) -> None:
        """A non-preemptible job keeps its GPUs; only its clock is chosen, by value."""
        assert job.current is not None
        options = [
            (self.value[job.name, i], i)
            for i, c in enumerate(self.configs.by_job[job.name])
            if c.shape == job.current.shape
        ]
        counts = job.current.gpus_per_node()
        for _, i in sorted(options, reverse=True):
            c = self.configs.by_job[job.name][i]
            if state.power_ok(c, counts):
                state.take(job.name, c, counts)
                return
        if options:  # over the power budget whatever the clock: keep it at the lowest.
            c = min((self.configs.by_job[job.name][i] for _, i in options), key=lambda c: c.watts)
            state.take(job.name, c, counts)

    def _density(self, job: Job, price: float) -> float:
        configs = self.configs.by_job[job.name]
        return max(
            (
                (self.value[job.name, i] - price * c.num_gpus) / c.num_gpus
                for i, c in enumerate(configs)
            ),
            default=float("-inf"),
        )

    def improve(self, state: _State, deadline: float, passes: int = IMPROVE_PASSES) -> None:
        """Re-insert each job at its best configuration given the others, until no gain or
        `passes` passes: a work limit, so the result does not depend on the machine's speed.
        `deadline` is only a safety stop."""
        improved = True
        while improved and passes > 0 and time.monotonic() < deadline:
            passes -= 1
            improved = False
            for job in self.problem.jobs:
                if time.monotonic() >= deadline:
                    return
                if job.current is not None and not job.preemptible:
                    continue
                before = state.choices.get(job.name)
                old_gain = 0.0
                if before is not None:
                    index = self.configs.by_job[job.name].index(before[0])
                    keep = (
                        job.current is not None
                        and before[0].shape == job.current.shape
                        and dict(before[1]) == job.current.gpus_per_node()
                    )
                    old_gain = self.gain(job, index, before[1], keep)
                    state.release(job.name)
                move = self.best_move(state, job, 0.0)
                if move is not None and move[0] > old_gain + 1e-9:
                    state.take(job.name, self.configs.by_job[job.name][move[1]], move[2])
                    improved = True
                elif before is not None:
                    state.take(job.name, before[0], before[1])

    def guided(self, choice: Mapping[str, Config]) -> _State:
        """Greedy that first tries the given configurations (an aggregated model's solution)."""
        state = _State(self.problem)
        for job in self.problem.jobs:
            if job.current is not None and not job.preemptible:
                self._place_fixed(state, job)
        order = sorted(
            (j for j in self.problem.jobs if j.name in choice and j.name not in state.choices),
            key=lambda j: (j.current is None, -self._density(j, 0.0)),
        )
        for job in order:
            c = choice[job.name]
            fitted = state.fit(job, c)
            if fitted is not None and state.power_ok(c, fitted[0]):
                state.take(job.name, c, fitted[0])
        for job in sorted(self.problem.jobs, key=lambda j: -self._density(j, 0.0)):
            if job.name not in state.choices:
                move = self.best_move(state, job, 0.0)
                if move is not None:
                    state.take(job.name, self.configs.by_job[job.name][move[1]], move[2])
        return state

    def run(self, deadline: float) -> Plan:
        """Greedy and local search at each GPU price (the first two only for many jobs); the
        best plan. `deadline` only stops work that runs far over its usual time."""
        best_plan: Plan | None = None
        started = time.monotonic()
        prices = GPU_PRICES if len(self.problem.jobs) <= MANY_JOBS else GPU_PRICES[:2]
        for price in prices:
            state = self.greedy(price)
            if best_plan is not None:
                self.improve(state, deadline)
            plan = materialize(self.problem, self.configs, dict(state.choices))
            if best_plan is None:
                self.first_plan_at = time.monotonic()
                self.pass_seconds = self.first_plan_at - started
                self.improve(state, deadline)
                plan = materialize(self.problem, self.configs, dict(state.choices))
            if best_plan is None or plan.objective.total > best_plan.objective.total + 1e-12:
                best_plan = plan
            if time.monotonic() >= deadline:
                break
        assert best_plan is not None
        return best_plan

    def complete(self, choices: Mapping[str, Choice], deadline: float) -> Plan:
        """Start from `choices` (valid together), start what else fits, then local search."""
        state = _State(self.problem)
        for name, (config, counts) in choices.items():
            state.take(name, config, counts)
        for job in sorted(self.problem.jobs, key=lambda j: -self._density(j, 0.0)):
            if job.name not in state.choices:
                move = self.best_move(state, job, 0.0)
                if move is not None:
                    state.take(job.name, self.configs.by_job[job.name][move[1]], move[2])
        self.improve(state, deadline)
        return materialize(self.problem, self.configs, dict(state.choices))

    def run_guided(self, choice: Mapping[str, Config], deadline: float) -> Plan:
        state = self.guided(choice)
        self.improve(state, deadline)
        return materialize(self.problem, self.configs, dict(state.choices))


def solve_heuristic(problem: Problem, configs: ConfigSet, deadline: float) -> Plan:
    """The heuristic's plan; `deadline` (a time.monotonic() instant) bounds the local search."""
    return Heuristic(problem, configs).run(deadline)
