"""A round's exchange with the policy: each job's state in the simulation, the ``SolveRequest`` a
scheduler would send (available GPUs, current allocations, remaining samples, deadlines, the
budget in force), and the check of the policy's decision by the independent checker."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import (
    allocation_to_proto,
    duration_to_proto,
    energy_basis_to_proto,
    workload_to_proto,
)
from solver.app.limits import MIN_DEADLINE_SAMPLES
from solver.domain import (
    Allocation,
    Config,
    EnergyBasis,
    Job,
    JobAssignment,
    JobState,
    Problem,
    Shape,
)
from solver.perfmodel.configs import TypeFacts, enumerate_configs, resolve_config, type_facts
from solver.perfmodel.quotas import borrowed_jobs
from solver.power_states import PowerActionKind
from solver.scoring.checker import check_plan
from solver.simulate.core import (
    Decision,
    JobHistory,
    JobRecord,
    PowerSchedule,
    SimJob,
    SimulationError,
)
from solver.simulate.power_saving import resumes_for
from solver.simulate.settings import EngineSettings
from solver.simulate.slicing import instance_configs, predicted_fraction, slice_points
from solver.simulate.tenants import dominant_shares, queue_attained
from solver.simulate.truth import Rate


@dataclass
class LiveJob:
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
    stopped_nodes: int = 1
    """Nodes the job ran on when it was last stopped (they saved its checkpoint)."""
    first_start: float | None = None
    finish: float | None = None
    gpu_seconds: float = 0.0
    seconds_by_type: dict[str, float] = field(default_factory=dict)
    rounds_run: int = 0
    energy_j: float = 0.0
    samples: float = 0.0
    migrations: int = 0
    preemptions: int = 0
    restarts: int = 0
    """Starts after a stop plus moves and reshapes: each pays the restart delay."""
    restart_gpu_seconds: float = 0.0
    """GPU-seconds held during restart delays (no progress)."""
    observed_speed: float = 0.0
    """Sum over rounds run of observed / predicted samples/s (feedback)."""
    observed_power: float = 0.0
    observations: int = 0
    normalized_rate: float = 0.0
    """Predicted rate over the equal-share rate this round (``solver.simulate.tenants``)."""
    normalized_seconds: float = 0.0
    borrowed: bool = False
    """Running on quota its queue borrowed from the cohort (this round's plan)."""
    borrowed_gpu_seconds: float = 0.0
    gpu_share: float = 1.0
    """Share of a GPU the job holds per GPU of its shape: 1 on whole GPUs, the instance's
    share (``slice_share``) on a MIG instance."""
    slice_seconds: float = 0.0
    resume_until: float = 0.0
    """Until when the job waits for a suspended node of its placement to resume."""
    resume_gpu_seconds: float = 0.0
    """GPU-seconds held waiting for resumes (no progress)."""

    @property
    def name(self) -> str:
        return self.sim.name

    def gpus(self) -> int:
        return 0 if self.allocation is None else self.allocation.shape.num_gpus

    def held(self) -> float:
        """GPUs held: whole GPUs, or the share of one on a MIG instance."""
        return self.gpus() * self.gpu_share

    def history(self) -> JobHistory:
        return JobHistory(
            submit_time_s=self.sim.trace.submit_time_s,
            requested_gpus=self.sim.trace.num_gpus,
            attained_gpu_seconds=self.gpu_seconds,
            seconds_by_type=dict(self.seconds_by_type),
            rounds_run=self.rounds_run,
        )

    def record(self) -> JobRecord:
        """The job as the log keeps it."""
        tr = self.sim.trace
        return JobRecord(
            job_id=self.name,
            tenant=tr.tenant,
            workload=self.sim.workload_name,
            requested_gpus=tr.num_gpus,
            weight=tr.weight,
            submit_s=tr.submit_time_s,
            first_start_s=self.first_start,
            finish_s=self.finish,
            deadline_s=None if tr.deadline_s is None else tr.submit_time_s + tr.deadline_s,
            isolated_s=tr.duration_s,
            samples=self.samples,
            gpu_seconds=self.gpu_seconds,
            energy_j=self.energy_j,
            migrations=self.migrations,
            preemptions=self.preemptions,
            restarts=self.restarts,
            restart_gpu_seconds=self.restart_gpu_seconds,
            normalized_s=self.normalized_seconds,
            borrowed_gpu_seconds=self.borrowed_gpu_seconds,
            slices=self.sim.slices,
            slice_seconds=self.slice_seconds,
            resume_gpu_seconds=self.resume_gpu_seconds,
        )


class Requests:
    """Builds each round's request from the cluster, the power schedule and the jobs' state."""

    def __init__(
        self,
        cluster: pb.ClusterSnapshot,
        schedule: PowerSchedule,
        settings: EngineSettings,
        seed: int,
    ) -> None:
        self.cluster = cluster
        self.schedule = schedule
        self.settings = settings
        self.seed = seed
        self._problem: Problem | None = None
        self._facts: dict[str, TypeFacts] = {}
        self._configs: dict[str, list[Config]] = {}

    def know(self, problem: Problem) -> None:
        """The scenario as one problem: each job's configurations for measured profiles."""
        self._problem = problem
        self._facts = type_facts(problem.cluster)

    def budget(self, t: float) -> float | None:
        """The cluster power budget in force at t (W), None without one."""
        c = self.cluster
        default = c.power_budget_watts if c.HasField("power_budget_watts") else None
        return self.schedule.budget_at(t, default)

    def cluster_now(self, t: float, down: Collection[str] = ()) -> pb.ClusterSnapshot:
        """The cluster as the scheduler reports it at t: failed nodes' GPUs unavailable, the
        budget in force less the headroom."""
        c = pb.ClusterSnapshot()
        c.CopyFrom(self.cluster)
        for n in c.nodes:
            if n.name in down:
                del n.unavailable_gpu_indices[:]
                n.unavailable_gpu_indices.extend(range(n.gpu_count))
        budget = self.budget(t)
        if budget is None:
            c.ClearField("power_budget_watts")
        else:
            c.power_budget_watts = budget * (1 - self.settings.power_headroom)
        if self.settings.grid is not None:
            c.grid.CopyFrom(self.settings.grid.forecast(t, self.seed))
        return c

    def request(
        self,
        t: float,
        active: Sequence[LiveJob],
        cluster: pb.ClusterSnapshot,
        everyone: Iterable[LiveJob] = (),
    ) -> pb.SolveRequest:
        """The round's request: the active jobs with their remaining work, allocation and
        attained service, and each declared queue's attained service: the sum over its jobs
        among `everyone` (every job of the run, finished ones included)."""
        req = pb.SolveRequest(cluster=cluster)
        attained = queue_attained(
            [q.name for q in cluster.queues],
            ((j.sim.trace.tenant, j.gpu_seconds, j.normalized_seconds) for j in everyone),
        )
        for q in req.cluster.queues:
            gpu_s, norm_s = attained[q.name]
            q.attained.CopyFrom(pb.AttainedService(gpu_seconds=gpu_s, normalized_seconds=norm_s))
        for name, value in (self.settings.weights or {}).items():
            setattr(req.weights, name, value)
        if self.settings.energy_basis is not EnergyBasis.DRAW:
            req.weights.energy_basis = energy_basis_to_proto(self.settings.energy_basis)
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
                attained=pb.AttainedService(
                    gpu_seconds=j.gpu_seconds, normalized_seconds=j.normalized_seconds
                ),
            )
            job.age.CopyFrom(duration_to_proto(max(t - sim.trace.submit_time_s, 0.0)))
            if sim.slices:
                job.slices.allow = True
            if self.settings.feedback and j.observations:
                job.profile.CopyFrom(self._observed_profile(j))
            elif sim.slices and self._problem is not None:
                job.profile.CopyFrom(self._profile(j, 1.0, 1.0))
            else:
                workload_to_proto(job, sim.workload)
            if sim.trace.deadline_s is not None:
                left = sim.trace.submit_time_s + sim.trace.deadline_s - t
                job.time_to_deadline.CopyFrom(duration_to_proto(max(left, 1.0)))
                # the contract's least work with a deadline: a job this close is done within a step
                job.remaining_samples = max(job.remaining_samples, MIN_DEADLINE_SAMPLES)
            if j.allocation is not None:
                job.current_allocation.CopyFrom(allocation_to_proto(j.allocation))
                if j.rate.watts > 0:  # what its GPUs drew last round (a DCGM reading)
                    job.current_allocation.observed_watts = j.rate.watts
        return req

    def _observed_profile(self, j: LiveJob) -> pb.ThroughputProfile:
        """The job's configurations as measured points: the model's predictions scaled by what
        the job has shown so far."""
        speed = j.observed_speed / j.observations
        power = j.observed_power / j.observations
        return self._profile(j, speed, power)

    def _job(self, name: str) -> Job:
        assert self._problem is not None, "know() the scenario first"
        return next(x for x in self._problem.jobs if x.name == name)

    def _profile(self, j: LiveJob, speed: float, power: float) -> pb.ThroughputProfile:
        """The model's predictions of the job's configurations as measured points, scaled by
        ``speed`` and ``power``; a slice job's also on every instance it may use, at its
        predicted fraction of a GPU (``solver.simulate.slicing``)."""
        configs = self._configs.get(j.name)
        if configs is None:
            job = self._job(j.name)
            configs = enumerate_configs(job, self._facts)
            if j.sim.slices:
                assert self._problem is not None
                sigma = self.settings.truth.throughput_sigma
                used = predicted_fraction(self.seed, j.name, j.sim.gpu_fraction, sigma)
                mig = self._problem.cluster.mig
                configs += [
                    Config(
                        j.name,
                        Shape(p.gpu_type, 1, 1, 1),
                        p.sm_clock_mhz,
                        p.samples_per_second,
                        p.watts,
                        p.memory_per_gpu_gib,
                        1,
                        1,
                        mig_profile=p.mig_profile,
                    )
                    for p in slice_points(job, self._facts, mig, used)
                ]
            self._configs[j.name] = configs
        running = j.allocation
        if (
            running is not None
            and running.mig is None
            and all(c.shape != running.shape for c in configs)
        ):
            # The enumeration keeps the best pipeline degree per GPU count and tensor degree; a
            # job runs in the shape its policy chose (a rigid one: the trace's split), and a
            # non-preemptible one must be offered it to keep it.
            job = replace(self._job(j.name), current=running)
            shape = running.shape
            configs = self._configs[j.name] = configs + [
                c for c in enumerate_configs(job, self._facts) if c.shape == shape
            ]
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
                    mig_profile=c.mig_profile,
                )
                for c in configs
            ]
        )


@dataclass(frozen=True)
class CheckedPlan:
    """A plan the checker accepts: each running job's predicted watts, and the running jobs on
    borrowed quota (``solver.perfmodel.quotas.borrowed_jobs``)."""

    watts: dict[str, float]
    borrowed: frozenset[str]


def check_decision(problem: Problem, decision: Decision, policy: str, t: float) -> CheckedPlan:
    """The plan checked by the independent checker (every rule, tenant quotas included: they
    are hard, a plan that breaks one stops the run as any other violation), with the RESUME of
    every suspended node it uses (the cluster resumes them for any policy) and the policy's
    own SUSPENDs; SimulationError with the violations if it breaks a rule."""
    jobs = {j.name: j for j in problem.jobs}
    unknown = sorted(set(decision.allocations) - set(jobs))
    if unknown:
        raise SimulationError([f"{policy} at {t:.0f} s: unknown jobs {unknown}"])
    assignments = []
    watts: dict[str, float] = {}
    problems = []
    facts = type_facts(problem.cluster)
    for job in problem.jobs:
        a = decision.allocations.get(job.name)
        if a is None:
            assignments.append(JobAssignment(job.name, JobState.QUEUED))
            continue
        config = _config(problem, job, a, facts)
        if config is None:
            on = f" on {a.mig.profile}" if a.mig is not None else ""
            problems.append(f"{job.name}: {a.shape}{on} at {a.sm_clock_mhz} MHz cannot run")
            continue
        watts[job.name] = config.watts
        assignments.append(
            JobAssignment(job.name, JobState.RUNNING, config, a.placement, mig=a.mig)
        )
    suspends = [a for a in decision.power_actions if a.kind is PowerActionKind.SUSPEND]
    actions = [*resumes_for(problem, decision.allocations), *suspends]
    violations = check_plan(problem, assignments, decision.layout_changes, actions)
    problems += [f"{v.constraint} {v.job}: {v.message}" for v in violations]
    if problems:
        head = f"{policy} at {t:.0f} s made a plan the checker rejects"
        raise SimulationError([head, *problems[:20]])
    borrowed = borrowed_jobs(problem.cluster, problem.jobs, assignments)
    return CheckedPlan(watts, frozenset(borrowed))


def _config(
    problem: Problem, job: Job, a: Allocation, facts: Mapping[str, TypeFacts]
) -> Config | None:
    """The predicted configuration of an allocation: whole GPUs, or one MIG instance."""
    if a.mig is None:
        return resolve_config(problem, job, a.shape, a.sm_clock_mhz, facts)
    found = instance_configs(job, facts, problem.cluster.mig)
    return found.get((a.shape.gpu_type, a.mig.profile, a.sm_clock_mhz))


def tenant_shares(
    active: Sequence[LiveJob], available: Mapping[str, int], budget_watts: float | None
) -> dict[str, tuple[float, float, float]]:
    """Per tenant with work: its dominant share, demand share and requested share after a
    round (``solver.simulate.tenants.dominant_shares``)."""

    def most(j: LiveJob) -> int:
        return max(j.sim.max_gpus, j.gpus())

    running = [
        (j.sim.trace.tenant, j.allocation.shape.gpu_type, j.gpus(), j.predicted_watts, most(j))
        for j in active
        if j.allocation is not None
    ]
    waiting = [
        (j.sim.trace.tenant, j.sim.trace.num_gpus, most(j)) for j in active if j.allocation is None
    ]
    return dominant_shares(running, waiting, available, budget_watts)
