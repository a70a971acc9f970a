"""The quick plan: a valid plan in time linear in the snapshot, for budgets shorter than the
normal first plan (enumeration, the heuristic's set-up, a greedy pass by value density).

One pass, in this order:

1. running jobs, enumerated first (their configurations of the running shape, and the best
   throughput that scores them): a non-preemptible job keeps its GPUs and shape at the lowest
   draw, then its own clock where the power allows; a preemptible one keeps its GPUs, shape and
   clock (or the highest clock of that shape the power allows). A running job whose allocation
   is no longer valid (a node gone, a GPU unavailable, a shape outside its limits) is stopped
   when preemptible and offered a place like a queued job; a non-preemptible one makes the
   request infeasible, as on the normal path.
   This step always runs to its end: it is the plan that is left when there is no time.
2. queued jobs, in rounds (``place_queued``): the next of them, heaviest first, scored (their
   rows enumerated in chunks of ``quick_chunk_jobs``, no Pareto filter, no `Config` for rows
   not looked at), then started most value per GPU first, the clock read every
   ``quick_check_every`` jobs: each takes, on the first GPU type where it fits, its
   configuration of fewest GPUs that is worth running (most gain among those), placed
   best-fit: as many jobs start as fit, the most valuable for the GPUs and power they take.
3. with time left, the jobs started, in that order, then the preemptible jobs kept where they
   run, move into what the others left where that gains more, placement and migration counted
   (``placed_gain``): each tries its ``GROW_TRIES`` most valuable configurations among, per GPU
   type, the ``GROW_COUNTS`` largest GPU counts. The fewest GPUs, and running jobs kept on a
   type they run slower on, left much of the throughput out where the cluster has room (2,000
   jobs on 20,000 nodes: 13.5 % below the optimum; now at it). No local search, no
   re-insertion.

Jobs the clock did not reach stay queued, saying so. The plan that keeps every valid running
job and starts nothing is what is left when the clock stops at once; it is valid whenever the
running allocations are. The caller checks the plan like every other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from solver.domain import Config, Job, Plan, Problem
from solver.perfmodel import bulk
from solver.perfmodel.configs import ConfigSet
from solver.perfmodel.enumeration import Row
from solver.perfmodel.facts import type_facts
from solver.scoring.objective import aging, charged_watts, migration_cost, throughput_weight
from solver.scoring.plans import Choice, materialize
from solver.search.quick_result import NODE_GONE, NOT_REACHED, QuickPlan, queued
from solver.search.quick_rows import QuickRows
from solver.search.scorer import placement_charge
from solver.search.state import SearchState

GROW_COUNTS = 3
"""GPU counts per type a job looks at when it grows: its largest."""

GROW_TRIES = 3
"""Configurations a growing job tries to place, most valuable first (each a best-fit query)."""

Scored = tuple[float, int, Job, list[tuple[float, Row]]]
"""A waiting job scored: minus its value per GPU, its place in the order, the job, and its
candidates (gain, row), most gain first."""

SCORE_SHARE = 0.5
"""Of the time left when waiting jobs are scored, the share scoring may take (placing them
takes the rest)."""

EPSILON = 1e-9
"""A move must gain more than this (rounding)."""

class _Quick:
    def __init__(
        self,
        problem: Problem,
        end: float,
        stop: Callable[[], bool] | None,
        chunk_jobs: int,
        check_every: int,
    ) -> None:
        self.problem = problem
        self.end = end
        self.stop = stop
        self.chunk_jobs = chunk_jobs
        self.check_every = check_every
        self.rows = QuickRows(problem, type_facts(problem.cluster))
        self.state = SearchState(problem)
        self.by_job: dict[str, list[Config]] = {}
        self.max_watts = problem.cluster.max_gpu_watts()
        self.used: set[tuple[str, int]] = set()
        self.nodes = {n.name: n for n in problem.cluster.nodes}
        self.rack_of = {n.name: n.rack for n in problem.cluster.nodes}
        self.preempted: list[str] = []
        self.blocked: list[str] = []
        self.reached: set[str] = set()
        self.gone: set[str] = set()
        self.kept = 0
        self.started = 0
        self.grown = 0
        self.starts: list[Job] = []
        """Jobs started, in order."""
        self.moves: list[Job] = []
        """Preemptible jobs kept where they run, in order: a better place may be worth a move."""

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.end or (self.stop is not None and self.stop())

    def config(self, job: Job, row: Row) -> Config:
        c = Config(job.name, *row)
        self.by_job.setdefault(job.name, []).append(c)
        return c

    # -- running jobs

    def valid_allocation(self, job: Job) -> bool:
        """The job's current GPUs exist, are available, are whole tensor groups per node of
        the shape's GPU type, and no job kept before holds them."""
        assert job.current is not None
        shape = job.current.shape
        gpus: set[tuple[str, int]] = set()
        for s in job.current.placement:
            node = self.nodes.get(s.node)
            if node is None or node.gpu_type != shape.gpu_type:
                return False
            if len(s.gpu_indices) % shape.tensor_parallel:
                return False
            for i in s.gpu_indices:
                if not 0 <= i < node.gpu_count or i in node.unavailable_gpu_indices:
                    return False
                gpus.add((s.node, i))
        return len(gpus) == shape.num_gpus and not gpus & self.used

    def keep_options(self, job: Job) -> list[Row]:
        """The job's rows of its running shape: its own clock first, then by draw descending
        (the highest clock the power allows wins)."""
        assert job.current is not None
        own = job.current.sm_clock_mhz
        rows = self.rows.running_shape(job)
        first = [r for r in rows if r[1] == own]
        return first + [r for r in rows if r[1] != own] if first else rows

    def keep_running(self, running: Sequence[Job]) -> list[Job]:
        """Keep what can be kept; the preemptible jobs that could not, to place anew."""
        fixed = [j for j in running if not j.preemptible]
        loose = [j for j in running if j.preemptible]
        self.rows.load(fixed)
        lowered: list[tuple[Job, list[Config]]] = []
        for job in fixed:
            assert job.current is not None
            options = [self.config(job, r) for r in self.keep_options(job)]
            if not options or not self.valid_allocation(job):
                self.blocked.append(job.name)
                continue
            lowest = min(options, key=lambda c: c.watts)
            self.take(job, lowest, job.current.gpus_per_node())
            lowered.append((job, options))
            self.kept += 1
        for job, options in lowered:  # then each its own clock, if the power left allows
            config, counts = self.state.choices[job.name]
            if options[0] is config or options[0].watts <= config.watts:
                continue
            self.state.release(job.name)
            best = options[0] if self.state.within_budgets(options[0], counts) else config
            self.state.take(job.name, best, counts)
        again: list[Job] = []
        for start in range(0, len(loose), self.chunk_jobs):
            chunk = loose[start : start + self.chunk_jobs]
            self.rows.load(chunk)
            for job in chunk:
                if self.keep(job):
                    continue
                if self.known_nodes(job):
                    again.append(job)
                else:
                    self.gone.add(job.name)
        return again

    def known_nodes(self, job: Job) -> bool:
        """Whether every node of the job's allocation exists (turning choices into GPU indices
        reads them): a job on a node gone stays stopped."""
        assert job.current is not None
        return all(s.node in self.nodes for s in job.current.placement)

    def keep(self, job: Job) -> bool:
        assert job.current is not None
        if not self.valid_allocation(job):
            self.preempted.append(job.name)
            return False
        counts = job.current.gpus_per_node()
        options = self.keep_options(job)
        for row in options:
            c = Config(job.name, *row)
            if self.state.within_budgets(c, counts):
                self.by_job[job.name] = [c]
                self.take(job, c, counts)
                self.kept += 1
                self.moves.append(job)
                return True
        self.preempted.append(job.name)
        return False

    def take(self, job: Job, config: Config, counts: Mapping[str, int]) -> None:
        self.state.take(job.name, config, counts)
        if job.current is not None and config.shape == job.current.shape:
            self.used.update((s.node, i) for s in job.current.placement for i in s.gpu_indices)

    # -- queued jobs

    def candidates(self, job: Job) -> list[tuple[float, Row]]:
        """Per GPU type, the row of fewest GPUs worth running (most gain among those), with
        its gain; most gain first."""
        out: list[tuple[float, Row]] = []
        for counts in self.rows.by_count(job):
            for rows in counts:
                gain, row = max(((self.row_gain(job, r), r) for r in rows), key=_first)
                if gain > 0:
                    out.append((gain, row))
                    break
        out.sort(key=lambda gr: -gr[0])
        return out

    def row_gain(self, job: Job, row: Row) -> float:
        """solver.scoring.objective.running_gain of the row's configuration, from the row (no
        Config made); tests/test_deadline.py compares the two."""
        w = self.problem.weights
        best = self.rows.best(job)
        sps, watts = row[2], row[3]
        gain = throughput_weight(job, w) * (sps / best if best > 0 else 0.0)
        watts = charged_watts(watts, sps, self.rows.least_joules(job), w.energy_basis)
        gain -= w.energy * watts / self.max_watts
        required = job.required_samples_per_second
        if required is not None:  # the shortfall running, against 1 queued
            gain += w.deadline * job.weight * min(1.0, sps / required)
        return gain + w.energy * aging(job)  # what leaving it queued would cost

    def start(self, job: Job, candidates: Sequence[tuple[float, Row]]) -> None:
        for _, row in candidates:
            c = self.config(job, row)
            fitted = self.state.fit(job, c)
            if fitted is not None and self.state.within_budgets(c, fitted[0]):
                self.state.take(job.name, c, fitted[0])
                self.started += 1
                self.starts.append(job)
                return

    def grow(self) -> None:
        """Step 3: each job started, in the order it started, into a configuration of more
        gain where it fits, then each preemptible job kept where it runs, where that gains
        more than its move costs (a type it runs faster on, more GPUs); gains as the
        objective counts them, placement included."""
        started = [(j, False) for j in self.starts]
        kept = [(j, True) for j in self.moves if j.name in self.state.choices]
        for k, (job, stays) in enumerate([*started, *kept]):
            if k % self.check_every == 0 and self.out_of_time():
                return
            config, counts = self.state.choices[job.name]
            now = self.placed_gain(job, config, counts, stays)
            self.state.release(job.name)
            for c in self._better(job, now):
                fitted = self.state.fit(job, c)
                if (
                    fitted is not None
                    and self.state.within_budgets(c, fitted[0])
                    and self.placed_gain(job, c, *fitted) > now + EPSILON
                ):
                    self.by_job.setdefault(job.name, []).append(c)
                    self.state.take(job.name, c, fitted[0])
                    self.grown += 1
                    break
            else:
                self.state.take(job.name, config, counts)

    def placed_gain(self, job: Job, c: Config, counts: Mapping[str, int], stays: bool) -> float:
        """What running the job so gains against leaving it queued (solver.search.scorer's
        gain, from the row): its value, less its placement's spread and dislike, and the
        migration it saves when it stays on its GPUs."""
        w = self.problem.weights
        gain = self.row_gain(job, _row(c)) - placement_charge(w, job, c, counts, self.rack_of)
        return gain + (migration_cost(job, w) if stays else 0.0)

    def _better(self, job: Job, floor: float) -> list[Config]:
        """At most ``GROW_TRIES`` configurations gaining more than `floor`, most first: per GPU
        type, of its ``GROW_COUNTS`` largest GPU counts, each count's most valuable row."""
        found: list[tuple[float, Row]] = []
        for counts in self.rows.by_count(job):
            for rows in counts[-GROW_COUNTS:]:
                gain, row = max(((self.row_gain(job, r), r) for r in rows), key=_first)
                if gain > floor:
                    found.append((gain, row))
        found.sort(key=_first, reverse=True)
        return [Config(job.name, *row) for _, row in found[:GROW_TRIES]]

    def place_queued(self, jobs: Sequence[Job]) -> None:
        """Step 2, in rounds while the clock allows: score the next jobs of `jobs` (heaviest
        first; their rows enumerated chunk by chunk, their candidates), for at most
        ``SCORE_SHARE`` of the time left, then start them most value per GPU first (their best
        candidate's gain over its GPUs; a job's weight is in its gain). With time, the first
        round scores every job: heaviest first alone left jobs worth more per GPU waiting
        where GPUs or power ran out (21 % less on power-capped snapshots, 30 % on a MIG
        round). Where the clock, not the GPUs, stops a round (its pace says the rest cannot
        all be placed in the time left), its rest go most value first: each placement costs
        the same time."""
        scored = 0
        while scored < len(jobs) and not self.out_of_time():
            now = time.monotonic()
            until = now + SCORE_SHARE * (self.end - now)
            batch: list[Scored] = []
            while scored < len(jobs) and (
                len(batch) % self.check_every or time.monotonic() <= until or not batch
            ):
                if scored % self.chunk_jobs == 0:
                    self.rows.load(jobs[scored : scored + self.chunk_jobs])
                job = jobs[scored]
                options = self.candidates(job)
                density = max((g / row[0].num_gpus for g, row in options), default=-1.0)
                batch.append((-density, scored, job, options))
                scored += 1
            batch.sort(key=lambda entry: entry[:2])
            if not self._start_in_order(batch):
                return

    def _start_in_order(self, batch: list[Scored]) -> bool:
        """Start the scored jobs in order (most value first once the clock binds); False when
        the clock stopped it."""
        began, pressed = time.monotonic(), False
        for k in range(len(batch)):
            if k % self.check_every == 0:
                now = time.monotonic()
                if now >= self.end or (self.stop is not None and self.stop()):
                    return False
                if k and not pressed and (now - began) / k * (len(batch) - k) > self.end - now:
                    pressed = True  # value per job from here: the clock binds, not the GPUs
                    batch[k:] = sorted(batch[k:], key=_most_gain)
            job, options = batch[k][2], batch[k][3]
            self.reached.add(job.name)
            self.start(job, options)
        return True

    def run(self, grow: bool) -> None:
        running = [j for j in self.problem.jobs if j.current is not None]
        again = self.keep_running(running)
        waiting = [j for j in self.problem.jobs if j.current is None]
        # Heaviest first (ties: request order; stopped jobs after the waiting ones of their
        # weight): the order rounds score in, each started most value per GPU first.
        order = sorted([*waiting, *again], key=lambda j: -j.weight)
        if not self.blocked:
            self.place_queued(order)
            if grow:
                self.grow()

    def result(self, started_at: float) -> QuickPlan:
        choices: dict[str, Choice] = dict(self.state.choices)
        if self.problem.fairness.active:
            # F reads every job's best pace (its entity's demand, the equal share, finish-time
            # rates): the jobs not reached in time are enumerated now, or the plan's objective
            # is not the one EvaluatePlan gives it (DRF by tenant at 800 jobs, cut after 321:
            # 567.363 against 567.231).
            self.rows.load([j for j in self.problem.jobs if j.name not in self.rows.group])
        seen = [j for j in self.problem.jobs if j.name in self.rows.group]
        configs = ConfigSet(
            by_job={j.name: tuple(self.by_job.get(j.name, ())) for j in self.problem.jobs},
            best_samples_per_second={j.name: self.rows.best(j) for j in seen},
            num_enumerated=self.rows.enumerated,
            least_joules_per_sample={j.name: self.rows.least_joules(j) for j in seen},
        )
        plan = materialize(self.problem, configs, choices)
        waiting = {
            j.name
            for j in self.problem.jobs
            if j.name not in choices
            and j.name not in self.reached
            and (j.current is None or j.name in self.preempted)
            and j.name not in self.gone
        }
        if waiting or self.gone:
            plan = Plan(
                assignments=tuple(
                    queued(a, NODE_GONE if a.job in self.gone else NOT_REACHED)
                    if a.job in waiting or a.job in self.gone
                    else a
                    for a in plan.assignments
                ),
                objective=plan.objective,
            )
        return QuickPlan(
            plan=plan,
            configs=configs,
            kept=self.kept,
            started=self.started,
            grown=self.grown,
            preempted=tuple(self.preempted),
            not_reached=len(waiting),
            blocked=tuple(self.blocked),
            seconds=time.monotonic() - started_at,
        )


def _first(pair: tuple[float, Row]) -> float:
    return pair[0]


def _most_gain(entry: Scored) -> tuple[float, int]:
    """A scored job's order when the clock binds: its best candidate's gain, most first."""
    options = entry[3]
    return (-options[0][0] if options else 1.0, entry[1])


def _row(c: Config) -> Row:
    """The enumeration row a whole-GPU configuration was made from (``Config(job, *row)``)."""
    return cast(Row, tuple(c[1:10]))


def quick_plan(
    problem: Problem,
    end: float,
    stop: Callable[[], bool] | None = None,
    *,
    chunk_jobs: int,
    check_every: int,
    grow: bool = True,
) -> QuickPlan:
    """The quick plan of `problem`, placing queued jobs until time.monotonic() reaches `end`
    (or `stop()` says so), looking at the clock every `chunk_jobs` jobs enumerated and every
    `check_every` placed. Running jobs are always looked at: keeping them is the plan that
    is left when there is no time at all. Without `grow`, no third step: a first plan that a
    better one follows soon (a decomposed solve's) need not wait for it. Unchecked: the
    caller checks it."""
    started = time.monotonic()
    with bulk.collector_paused():
        quick = _Quick(problem, end, stop, chunk_jobs, check_every)
        quick.run(grow)
        return quick.result(started)


__all__ = ["NODE_GONE", "NOT_REACHED", "QuickPlan", "quick_plan"]
