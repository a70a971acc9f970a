"""The simulation's plain data: trace jobs, simulated jobs, the policy interface, and the log a
run leaves for the metrics.

A policy sees one round at a time: the ``SolveRequest`` of the snapshot (what any scheduler would
send DSFRO: free GPUs, current allocations, remaining samples, deadlines, the power budget in
force) and the ``JobHistory`` a cluster scheduler keeps anyway (submission time, attained
service). Every policy gets the same ``RoundInput``; none sees the truth model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import Allocation, ModelSpec, Problem, ThroughputProfile
from solver.mig import LayoutChange
from solver.power_states import PowerAction
from solver.simulate.grid import GridSettings


class SimulationError(ValueError):
    """Bad simulation input, or a policy that broke the rules; ``problems`` has one line each,
    naming the file, row and column where there is one."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class TraceJob:
    """One row of a trace (docs/simulation.md)."""

    job_id: str
    submit_time_s: float
    tenant: str
    workload: str
    """A name the workload mix knows: an architecture of models/architectures.json, a measured
    workload, or a class the mix draws from (e.g. ``philly``)."""
    num_gpus: int
    """GPUs the job asks for."""
    duration_s: float
    """Run time on ``num_gpus`` GPUs of the reference type at full clock."""
    deadline_s: float | None = None
    """Seconds after submission by which the job should finish; None: no deadline."""
    weight: float = 1.0
    preemptible: bool = True
    slices: bool = False
    """The job may run on one MIG instance instead of a whole GPU (one-GPU jobs only)."""
    evaluation: bool = False
    """The job evaluates a model: no optimizer state, so a restart reloads its weights only."""
    row: int = field(default=0, compare=False)
    """Line of the job in its trace file (header = 1), for error messages; 0: not from a file.
    Not part of equality: the same job read from two files is the same job."""


@dataclass(frozen=True)
class SimJob:
    """A trace job made concrete by the workload mix: what the policies see of it, and how much
    work it is."""

    trace: TraceJob
    workload: ModelSpec | ThroughputProfile
    """The prediction the policies get: a model for the analytic estimate, or measured points."""
    workload_name: str
    """The concrete workload (architecture or measured workload label)."""
    min_gpus: int
    max_gpus: int
    """The GPU range a policy that resizes jobs may use (rigid policies use trace.num_gpus)."""
    allowed_gpu_types: frozenset[str] = frozenset()
    """Empty: any type."""
    parameters: float = 0.0
    """Model parameters, for the checkpoint size of a restart."""
    measured: bool = False
    """Whether the workload is a measured profile (the truth is then the measurement)."""
    slices: bool = False
    """The job may run on one MIG instance (the trace's ``slices``)."""
    gpu_fraction: float = 1.0
    """The fraction of a whole GPU the job can use (its true slice speed, and the basis of
    its predicted one: ``solver.simulate.slicing``); 1: it saturates a GPU."""
    fraction_source: str = ""
    """The measured job type the fraction comes from (Gavel's colocation data)."""

    @property
    def name(self) -> str:
        return self.trace.job_id


@dataclass(frozen=True)
class PowerStep:
    """From ``start_s`` (seconds into the simulation, repeating every ``period_s`` of the
    schedule) the cluster budget is ``watts`` (None: no budget)."""

    start_s: float
    watts: float | None


@dataclass(frozen=True)
class PowerSchedule:
    """A cluster power budget over time: steps that repeat every ``period_s`` (a day by default).
    An empty schedule keeps the cluster file's own budget."""

    steps: tuple[PowerStep, ...] = ()
    period_s: float = 86_400.0

    def budget_at(self, t: float, default: float | None) -> float | None:
        if not self.steps:
            return default
        phase = t % self.period_s
        current = self.steps[-1].watts  # before the first step: the last one (it wraps)
        for s in self.steps:
            if s.start_s <= phase:
                current = s.watts
        return current

    def changes_between(self, t0: float, t1: float) -> list[float]:
        """Times in (t0, t1] at which the budget changes."""
        if not self.steps:
            return []
        out = []
        base = (t0 // self.period_s) * self.period_s
        while base <= t1:
            for s in self.steps:
                t = base + s.start_s
                if t0 < t <= t1:
                    out.append(t)
            base += self.period_s
        return sorted(out)


# ---------------------------------------------------------------- the policy interface


@dataclass(frozen=True)
class JobHistory:
    """What the scheduler knows of a job beyond the snapshot."""

    submit_time_s: float
    requested_gpus: int
    attained_gpu_seconds: float = 0.0
    """GPU-seconds the job has held so far (Tiresias' attained service)."""
    seconds_by_type: Mapping[str, float] = field(default_factory=dict)
    """Seconds the job has run on each GPU type (Gavel's time-sharing accounting)."""
    rounds_run: int = 0


@dataclass(frozen=True)
class RoundInput:
    request: pb.SolveRequest
    """The snapshot as a scheduler sends it; ``request.options.time_budget`` is the policy's
    time for this round."""
    problem: Problem
    """The same snapshot validated and converted (once, by the engine, for every policy)."""
    now_s: float
    round_index: int
    history: Mapping[str, JobHistory]
    round_length_s: float
    """The regular interval between rounds (the next round may come earlier, on an event)."""


@dataclass(frozen=True)
class Decision:
    allocations: Mapping[str, Allocation]
    """Each job that runs from now on: GPU type, shape, clock, GPUs. Jobs absent wait."""
    solver_seconds: float
    """Wall time the policy took to decide."""
    detail: str = ""
    layout_changes: tuple[LayoutChange, ...] = ()
    """Every GPU whose MIG layout the plan changes, with its new layout."""
    power_actions: tuple[PowerAction, ...] = ()
    """The node power actions the policy planned (DSFRO's); the engine checks its SUSPENDs and
    resumes every suspended node a plan uses, whoever planned (``power_saving.resumes_for``)."""
    next_round_s: float | None = None
    """When the policy's own round ends (Gavel's leases, every 360 s), if the engine is to call
    it then as well as at its interval and at events; None: the engine's rounds only."""


class Policy(Protocol):
    """Snapshot in, plan out. ``decide`` must return a plan the checker accepts (GPUs exist,
    are free and given once, whole gangs, predicted power within the budget in force)."""

    @property
    def name(self) -> str: ...

    def decide(self, round_input: RoundInput) -> Decision: ...

    def close(self) -> None:
        """Release what the policy holds (a channel, a pool)."""
        ...


# ---------------------------------------------------------------- the log of a run


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    tenant: str
    workload: str
    requested_gpus: int
    weight: float
    submit_s: float
    first_start_s: float | None
    finish_s: float | None
    """None: unfinished when the simulation stopped."""
    deadline_s: float | None
    """Absolute time the job should finish by; None: no deadline."""
    isolated_s: float
    """The trace's duration: the job's run time alone on its requested GPUs (finish-time
    fairness compares the JCT with it)."""
    samples: float
    gpu_seconds: float
    energy_j: float
    migrations: int
    """Moves or reshapes of a running job (each costs a restart)."""
    preemptions: int
    """Stops of a running job before it finished."""
    restarts: int = 0
    """Starts after a stop plus migrations: each paid the restart delay (if any)."""
    restart_gpu_seconds: float = 0.0
    """GPU-seconds the job held its GPUs during restart delays, without progress."""
    normalized_s: float = 0.0
    """Attained normalized service: seconds weighted by the job's predicted rate over its
    equal-share rate (``solver.simulate.tenants``)."""
    borrowed_gpu_seconds: float = 0.0
    """GPU-seconds run on quota its queue borrowed from its cohort (the plans' ``borrowed``
    jobs, ``solver.perfmodel.quotas.borrowed_jobs``)."""
    slices: bool = False
    """The job was allowed to run on a MIG instance (a small job)."""
    slice_seconds: float = 0.0
    """Seconds it ran on a MIG instance."""
    resume_gpu_seconds: float = 0.0
    """GPU-seconds the job held its GPUs waiting for suspended nodes to resume (no progress;
    within ``restart_gpu_seconds`` as well)."""


@dataclass(frozen=True)
class RoundRecord:
    index: int
    time_s: float
    solver_seconds: float
    budget_seconds: float
    jobs_waiting: int
    jobs_running: int
    gpus_busy: int
    gpus_available: int
    predicted_watts: float
    """The plan's predicted draw (running jobs' predicted watts plus idle GPUs)."""
    budget_watts: float | None
    migrations: int
    starts: int
    preemptions: int
    detail: str = ""
    tenant_shares: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    """Per tenant with work after the round: (dominant share, demand share, requested share)
    (``solver.simulate.tenants.dominant_shares``)."""
    reconfigurations: int = 0
    """GPUs whose MIG layout the plan changed."""
    invalid_layouts: int = 0
    """GPUs whose layout after the plan cannot exist, or has two jobs on one instance
    (``solver.simulate.mig_state``; must be 0)."""


@dataclass(frozen=True)
class PowerSegment:
    """An interval over which nothing changed: the cluster's true and predicted draw."""

    start_s: float
    end_s: float
    true_watts: float
    predicted_watts: float
    budget_watts: float | None
    gpus_busy: int
    """GPUs held by running jobs (restarting ones included)."""
    gpus_computing: int
    """GPUs of jobs making progress (not restarting)."""
    gpus_available: int
    work_gpu_s: float = 0.0
    """Work done in the interval, in reference GPU-seconds: each running job's samples over
    its total, times its trace GPUs times its trace duration."""


@dataclass(frozen=True)
class QueueRecord:
    """A tenant queue as the per-tenant metrics need it."""

    name: str
    weight: float
    nominal_gpus: float
    """Its nominal quota summed over GPU types: the GPUs it is entitled to."""


@dataclass(frozen=True)
class SimulationLog:
    policy: str
    seed: int
    scenario: str
    jobs: tuple[JobRecord, ...]
    rounds: tuple[RoundRecord, ...]
    power: tuple[PowerSegment, ...]
    end_s: float
    """Time the last job finished (or the simulation was stopped)."""
    stopped: str = ""
    """Why the run stopped before every job finished; "" if every job finished."""
    queues: tuple[QueueRecord, ...] = ()
    """The cluster's tenant queues (empty: none declared)."""
    idle_watts: float = 0.0
    """The cluster's draw with every installed GPU idle: what its energy is padded with up to a
    longer horizon (``solver.simulate.metrics``; a cluster keeps running after a trace ends);
    under node power saving, the draw at the end in the nodes' states then."""
    idle_tail: tuple[tuple[float, float], ...] = ()
    """Under node power saving: (seconds after the end, draw from then on) as the idle nodes
    suspend after the trace (``NodeStates.tail``); empty: ``idle_watts`` for good."""
    power_saving: bool = False
    """Whether the cluster's node power saving was on (the counts below are defined)."""
    grid: GridSettings | None = None
    """The true grid the run's carbon and cost are counted on (None: none given)."""
    suspends: int = 0
    resumes: int = 0
    suspended_node_seconds: float = 0.0
