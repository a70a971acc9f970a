"""Fast heuristic: priced greedy passes with best-fit placement, then local search.

The first pass (no prices, then re-insertion) gives the first plan in milliseconds, so the
service has an answer before anything else runs. Further passes charge uniform GPU prices and
the aggregated model's dual prices (per GPU type and per watt, solver.search.pricing); the local
search of solver.search.local (clock changes, re-placement, admission with a clock repair,
swaps) improves the best of them, and the exact model gets the result as a hint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from solver.domain import Config, Job, Plan, Problem
from solver.perfmodel.configs import ConfigSet
from solver.scoring.objective import migration_cost
from solver.scoring.plans import Choice, materialize
from solver.search.best import BestStates
from solver.search.kept import keep_running, place_fixed
from solver.search.lagrangian import LagrangianBound
from solver.search.local import local_search
from solver.search.moves import EPSILON, Placement, best_config, move_reshape
from solver.search.placement import Placer
from solver.search.pricing import Prices, dual_bound, lagrangian_prices, price_ladder, uniform
from solver.search.relocate import start_with_rack_room
from solver.search.repack import repack_unplaced
from solver.search.scorer import Scorer
from solver.search.state import SearchState, keep_counts

GPU_PRICES = (0.0, 0.02, 0.05, 0.1, 0.2)
"""Shadow prices per GPU (in units of a job's weighted utility) tried by the greedy passes.

A price of 0 lets every job take its most valuable configuration; higher prices favour
smaller configurations so that more jobs fit. The best of the passes is kept.
"""
IMPROVE_PASSES = 3
"""Re-insertion passes over the jobs at most (each stops early once no job moves)."""
MANY_JOBS = 1024
"""Above this many jobs only the first two GPU prices and the dual prices unscaled are tried,
and the local search makes one pass."""

CHECK_EVERY = 64
"""Jobs placed between two looks at the clock in a greedy pass that has a stop."""

GUIDED_PASSES = 1.35
"""A guided placement best-fit anywhere costs at most this many first greedy passes (1.28-1.33
at 1,024 nodes / 1,600 jobs on 2026-12-05, 0.64-0.89 when the pass was slower; docs/
benchmarks.md, "The first pass's order"): one look per job at one configuration."""
SPLIT_PASSES = 1.15
"""The same in the racks of the aggregated split (1.03-1.15; 0.31-0.65 before)."""

LOCAL_SEARCH_STATES = 1
"""The local search runs on this many of the passes' best distinct states: the pass that leads
before it (usually at the dual prices) mostly leads after it too, and a second costs as much."""


def place(problem: Problem, free: Mapping[str, int], config: Config) -> dict[str, int] | None:
    """Best-fit placement of `config` given free GPUs per node, off its job's barred nodes
    (see solver.search.placement)."""
    barred = next((j.barred_nodes for j in problem.jobs if j.name == config.job), frozenset())
    return Placer(problem.cluster, free).place(
        config.gpu_type, config.num_gpus, config.tensor_parallel, barred=barred
    )


class Heuristic:
    """Greedy passes at several prices, each followed by re-insertion, then local search on the
    best; keeps the best plan met."""

    name = "heuristic"

    def __init__(
        self, problem: Problem, configs: ConfigSet, stop: Callable[[], bool] | None = None
    ) -> None:
        """`stop()` true: every pass, re-insertion and local search returns at its next look
        at the clock (a cancelled solve)."""
        self.problem = problem
        self.configs = configs
        self.stop = stop
        self.scorer = Scorer(problem, configs)
        self.jobs = self.scorer.jobs
        self.value = self.scorer.value
        self.first_plan_at: float | None = None
        """time.monotonic() when the first complete plan existed."""
        self.pass_seconds = 0.0
        """Duration of one greedy pass with its plan: what another pass will roughly take."""
        self.guided_took: dict[bool, float] = {}
        """Duration of the last guided placement in a split's racks (True) and anywhere."""
        self.guided_cut = False
        """Whether the last guided placement stopped part-way (``guided``'s `stop_at`)."""
        self.dual: LagrangianBound | None = None
        """The Lagrangian dual `run` priced its passes with: also a valid upper bound."""
        self.cut_short: int | None = None
        """Jobs the first greedy pass had looked at when its stop came (None: it finished)."""

    def gain(self, job: Job, index: int, counts: Mapping[str, int], keep: bool) -> float:
        """Objective gained by running the job so, against leaving it queued."""
        return self.scorer.gain(job, index, counts, keep)

    def best_move(
        self, state: SearchState, job: Job, price: float | Prices
    ) -> tuple[float, int, dict[str, int]] | None:
        """The job's configuration of most priced gain that fits now."""
        move = best_config(self.scorer, state, job, _prices(price))
        return None if move is None else (move.gain, move.index, move.counts)

    def greedy(
        self, price: float | Prices, stop_at: float | None = None, running_first: bool = False
    ) -> SearchState:
        """Fixed jobs first, then the others by priced value density, a running job's counting
        what keeping it saves (``_kept_density``); each job takes its configuration of most
        priced gain that fits. A waiting job worth more per GPU so comes before a running one
        worth less, as in the aggregated model: with the running jobs placed first, the pass
        was 11-52 % below the optimum where they held the GPUs of more valuable waiting jobs
        (docs/benchmarks.md, "The first pass's order"). `running_first` is that older order,
        which migrates less (the priced passes try it too). With `stop_at` (a
        time.monotonic() instant), the pass stops there, every CHECK_EVERY jobs, leaving the
        rest queued and the running ones where they run (`cut_short` says how many it had
        looked at)."""
        prices = _prices(price)
        state = SearchState(self.problem)
        place_fixed(self.scorer, state)
        running = [j for j in self.problem.jobs if j.current is not None and j.preemptible]
        waiting = [j for j in self.problem.jobs if j.current is None]
        seen = 0
        for group in (running, waiting) if running_first else (running + waiting,):
            for job in sorted(group, key=lambda j: -self._kept_density(j, prices)):
                if stop_at is not None and seen % CHECK_EVERY == 0 and self._over(stop_at):
                    self.cut_short = seen
                    keep_running(self.configs, state, running)
                    return state
                seen += 1
                self._start(state, job, best_config(self.scorer, state, job, prices))
        return state

    def _start(self, state: SearchState, job: Job, move: Placement | None) -> None:
        if move is not None:
            state.take(job.name, self.configs.by_job[job.name][move.index], move.counts)

    def _density(self, job: Job, prices: Prices) -> float:
        """The job's best priced value per GPU: the greedy's order."""
        configs = self.configs.by_job[job.name]
        values = self.scorer.values(job.name)
        if prices.is_zero:
            return max(
                (v / c.num_gpus for v, c in zip(values, configs, strict=True)),
                default=float("-inf"),
            )
        costs = self.scorer.costs(job.name, prices)
        return max(
            ((v - k) / c.num_gpus for v, k, c in zip(values, costs, configs, strict=True)),
            default=float("-inf"),
        )

    def _kept_density(self, job: Job, prices: Prices) -> float:
        """``_density``, plus for a running job its migration cost over the GPUs it holds: what
        each of them earns by keeping it."""
        density = self._density(job, prices)
        if job.current is None:
            return density
        return density + migration_cost(job, self.problem.weights) / job.current.shape.num_gpus

    def guided_seconds(self, racks: bool) -> float:
        """About what ``run_guided``'s first placement takes: as long as the last one of its
        kind took, else a share of the first pass (0 before it). The share is a guess that
        can be off several times over (at 1,024 nodes a placement in the racks took 1.7-2.3
        first passes on a loaded machine): a placement started on it ran 0.6 s past the end."""
        took = self.guided_took.get(racks)
        if took is not None:
            return took
        return (SPLIT_PASSES if racks else GUIDED_PASSES) * self.pass_seconds

    def improve(self, state: SearchState, deadline: float, passes: int = IMPROVE_PASSES) -> None:
        """Re-insert each job at its best configuration given the others, until no gain or
        `passes` passes: a work limit, so the result does not depend on the machine's speed.
        `deadline` is only a safety stop."""
        improved = True
        while improved and passes > 0 and not self._over(deadline):
            passes -= 1
            improved = False
            for job in self.problem.jobs:
                if self._over(deadline):
                    return
                if job.name in state.choices:
                    improved |= move_reshape(self.scorer, state, job) > 0
                elif not self.scorer.fixed(job):
                    move = best_config(self.scorer, state, job)
                    if move is not None and move.gain > EPSILON:
                        self._start(state, job, move)
                        improved = True

    def guided(
        self,
        choice: Mapping[str, Config],
        racks: Mapping[str, Mapping[str, float]] | None = None,
        stop_at: float | None = None,
    ) -> SearchState:
        """Greedy that first tries the given configurations (an aggregated model's solution),
        each job in the racks its split says where it has one (else best-fit anywhere): larger
        tensor groups first (a one-GPU job placed first splits the free blocks a group needs),
        then the densest. `stop_at` (a time.monotonic() instant) stops it part-way with the
        jobs placed by then (``guided_cut`` says so): at 1,024 nodes on a loaded machine a
        placement ran 0.2 s past its window, and the worker was killed at its due instant."""
        self.guided_cut = False
        state = SearchState(self.problem)
        free = uniform(0.0)
        place_fixed(self.scorer, state, choice)
        # Running jobs the solution keeps in their shape stay on their own GPUs first (the
        # aggregated model counts them as not migrated): no other job may take those GPUs.
        for job in self.problem.jobs:
            c = choice.get(job.name)
            if c is None or job.name in state.choices or job.current is None:
                continue
            counts = keep_counts(job, c, state.placer)
            if counts is not None and state.within_budgets(c, counts):
                state.take(job.name, c, counts)
        tp = {name: c.tensor_parallel for name, c in choice.items()}
        order = sorted(
            (j for j in self.problem.jobs if j.name in choice and j.name not in state.choices),
            key=lambda j: (j.current is None, -tp[j.name], -self._density(j, free)),
        )
        # A job whose racks cannot hold its share waits until every other job has had its
        # own: placed anywhere at once, it took the GPUs and watts the split kept for others,
        # and 8 of 1,291 jobs of a MIP's choice did not start at 1,024 nodes (1 when it waits).
        waiting: list[Job] = []
        for job in order:
            if self._cut(stop_at):
                return state
            split = racks.get(job.name) if racks else None
            if split is None:
                self._start_anywhere(state, job, choice[job.name])
                continue
            c = choice[job.name]
            fitted = state.fit_split(job, c, split)
            if fitted is not None and state.within_budgets(c, fitted[0]):
                state.take(job.name, c, fitted[0])
            else:
                waiting.append(job)
        for job in waiting:
            if self._cut(stop_at):
                return state
            self._start_anywhere(state, job, choice[job.name])
        repack_unplaced(self.scorer, state, order, choice, lambda: self._cut(stop_at))
        self._fill(state, stop_at)
        return state

    def _start_anywhere(self, state: SearchState, job: Job, c: Config) -> None:
        """Start `job` in `c` where it runs or best-fit; where only rack budgets block it,
        with running jobs moved out of the racks short of power (``start_with_rack_room``)."""
        fitted = state.fit(job, c)
        if fitted is not None and state.within_budgets(c, fitted[0]):
            state.take(job.name, c, fitted[0])
        elif state.problem.cluster.rack_power_budgets_watts:
            start_with_rack_room(self.scorer, state, job, self.scorer.position(job.name, c))

    def _cut(self, stop_at: float | None) -> bool:
        """Whether a guided placement stops here (past `stop_at`, or asked to stop); noted in
        ``guided_cut``."""
        cut = stop_at is not None and self._over(stop_at)
        self.guided_cut |= cut
        return cut

    def _fill(self, state: SearchState, stop_at: float | None = None) -> None:
        """Start every queued job that fits, most valuable per GPU first (until `stop_at`)."""
        free = uniform(0.0)
        for job in sorted(self.problem.jobs, key=lambda j: -self._density(j, free)):
            if self._cut(stop_at):
                return
            if job.name not in state.choices:
                self._start(state, job, best_config(self.scorer, state, job))

    def run(self, deadline: float, stop_at: float | None = None) -> Plan:
        """The first pass, then the priced passes and local search (``priced``); the best
        plan. `deadline` only stops work that runs far over its usual time; `stop_at`, the
        answer's own deadline, stops even the first pass (on a machine far slower than
        estimated)."""
        if stop_at is not None:
            deadline = min(deadline, stop_at)
        state = self.first(stop_at)
        first = materialize(self.problem, self.configs, dict(state.choices))
        if self.cut_short is not None:  # the answer is due: no second look
            return first
        return self.priced(deadline, state)

    def first(self, stop_at: float | None = None) -> SearchState:
        """The first greedy pass (no prices): the first plan, in milliseconds. `stop_at` stops
        it part-way (`cut_short` says where), the running jobs kept."""
        started = time.monotonic()
        state = self.greedy(0.0, stop_at)
        self.first_plan_at = time.monotonic()
        self.pass_seconds = self.first_plan_at - started
        return state

    def priced(self, deadline: float, start: SearchState | None = None) -> Plan:
        """Greedy and re-insertion at each GPU price, then at the dual prices (fewer of both for
        many jobs), local search on the best state; the best plan (`start`, the first pass's
        state, competes; a new first pass when None). The dual (milliseconds) runs after the
        GPU prices."""
        many = len(self.problem.jobs) > MANY_JOBS
        state = start if start is not None else self.greedy(0.0)
        self.improve(state, deadline)
        best = BestStates(self.problem, self.configs, state)
        if not self._over(deadline):
            self._pass(uniform(0.0), deadline, best, running_first=True)
        for price in GPU_PRICES[1:2] if many else GPU_PRICES[1:]:
            if self._over(deadline):
                return best.plan
            self._pass(uniform(price), deadline, best)
        if not self._over(deadline):
            if self.dual is None:  # computed before, when the solve wanted its bound first
                self.dual = dual_bound(self.problem, self.configs, deadline - time.monotonic())
            for prices in price_ladder(lagrangian_prices(self.dual))[: 1 if many else None]:
                if self._over(deadline):
                    return best.plan
                self._pass(prices, deadline, best)
        for state in best.leaders(LOCAL_SEARCH_STATES):
            if self._over(deadline):
                break
            local_search(self.scorer, state, deadline, 1 if many else None, self.stop)
            best.offer(state)
        return best.plan

    def _over(self, deadline: float) -> bool:
        return time.monotonic() >= deadline or (self.stop is not None and self.stop())

    def _pass(
        self, prices: Prices, deadline: float, best: BestStates, running_first: bool = False
    ) -> None:
        """One greedy pass at `prices` with re-insertion, offered to `best`."""
        state = self.greedy(prices, running_first=running_first)
        self.improve(state, deadline)
        best.offer(state)

    def complete(self, choices: Mapping[str, Choice], deadline: float) -> Plan:
        """Start from `choices` (valid together), start what else fits, then local search."""
        state = SearchState(self.problem)
        for name, (config, counts) in choices.items():
            state.take(name, config, counts)
        self._fill(state)
        self.improve(state, deadline)
        return materialize(self.problem, self.configs, dict(state.choices))

    def run_guided(
        self,
        choice: Mapping[str, Config],
        deadline: float,
        racks: Mapping[str, Mapping[str, float]] | None = None,
        search_until: float | None = None,
    ) -> Plan:
        """`choice` placed in the racks of its split (with `racks`) and, with the time for it,
        best-fit anywhere too (the better of the two), re-insertion, then local search until
        `search_until` (default: `deadline`). The split's placement comes first: it is the one
        the bound's split was made for, the better at 1,024 nodes (3,166 against 3,154), and
        the one a call short of time for both must have; which one ran first had hung on
        whether an estimate said both fitted."""
        if racks:
            state = self._timed_guided(choice, racks, deadline)
            # The other placement: its estimate with half again for noise; re-insertion and
            # local search stop at `deadline`. The plans are compared only when both exist (a
            # plan of 1,600 jobs costs 0.04-0.1 s to materialize, time a placement cut at its
            # window's end does not have).
            if time.monotonic() + 1.5 * self.guided_seconds(False) < deadline:
                best = BestStates(self.problem, self.configs, state)
                best.offer(self._timed_guided(choice, None, deadline))
                [state] = best.leaders(1)
        else:
            state = self._timed_guided(choice, None, deadline)
        # Where the search steers by an estimate of F, its moves can undo what the guide's choice
        # gets right (a tenant under its DRF share given up for throughput): the plan as placed is
        # scored first, kept if the search lowers the true objective (cut: no time for a search).
        placed = (
            None
            if self.scorer.exact or self.guided_cut
            else materialize(self.problem, self.configs, dict(state.choices))
        )
        self.improve(state, deadline)
        local_search(self.scorer, state, min(deadline, search_until or deadline), stop=self.stop)
        plan = materialize(self.problem, self.configs, dict(state.choices))
        if placed is not None and placed.objective.total > plan.objective.total:
            return placed
        return plan

    def _timed_guided(
        self,
        choice: Mapping[str, Config],
        racks: Mapping[str, Mapping[str, float]] | None,
        stop_at: float,
    ) -> SearchState:
        """``guided`` until `stop_at`, its time kept in `guided_took` (a placement cut short
        took longer than it ran: its time only raises the estimate)."""
        started = time.monotonic()
        state = self.guided(choice, racks, stop_at)
        took = time.monotonic() - started
        kind = bool(racks)
        last = self.guided_took.get(kind)
        cut = self.guided_cut
        self.guided_took[kind] = max(took, last) if cut and last is not None else took
        return state


def _prices(price: float | Prices) -> Prices:
    return price if isinstance(price, Prices) else uniform(price)


def solve_heuristic(problem: Problem, configs: ConfigSet, deadline: float) -> Plan:
    """The heuristic's plan; `deadline` (a time.monotonic() instant) bounds the local search."""
    return Heuristic(problem, configs).run(deadline)
