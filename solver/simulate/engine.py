"""The simulation loop: arrivals, rounds, the plans applied, and progress on the truth model.

Rounds come at a fixed interval and on events (arrival, completion, failure, repair), never
closer than ``min_round_spacing_s`` after the last one, and at once when the power budget in
force changes. With ``fixed_rounds`` (Gavel's simulator's rule, opt-in) arrivals and completions
wait for the next round instead, which comes early only when every running job has finished or
nothing runs and a job arrives. Each round builds the real ``SolveRequest`` a scheduler would
send (available GPUs, current allocations, remaining samples, deadlines, the budget in force),
asks the policy, holds its plan to the power margin (``guard``), checks it with the checker and
applies it: a restart (after a stop, a move, a reshape) first holds the job's GPUs for a
checkpoint save and load; between events jobs train at their true rate, capped at their limit.
Under the cluster's node power saving (``node_power``) idle nodes suspend at their time and a
job placed on a suspended node waits for its resume.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.limits import Limits
from solver.domain import POWER, Allocation, Problem
from solver.simulate.apply import Context, apply_plan, stop
from solver.simulate.core import (
    Policy,
    PowerSchedule,
    PowerSegment,
    QueueRecord,
    RoundInput,
    RoundRecord,
    SimJob,
    SimulationError,
    SimulationLog,
)
from solver.simulate.failures import NodeFailures
from solver.simulate.guard import RoundGuard
from solver.simulate.mig_state import MigState
from solver.simulate.node_power import NodeRule
from solver.simulate.preflight import budget_problems, scenario_problem, unrunnable_problems
from solver.simulate.rounds import LiveJob, Requests, check_decision, tenant_shares
from solver.simulate.settings import SAME_INSTANT_S as _EPS
from solver.simulate.settings import EngineSettings
from solver.simulate.tenants import EqualShare, available_by_type
from solver.simulate.truth import Truth, samples_to_train

STALL_ROUNDS = 288
"""Rounds (a day at 300 s) in which a policy runs nothing while jobs wait, no job is still to
arrive and no node to come back, after which the simulation stops: the jobs stay unfinished."""


class Simulation:
    """One policy on one trace and cluster, with a seed for the truth and the failures."""

    def __init__(
        self,
        cluster: pb.ClusterSnapshot,
        jobs: Sequence[SimJob],
        policy: Policy,
        *,
        schedule: PowerSchedule | None = None,
        settings: EngineSettings | None = None,
        seed: int = 0,
        scenario: str = "",
        progress: Callable[[RoundRecord, int, int], None] | None = None,
    ) -> None:
        """``progress(round, jobs finished, jobs total)`` is called after every round."""
        self.cluster = cluster
        self._progress = progress
        self.policy = policy
        self.schedule = schedule or PowerSchedule()
        self.settings = settings or EngineSettings()
        self.seed = seed
        self.scenario = scenario
        self.limits = Limits(max_time_budget_seconds=max(300.0, self.settings.solver_budget_s))
        self._sims = {j.name: j for j in jobs}
        if len(self._sims) != len(jobs):
            raise SimulationError(["job names are not unique"])
        headroom = self.settings.power_headroom
        base = self.settings.power_saving.node_base_watts
        if problems := budget_problems(cluster, self.schedule, headroom, node_base_watts=base):
            raise SimulationError(problems)
        self._requests = Requests(cluster, self.schedule, self.settings, seed)
        self.problem: Problem = scenario_problem(cluster, jobs, self.settings, seed)
        if problems := unrunnable_problems(
            self.problem, cluster, jobs, self.schedule, headroom, _where, node_base_watts=base
        ):
            raise SimulationError(problems)
        self._requests.know(self.problem)
        self._share = EqualShare(self.problem, {j.name: j.trace.num_gpus for j in jobs})
        self.truth = Truth(self.problem, self._sims, self.settings.truth, seed)
        self._guard = RoundGuard(self.settings.power_guard)
        self.mig = MigState(cluster)
        self._nodes = NodeRule(cluster, self.settings.power_saving)
        self._ctx = Context(self.truth, self.settings, self._share, self.mig, self._guard)
        reference = self.settings.reference_gpu_type or _most_numerous_type(cluster)
        self._jobs: dict[str, LiveJob] = {}
        for sim in jobs:
            total = samples_to_train(
                sim.trace.duration_s, self.truth.reference_rate(sim, reference)
            )
            self._jobs[sim.name] = LiveJob(sim, total, total)
        self._pending = sorted(jobs, key=lambda j: (j.trace.submit_time_s, j.name))
        horizon = max(
            (j.trace.submit_time_s + 50 * j.trace.duration_s for j in self._sims.values()),
            default=0.0,
        )
        self._failures = NodeFailures(
            [n.name for n in cluster.nodes], self.settings.failures, seed=seed, horizon_s=horizon
        )
        self._rounds: list[RoundRecord] = []
        self._asked = math.inf  # the policy's own next round (Decision.next_round_s)
        self.stopped = ""
        """Why the run stopped before every job finished ("" if it did not)."""
        self._power: list[PowerSegment] = []

    def samples_to_train(self, job: str) -> float:
        """The job's work: its trace duration at its true reference pace."""
        return self._jobs[job].total_samples

    # ------------------------------------------------------------ the loop

    def run(self) -> SimulationLog:
        """Simulate until every job has finished (or ``max_time_s``); the policy is closed."""
        try:
            return self._run()
        finally:
            self.policy.close()

    def _run(self) -> SimulationLog:
        if not self._pending:
            return self._log(0.0)
        t = self._pending[0].trace.submit_time_s
        arrivals = [j.trace.submit_time_s for j in self._pending]
        n = len(self._pending)
        next_arrival = 0
        active: list[LiveJob] = []
        last_round = -math.inf
        stalled = 0
        limit = self.settings.max_time_s if self.settings.max_time_s is not None else math.inf
        while (active or next_arrival < n) and t < limit:
            while next_arrival < n and arrivals[next_arrival] <= t + _EPS:
                active.append(self._jobs[self._pending[next_arrival].name])
                next_arrival += 1
            self._fail(t, active)
            self._failures.repair(t)
            self._nodes.at(t, active, self._failures.down_until)
            if not active:  # an idle cluster until the next arrival (or a suspend): no round
                step = min(arrivals[next_arrival], limit, self._nodes.next_event(t))
                self._advance(t, step, active)
                t = step
                continue
            self._round(t, active)
            last_round = t
            stalled = stalled + 1 if all(j.allocation is None for j in active) else 0
            down = self._failures.down_until
            if stalled > STALL_ROUNDS and next_arrival >= n and not down:
                self.stopped = (
                    f"stopped at {t:.0f} s: the policy ran nothing for {stalled} rounds "
                    f"with {len(active)} jobs waiting and nothing left to change"
                )
                break
            waiting = any(j.allocation is None for j in active)
            s = self.settings
            fixed = s.fixed_rounds
            regular = s.round_interval_s if waiting or fixed else s.quiet_interval_s
            due = min(t + max(regular, s.round_interval_s), self._asked)
            idle = fixed and all(j.allocation is None for j in active)
            seen = next_arrival  # arrivals before the next round wait for it
            while True:  # events until the next round is due
                arrival = arrivals[seen] if seen < n else math.inf
                completion = self._next_completion(t, active)
                failure = self._failures.next_failure_s
                repair = self._failures.next_repair_s
                budget_change = min(self.schedule.changes_between(t, due), default=math.inf)
                nodes = self._nodes.next_event(t)
                step = min(due, arrival, completion, failure, repair, budget_change, nodes, limit)
                self._advance(t, step, active)
                t = step
                spaced = max(t, last_round + self.settings.min_round_spacing_s)
                if completion <= t + _EPS:
                    self._finish_done(t, active)
                    if not fixed or all(j.allocation is None for j in active):
                        due = min(due, t if fixed else spaced)
                while seen < n and arrivals[seen] <= t + _EPS:
                    seen += 1
                    if not fixed or idle:
                        due = min(due, t if fixed else spaced)
                if repair <= t + _EPS:
                    self._failures.repair(t)
                    due = min(due, spaced)
                if failure <= t + _EPS:
                    self._fail(t, active)
                    due = min(due, spaced)
                if budget_change <= t + _EPS:
                    due = t  # the plan in force may break the new budget: re-plan now
                self._nodes.at(t, active, self._failures.down_until)
                if t >= due - _EPS or t >= limit or not active:
                    break
        return self._log(t)

    # ------------------------------------------------------------ one round

    def _round(self, t: float, active: list[LiveJob]) -> None:
        cluster = self._requests.cluster_now(t, self._failures.down_until)
        self.mig.fill(cluster, _running(active))
        request = self._requests.request(t, active, cluster, self._jobs.values())
        self._nodes.annotate(request, t)
        request, problem = self._guard.tell(request, pipeline.to_problem(request, self.limits))
        round_input = RoundInput(
            request=request,
            problem=problem,
            now_s=t,
            round_index=len(self._rounds),
            history={j.name: j.history() for j in active},
            round_length_s=self.settings.round_interval_s,
        )
        started = time.perf_counter()
        decision = self.policy.decide(round_input)
        self._asked = decision.next_round_s if decision.next_round_s is not None else math.inf
        wall = time.perf_counter() - started
        decision = self._guard.enforce(decision)  # the same margin rule for every policy
        checked = check_decision(problem, decision, self.policy.name, t)
        available_types = available_by_type(cluster)
        changed = self.mig.apply(decision.layout_changes)
        applied = apply_plan(self._ctx, t, active, decision, checked, available_types, changed)
        self._nodes.wake(t, applied.placed)
        self._nodes.at(t, active, self._failures.down_until)
        starts, migrations, preemptions = applied.starts, applied.migrations, applied.preemptions
        busy = sum(j.gpus() for j in active if j.allocation is None or j.allocation.mig is None)
        busy += self.mig.partitioned_in_use(_running(active))
        available = sum(available_types.values())
        self._rounds.append(
            RoundRecord(
                index=len(self._rounds),
                time_s=t,
                solver_seconds=max(decision.solver_seconds, 0.0) or wall,
                budget_seconds=self.settings.solver_budget_s,
                jobs_waiting=sum(1 for j in active if j.allocation is None),
                jobs_running=sum(1 for j in active if j.allocation is not None),
                gpus_busy=busy,
                gpus_available=available,
                predicted_watts=self._predicted_draw(active),
                budget_watts=self._budget(t),
                migrations=migrations,
                starts=starts,
                preemptions=preemptions,
                detail=decision.detail,
                tenant_shares=tenant_shares(active, available_types, self._budget(t)),
                reconfigurations=len(changed),
                invalid_layouts=self.mig.invalid(_running(active)),
            )
        )
        if self._progress is not None:
            done = sum(1 for j in self._jobs.values() if j.finish is not None)
            self._progress(self._rounds[-1], done, len(self._jobs))

    # ------------------------------------------------------------ time passing

    def _next_completion(self, t: float, active: list[LiveJob]) -> float:
        best = math.inf
        for j in active:
            if j.allocation is not None and j.rate.samples_per_second > 0:
                best = min(best, _done_at(j, t))
        return best

    def _advance(self, t0: float, t1: float, active: list[LiveJob]) -> None:
        """Progress and energy from t0 to t1, in segments split where restarts end."""
        if t1 <= t0:
            return
        ends = (x for j in active for x in (j.restart_until, j.resume_until) if t0 < x < t1)
        cuts = sorted({t0, t1, *ends})
        powered_idle = self._idle_watts(powered_only=True)
        powered_idle += self._nodes.extra_watts(t0, t1, self._failures.down_until)
        installed_idle = self._idle_watts(powered_only=False)
        for a, b in itertools.pairwise(cuts):
            dt = b - a
            true_w = predicted_w = work = 0.0
            busy = computing = 0
            on_slices: set[tuple[str, int]] = set()
            computing_slices: set[tuple[str, int]] = set()
            for j in active:
                if j.allocation is None:
                    continue
                n = j.held()
                idle = self._held_idle(j)
                if j.allocation.mig is None:
                    busy += j.gpus()
                else:
                    on_slices.add(_first_gpu(j))
                    j.slice_seconds += dt
                predicted_w += j.predicted_watts
                j.gpu_seconds += n * dt
                gpu_type = j.allocation.shape.gpu_type
                j.seconds_by_type[gpu_type] = j.seconds_by_type.get(gpu_type, 0.0) + dt
                if j.borrowed:
                    j.borrowed_gpu_seconds += n * dt
                if j.restart_until > a + _EPS:
                    j.restart_gpu_seconds += n * dt
                    j.resume_gpu_seconds += n * dt if j.resume_until > a + _EPS else 0.0
                    true_w += idle
                    j.energy_j += idle * dt
                    continue
                if j.allocation.mig is None:
                    computing += j.gpus()
                else:
                    computing_slices.add(_first_gpu(j))
                j.normalized_seconds += j.normalized_rate * dt
                done = min(j.remaining, j.rate.samples_per_second * dt)
                j.remaining -= done
                j.samples += done
                work += done / j.total_samples * j.sim.trace.num_gpus * j.sim.trace.duration_s
                true_w += j.rate.watts
                j.energy_j += j.rate.watts * dt
            held = sum(self._held_idle(j) for j in active if j.allocation is not None)
            busy += len(on_slices)
            computing += len(computing_slices)
            self._power.append(
                PowerSegment(
                    start_s=a,
                    end_s=b,
                    true_watts=true_w + powered_idle - held,
                    predicted_watts=predicted_w + installed_idle - held,
                    budget_watts=self._budget(a),
                    gpus_busy=busy,
                    gpus_computing=computing,
                    gpus_available=self._available_now(),
                    work_gpu_s=work,
                )
            )

    def _finish_done(self, t: float, active: list[LiveJob]) -> None:
        """Jobs whose work is done by t (within rounding) finish at t and free their GPUs."""
        for j in list(active):
            if j.allocation is None or j.rate.samples_per_second <= 0:
                continue
            if j.remaining <= j.total_samples * 1e-12 or _done_at(j, t) <= t + _EPS:
                j.finish = t
                j.samples += j.remaining
                j.remaining = 0.0
                j.allocation = None
                active.remove(j)

    # ------------------------------------------------------------ failures

    def _fail(self, t: float, active: list[LiveJob]) -> None:
        """Nodes whose failure time has come go down; the jobs on them stop."""
        for node in self._failures.fail(t):
            for j in active:
                if j.allocation is not None and any(s.node == node for s in j.allocation.placement):
                    stop(j)

    # ------------------------------------------------------------ the cluster

    def _budget(self, t: float) -> float | None:
        return self._requests.budget(t)

    def _idle_of(self, j: LiveJob) -> float:
        assert j.allocation is not None
        return self.problem.cluster.gpu_types[j.allocation.shape.gpu_type].idle_watts

    def _held_idle(self, j: LiveJob) -> float:
        """The idle watts a running job's own draw includes: its GPUs', none on an instance
        (a partitioned GPU's idle power is the cluster's, counted once, docs/mig.md)."""
        assert j.allocation is not None
        return 0.0 if j.allocation.mig is not None else self._idle_of(j) * j.gpus()

    def _idle_watts(self, *, powered_only: bool) -> float:
        """Idle watts of every GPU: as the checker counts them (every installed GPU, unavailable
        ones too), or as the truth draws them (failed nodes are powered off)."""
        types = self.problem.cluster.gpu_types
        return sum(
            n.gpu_count * types[n.gpu_type].idle_watts
            for n in self.cluster.nodes
            if not (powered_only and n.name in self._failures.down_until)
        )

    def _available_now(self) -> int:
        return sum(
            n.gpu_count - len(n.unavailable_gpu_indices)
            for n in self.cluster.nodes
            if n.name not in self._failures.down_until
        )

    def _predicted_draw(self, active: Sequence[LiveJob]) -> float:
        idle = self._idle_watts(powered_only=False) - sum(
            self._held_idle(j) for j in active if j.allocation
        )
        return idle + sum(j.predicted_watts for j in active if j.allocation is not None)

    # ------------------------------------------------------------ the log

    def _log(self, end: float) -> SimulationLog:
        idle, tail = self._nodes.tail(end)
        states = self._nodes.states
        order = sorted(self._jobs, key=lambda n: (self._sims[n].trace.submit_time_s, n))
        queues = tuple(
            QueueRecord(q.name, q.weight, sum(v.nominal for r, v in q.quotas.items() if r != POWER))
            for q in self.problem.cluster.queues
        )
        return SimulationLog(
            policy=self.policy.name,
            seed=self.seed,
            scenario=self.scenario,
            jobs=tuple(self._jobs[name].record() for name in order),
            rounds=tuple(self._rounds),
            power=tuple(self._power),
            end_s=end,
            stopped=self.stopped,
            queues=queues,
            idle_watts=self._idle_watts(powered_only=False) if idle is None else idle,
            idle_tail=tail,
            power_saving=self._nodes.on,
            grid=self.settings.grid,
            suspends=states.suspends,
            resumes=states.resumes,
            suspended_node_seconds=states.suspended_node_seconds,
        )


def _where(job: SimJob) -> str:
    return f"trace line {job.trace.row}" if job.trace.row else f"job {job.name}"


def _running(active: Sequence[LiveJob]) -> list[tuple[str, Allocation]]:
    return [(j.name, j.allocation) for j in active if j.allocation is not None]


def _first_gpu(j: LiveJob) -> tuple[str, int]:
    assert j.allocation is not None
    s = next(s for s in j.allocation.placement if s.gpu_indices)
    return (s.node, s.gpu_indices[0])


def _done_at(j: LiveJob, t: float) -> float:
    """When a running job finishes at its current pace, from t."""
    return max(t, j.restart_until) + j.remaining / j.rate.samples_per_second


def _most_numerous_type(cluster: pb.ClusterSnapshot) -> str:
    counts: dict[str, int] = {}
    for n in cluster.nodes:
        counts[n.gpu_type] = counts.get(n.gpu_type, 0) + n.gpu_count
    return max(sorted(counts), key=lambda t: counts[t])
