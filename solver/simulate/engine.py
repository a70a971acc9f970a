"""The simulation loop: arrivals, rounds, the plans applied, and progress on the truth model.

Rounds come at a fixed interval and on events (arrival, completion, failure, repair), never
closer than ``min_round_spacing_s`` after the last one, and at once when the power budget in
force changes. Each round builds the real ``SolveRequest`` a scheduler would send (available
GPUs, current allocations, remaining samples, deadlines, the budget in force), asks the policy,
checks its plan with the independent checker, and applies it: a job that starts again after a
stop, or that moves or changes shape, first spends a restart delay (checkpoint save and load,
scaled by model size) holding its GPUs without progress; a clock change costs nothing. Between
events every running job trains at its true rate and draws its true power.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import (
    allocation_to_proto,
    duration_to_proto,
    workload_to_proto,
)
from solver.app.limits import Limits
from solver.domain import Allocation, Config, JobAssignment, JobState, Problem
from solver.perfmodel.configs import enumerate_configs, resolve_config, type_facts
from solver.scoring.checker import check_plan
from solver.simulate.core import (
    Decision,
    JobHistory,
    JobRecord,
    Policy,
    PowerSchedule,
    PowerSegment,
    RoundInput,
    RoundRecord,
    SimJob,
    SimulationError,
    SimulationLog,
)
from solver.simulate.truth import Rate, Truth, TruthSettings, samples_to_train

CHECKPOINT_BYTES_PER_PARAMETER = 14
"""Mixed-precision Adam: fp16 weights (2 bytes) and fp32 weights, momentum and variance (12)
(Rajbhandari et al., ZeRO, SC'20, section 3.1); gradients are not checkpointed."""

_EPS = 1e-9
STALL_ROUNDS = 288
"""Rounds (a day at 300 s) in which a policy runs nothing while jobs wait, no job is still to
arrive and no node to come back, after which the simulation stops: the jobs stay unfinished."""


@dataclass(frozen=True)
class RestartCost:
    """Seconds a job holds its GPUs without progress when it (re)starts after a stop, a move
    or a reshape: a fixed overhead (process start, communicator set-up) plus saving and loading
    its checkpoint at ``bandwidth_bytes_per_s``. Both figures are assumptions of a scenario."""

    overhead_s: float = 30.0
    bandwidth_bytes_per_s: float = 2e9

    def seconds(self, parameters: float) -> float:
        return self.overhead_s + 2 * CHECKPOINT_BYTES_PER_PARAMETER * parameters / (
            self.bandwidth_bytes_per_s
        )


@dataclass(frozen=True)
class FailureSettings:
    """Node failures as a Poisson process per node; a failed node's GPUs are unavailable until
    repaired and the jobs on them stop (they restart elsewhere or later)."""

    node_mtbf_hours: float
    repair_hours: float


@dataclass(frozen=True)
class EngineSettings:
    round_interval_s: float = 300.0
    quiet_interval_s: float = 3600.0
    """The interval instead while no job waits: nothing to share or admit, so the next round
    comes with the next event, or after this long (the same rule for every policy)."""
    min_round_spacing_s: float = 30.0
    solver_budget_s: float = 1.0
    """The policy's time per round (the request's time_budget)."""
    restart: RestartCost = field(default_factory=RestartCost)
    failures: FailureSettings | None = None
    reference_gpu_type: str | None = None
    """The GPU type of the trace's durations; None: the cluster's most numerous type."""
    max_time_s: float | None = None
    """Stop the simulation here even if jobs remain."""
    feedback: bool = False
    """Report what a job has shown: once it has run, the scheduler sends it as a measured
    profile, each configuration's prediction scaled by the ratio of the job's observed to
    predicted throughput and power so far (the same for every policy)."""
    power_headroom: float = 0.0
    """Share of the power budget the scheduler keeps back for prediction error: every policy is
    told budget x (1 - headroom); exceedance is measured against the whole budget."""
    truth: TruthSettings = field(default_factory=TruthSettings)
    weights: pb.ObjectiveWeights | None = None


@dataclass
class _Job:
    """A job's mutable state in the simulation."""

    sim: SimJob
    total_samples: float
    remaining: float
    allocation: Allocation | None = None
    rate: Rate = field(default_factory=lambda: Rate(0.0, 0.0))
    predicted_watts: float = 0.0
    restart_until: float = 0.0
    pending_restart: bool = False
    """The next start pays the restart delay (the job has been stopped before)."""
    first_start: float | None = None
    finish: float | None = None
    gpu_seconds: float = 0.0
    seconds_by_type: dict[str, float] = field(default_factory=dict)
    rounds_run: int = 0
    energy_j: float = 0.0
    samples: float = 0.0
    migrations: int = 0
    preemptions: int = 0
    observed_speed: float = 0.0
    """Sum over rounds run of observed / predicted samples/s (feedback)."""
    observed_power: float = 0.0
    observations: int = 0

    @property
    def name(self) -> str:
        return self.sim.name

    def gpus(self) -> int:
        return 0 if self.allocation is None else self.allocation.shape.num_gpus


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
        everything = self._request(0.0, [_Job(j, 1.0, 1.0) for j in jobs], self.cluster)
        try:
            self.problem: Problem = pipeline.to_problem(everything, self.limits)
        except pipeline.InvalidRequest as e:
            raise SimulationError(
                [f"the scenario as one snapshot: {v.field}: {v.description}" for v in e.violations]
            ) from e
        self.truth = Truth(self.problem, self._sims, self.settings.truth, seed)
        reference = self.settings.reference_gpu_type or _most_numerous_type(cluster)
        self._jobs: dict[str, _Job] = {}
        for sim in jobs:
            total = samples_to_train(
                sim.trace.duration_s, self.truth.reference_rate(sim, reference)
            )
            self._jobs[sim.name] = _Job(sim, total, total)
        self._pending = sorted(jobs, key=lambda j: (j.trace.submit_time_s, j.name))
        self._failed_until: dict[str, float] = {}
        self._failures = self._draw_failures()
        self._rounds: list[RoundRecord] = []
        self.stopped = ""
        """Why the run stopped before every job finished ("" if it did not)."""
        self._facts = type_facts(self.problem.cluster)
        self._configs: dict[str, list[Config]] = {}
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
        active: list[_Job] = []
        last_round = -math.inf
        stalled = 0
        limit = self.settings.max_time_s if self.settings.max_time_s is not None else math.inf
        while (active or next_arrival < n) and t < limit:
            while next_arrival < n and arrivals[next_arrival] <= t + _EPS:
                active.append(self._jobs[self._pending[next_arrival].name])
                next_arrival += 1
            self._fail(t, active)
            self._repair(t)
            if not active:  # an idle cluster until the next arrival: no round
                step = min(arrivals[next_arrival], limit)
                self._advance(t, step, active)
                t = step
                continue
            self._round(t, active)
            last_round = t
            stalled = stalled + 1 if all(j.allocation is None for j in active) else 0
            if stalled > STALL_ROUNDS and next_arrival >= n and not self._failed_until:
                self.stopped = (
                    f"stopped at {t:.0f} s: the policy ran nothing for {stalled} rounds "
                    f"with {len(active)} jobs waiting and nothing left to change"
                )
                break
            waiting = any(j.allocation is None for j in active)
            s = self.settings
            due = t + (
                s.round_interval_s if waiting else max(s.quiet_interval_s, s.round_interval_s)
            )
            seen = next_arrival  # arrivals before the next round wait for it
            while True:  # events until the next round is due
                arrival = arrivals[seen] if seen < n else math.inf
                completion = self._next_completion(t, active)
                failure = self._failures[0][0] if self._failures else math.inf
                repair = min(self._failed_until.values(), default=math.inf)
                budget_change = min(self.schedule.changes_between(t, due), default=math.inf)
                step = min(due, arrival, completion, failure, repair, budget_change, limit)
                self._advance(t, step, active)
                t = step
                spaced = max(t, last_round + self.settings.min_round_spacing_s)
                if completion <= t + _EPS:
                    self._finish_done(t, active)
                    due = min(due, spaced)
                while seen < n and arrivals[seen] <= t + _EPS:
                    seen += 1
                    due = min(due, spaced)
                if repair <= t + _EPS:
                    self._repair(t)
                    due = min(due, spaced)
                if failure <= t + _EPS:
                    self._fail(t, active)
                    due = min(due, spaced)
                if budget_change <= t + _EPS:
                    due = t  # the plan in force may break the new budget: re-plan now
                if t >= due - _EPS or t >= limit or not active:
                    break
        return self._log(t)

    # ------------------------------------------------------------ one round

    def _round(self, t: float, active: list[_Job]) -> None:
        cluster = self._cluster_now(t)
        request = self._request(t, active, cluster)
        history = {j.name: self._history(j) for j in active}
        round_input = RoundInput(
            request=request,
            now_s=t,
            round_index=len(self._rounds),
            history=history,
            round_length_s=self.settings.round_interval_s,
        )
        started = time.perf_counter()
        decision = self.policy.decide(round_input)
        wall = time.perf_counter() - started
        problem = pipeline.to_problem(request, self.limits)
        predicted = self._check(problem, decision, t)
        starts = migrations = preemptions = 0
        for j in active:
            new = decision.allocations.get(j.name)
            old = j.allocation
            if new is None:
                if old is not None:
                    j.preemptions += 1
                    preemptions += 1
                    j.pending_restart = True
                    j.allocation = None
                j.rate = Rate(0.0, 0.0)
                j.predicted_watts = 0.0
                continue
            if old is None:
                starts += 1
                if j.first_start is None:
                    j.first_start = t
                if j.pending_restart:
                    j.restart_until = t + self.settings.restart.seconds(j.sim.parameters)
                    j.pending_restart = False
            elif old.shape != new.shape or _gpus(old) != _gpus(new):
                migrations += 1
                j.migrations += 1
                j.restart_until = t + self.settings.restart.seconds(j.sim.parameters)
            j.allocation = new
            j.rounds_run += 1
            base = self.truth.base_rate(j.name, new.shape, new.sm_clock_mhz)
            speed, power = self.truth.round_noise()
            j.rate = Rate(base.samples_per_second * speed, base.watts * power)
            j.predicted_watts = predicted[j.name]
            model = self.truth.predicted(j.name, new.shape, new.sm_clock_mhz)
            if model is not None:
                j.observed_speed += j.rate.samples_per_second / model.samples_per_second
                j.observed_power += j.rate.watts / model.watts
                j.observations += 1
        busy = sum(j.gpus() for j in active)
        available = _available_gpus(cluster)
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
            )
        )
        if self._progress is not None:
            done = sum(1 for j in self._jobs.values() if j.finish is not None)
            self._progress(self._rounds[-1], done, len(self._jobs))

    def _check(self, problem: Problem, decision: Decision, t: float) -> dict[str, float]:
        """Predicted watts of each running job; SimulationError if the plan breaks a rule."""
        jobs = {j.name: j for j in problem.jobs}
        unknown = sorted(set(decision.allocations) - set(jobs))
        if unknown:
            raise SimulationError([f"{self.policy.name} at {t:.0f} s: unknown jobs {unknown}"])
        assignments = []
        watts: dict[str, float] = {}
        problems = []
        facts = type_facts(problem.cluster)
        for job in problem.jobs:
            a = decision.allocations.get(job.name)
            if a is None:
                assignments.append(JobAssignment(job.name, JobState.QUEUED))
                continue
            config = resolve_config(problem, job, a.shape, a.sm_clock_mhz, facts)
            if config is None:
                problems.append(f"{job.name}: {a.shape} at {a.sm_clock_mhz} MHz cannot run")
                continue
            watts[job.name] = config.watts
            assignments.append(JobAssignment(job.name, JobState.RUNNING, config, a.placement))
        problems += [
            f"{v.constraint} {v.job}: {v.message}" for v in check_plan(problem, assignments)
        ]
        if problems:
            head = f"{self.policy.name} at {t:.0f} s made a plan the checker rejects"
            raise SimulationError([head, *problems[:20]])
        return watts

    # ------------------------------------------------------------ time passing

    def _next_completion(self, t: float, active: list[_Job]) -> float:
        best = math.inf
        for j in active:
            if j.allocation is not None and j.rate.samples_per_second > 0:
                best = min(best, _done_at(j, t))
        return best

    def _advance(self, t0: float, t1: float, active: list[_Job]) -> None:
        """Progress and energy from t0 to t1, in segments split where restarts end."""
        if t1 <= t0:
            return
        cuts = sorted({t0, t1, *(j.restart_until for j in active if t0 < j.restart_until < t1)})
        powered_idle = self._idle_watts(powered_only=True)
        installed_idle = self._idle_watts(powered_only=False)
        for a, b in itertools.pairwise(cuts):
            dt = b - a
            true_w = predicted_w = 0.0
            busy = computing = 0
            for j in active:
                if j.allocation is None:
                    continue
                n = j.gpus()
                idle = self._idle_of(j) * n
                busy += n
                predicted_w += j.predicted_watts
                j.gpu_seconds += n * dt
                gpu_type = j.allocation.shape.gpu_type
                j.seconds_by_type[gpu_type] = j.seconds_by_type.get(gpu_type, 0.0) + dt
                if j.restart_until > a + _EPS:
                    true_w += idle
                    j.energy_j += idle * dt
                    continue
                computing += n
                done = min(j.remaining, j.rate.samples_per_second * dt)
                j.remaining -= done
                j.samples += done
                true_w += j.rate.watts
                j.energy_j += j.rate.watts * dt
            held = sum(self._idle_of(j) * j.gpus() for j in active if j.allocation is not None)
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
                )
            )

    def _finish_done(self, t: float, active: list[_Job]) -> None:
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

    def _draw_failures(self) -> list[tuple[float, str]]:
        f = self.settings.failures
        if f is None:
            return []
        rng = np.random.default_rng([self.seed, 3])
        horizon = max(
            (j.trace.submit_time_s + 50 * j.trace.duration_s for j in self._sims.values()),
            default=0.0,
        )
        events: list[tuple[float, str]] = []
        rate = 1.0 / (f.node_mtbf_hours * 3600.0)
        for node in self.cluster.nodes:
            t = float(rng.exponential(1.0 / rate))
            while t < horizon:
                events.append((t, node.name))
                t += f.repair_hours * 3600.0 + float(rng.exponential(1.0 / rate))
        heapq.heapify(events)
        return events

    def _fail(self, t: float, active: list[_Job]) -> None:
        """Nodes whose failure time has come go down; the jobs on them stop."""
        f = self.settings.failures
        while f is not None and self._failures and self._failures[0][0] <= t + _EPS:
            at, node = heapq.heappop(self._failures)
            self._failed_until[node] = at + f.repair_hours * 3600.0
            for j in active:
                if j.allocation is not None and any(s.node == node for s in j.allocation.placement):
                    j.allocation = None
                    j.preemptions += 1
                    j.pending_restart = True
                    j.rate = Rate(0.0, 0.0)
                    j.predicted_watts = 0.0

    def _repair(self, t: float) -> None:
        for node, until in list(self._failed_until.items()):
            if until <= t + _EPS:
                del self._failed_until[node]

    # ------------------------------------------------------------ snapshots

    def _budget(self, t: float) -> float | None:
        default = (
            self.cluster.power_budget_watts if self.cluster.HasField("power_budget_watts") else None
        )
        return self.schedule.budget_at(t, default)

    def _cluster_now(self, t: float) -> pb.ClusterSnapshot:
        c = pb.ClusterSnapshot()
        c.CopyFrom(self.cluster)
        for n in c.nodes:
            if n.name in self._failed_until:
                del n.unavailable_gpu_indices[:]
                n.unavailable_gpu_indices.extend(range(n.gpu_count))
        budget = self._budget(t)
        if budget is None:
            c.ClearField("power_budget_watts")
        else:
            c.power_budget_watts = budget * (1 - self.settings.power_headroom)
        return c

    def _request(
        self, t: float, active: Sequence[_Job], cluster: pb.ClusterSnapshot
    ) -> pb.SolveRequest:
        req = pb.SolveRequest(cluster=cluster)
        if self.settings.weights is not None:
            req.weights.CopyFrom(self.settings.weights)
        req.options.time_budget.CopyFrom(duration_to_proto(self.settings.solver_budget_s))
        req.options.seed = self.seed
        for j in active:
            sim = j.sim
            job = req.jobs.add(
                name=sim.name,
                tenant=sim.trace.tenant,
                weight=sim.trace.weight,
                min_gpus=sim.min_gpus,
                max_gpus=sim.max_gpus,
                allowed_gpu_types=sorted(sim.allowed_gpu_types),
                remaining_samples=max(j.remaining, 1e-9),
                preemptible=sim.trace.preemptible,
            )
            if self.settings.feedback and j.observations:
                job.profile.CopyFrom(self._observed_profile(j))
            else:
                workload_to_proto(job, sim.workload)
            if sim.trace.deadline_s is not None:
                left = sim.trace.submit_time_s + sim.trace.deadline_s - t
                job.time_to_deadline.CopyFrom(duration_to_proto(max(left, 1.0)))
            if j.allocation is not None:
                job.current_allocation.CopyFrom(allocation_to_proto(j.allocation))
        return req

    def _observed_profile(self, j: _Job) -> pb.ThroughputProfile:
        """The job's configurations as measured points: the model's predictions scaled by what
        the job has shown so far."""
        speed = j.observed_speed / j.observations
        power = j.observed_power / j.observations
        configs = self._configs.get(j.name)
        if configs is None:
            job = next(x for x in self.problem.jobs if x.name == j.name)
            configs = self._configs[j.name] = enumerate_configs(job, self._facts)
        return pb.ThroughputProfile(
            points=[
                pb.ProfilePoint(
                    gpu_type=c.gpu_type,
                    num_gpus=c.num_gpus,
                    tensor_parallel=c.tensor_parallel,
                    pipeline_parallel=c.shape.pipeline_parallel,
                    sm_clock_mhz=c.sm_clock_mhz,
                    samples_per_second=c.samples_per_second * speed,
                    watts=c.watts * power,
                    memory_per_gpu_gib=c.memory_per_gpu_gib,
                )
                for c in configs
            ]
        )

    def _history(self, j: _Job) -> JobHistory:
        return JobHistory(
            submit_time_s=j.sim.trace.submit_time_s,
            requested_gpus=j.sim.trace.num_gpus,
            attained_gpu_seconds=j.gpu_seconds,
            seconds_by_type=dict(j.seconds_by_type),
            rounds_run=j.rounds_run,
        )

    def _idle_of(self, j: _Job) -> float:
        assert j.allocation is not None
        return self.problem.cluster.gpu_types[j.allocation.shape.gpu_type].idle_watts

    def _idle_watts(self, *, powered_only: bool) -> float:
        """Idle watts of every GPU: as the checker counts them (every installed GPU, unavailable
        ones too), or as the truth draws them (failed nodes are powered off)."""
        types = self.problem.cluster.gpu_types
        return sum(
            n.gpu_count * types[n.gpu_type].idle_watts
            for n in self.cluster.nodes
            if not (powered_only and n.name in self._failed_until)
        )

    def _available_now(self) -> int:
        return sum(
            n.gpu_count - len(n.unavailable_gpu_indices)
            for n in self.cluster.nodes
            if n.name not in self._failed_until
        )

    def _predicted_draw(self, active: Sequence[_Job]) -> float:
        idle = self._idle_watts(powered_only=False) - sum(
            self._idle_of(j) * j.gpus() for j in active if j.allocation
        )
        return idle + sum(j.predicted_watts for j in active if j.allocation is not None)

    # ------------------------------------------------------------ the log

    def _log(self, end: float) -> SimulationLog:
        records = []
        for name in sorted(self._jobs, key=lambda n: (self._sims[n].trace.submit_time_s, n)):
            j = self._jobs[name]
            tr = j.sim.trace
            records.append(
                JobRecord(
                    job_id=name,
                    tenant=tr.tenant,
                    workload=j.sim.workload_name,
                    requested_gpus=tr.num_gpus,
                    weight=tr.weight,
                    submit_s=tr.submit_time_s,
                    first_start_s=j.first_start,
                    finish_s=j.finish,
                    deadline_s=None if tr.deadline_s is None else tr.submit_time_s + tr.deadline_s,
                    isolated_s=tr.duration_s,
                    samples=j.samples,
                    gpu_seconds=j.gpu_seconds,
                    energy_j=j.energy_j,
                    migrations=j.migrations,
                    preemptions=j.preemptions,
                )
            )
        return SimulationLog(
            policy=self.policy.name,
            seed=self.seed,
            scenario=self.scenario,
            jobs=tuple(records),
            rounds=tuple(self._rounds),
            power=tuple(self._power),
            end_s=end,
            stopped=self.stopped,
        )


def _done_at(j: _Job, t: float) -> float:
    """When a running job finishes at its current pace, from t."""
    return max(t, j.restart_until) + j.remaining / j.rate.samples_per_second


def _gpus(a: Allocation) -> list[tuple[str, int]]:
    return sorted((s.node, i) for s in a.placement for i in s.gpu_indices)


def _available_gpus(cluster: pb.ClusterSnapshot) -> int:
    return sum(n.gpu_count - len(n.unavailable_gpu_indices) for n in cluster.nodes)


def _most_numerous_type(cluster: pb.ClusterSnapshot) -> str:
    counts: dict[str, int] = {}
    for n in cluster.nodes:
        counts[n.gpu_type] = counts.get(n.gpu_type, 0) + n.gpu_count
    return max(sorted(counts), key=lambda t: counts[t])
