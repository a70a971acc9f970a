"""The problem and its answer as plain typed data.

Formulations, heuristics and the checker read these types only; protobuf stays at the edge
(``solver.app.convert``). All types are immutable so that one snapshot can be shared by backends
that run concurrently.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from solver.fairness import (
    DEFAULT_FAIRNESS_HORIZON_SECONDS as DEFAULT_FAIRNESS_HORIZON_SECONDS,
)
from solver.fairness import Fairness as Fairness
from solver.fairness import FairnessMode as FairnessMode
from solver.fairness import FairnessScope as FairnessScope
from solver.grid import GridForecast
from solver.memos import Memoized, positions_in
from solver.mig import GpuLayout, LayoutChange, MigGeometry, MigInstance, SliceRequest
from solver.power_states import NodePower, PowerAction, PowerSaving
from solver.preferences import NodePreference
from solver.queues import DEFAULT_QUEUE as DEFAULT_QUEUE
from solver.queues import POWER as POWER
from solver.queues import AttainedService as AttainedService
from solver.queues import Quota as Quota
from solver.queues import TenantQueue as TenantQueue
from solver.weights import EnergyBasis as EnergyBasis
from solver.weights import ObjectiveBreakdown as ObjectiveBreakdown
from solver.weights import ObjectiveWeights as ObjectiveWeights

# ---------------------------------------------------------------- cluster


@dataclass(frozen=True)
class GpuType:
    """A GPU model with datasheet figures (see ``models/gpus.json``)."""

    name: str
    memory_gib: float
    peak_tflops: float
    memory_bandwidth_gbps: float
    intra_node_bandwidth_gbps: float
    tdp_watts: float
    idle_watts: float
    sm_clocks_mhz: tuple[int, ...]

    @property
    def max_clock_mhz(self) -> int:
        return max(self.sm_clocks_mhz)


@dataclass(frozen=True)
class Node:
    name: str
    gpu_type: str
    gpu_count: int
    unavailable_gpu_indices: frozenset[int]
    rack: str
    network_bandwidth_gbps: float
    mig_layouts: tuple[GpuLayout, ...] = ()
    """MIG layouts (solver.mig); a GPU not listed is whole."""
    power: NodePower = field(default_factory=NodePower)
    """Up or suspended, idle time, base draw (solver.power_states)."""

    @property
    def available_gpu_indices(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.gpu_count) if i not in self.unavailable_gpu_indices)

    @property
    def available_gpus(self) -> int:
        return self.gpu_count - len(self.unavailable_gpu_indices)


@dataclass(frozen=True)
class Cluster(Memoized):
    gpu_types: Mapping[str, GpuType]
    nodes: tuple[Node, ...]
    power_budget_watts: float | None = None
    rack_power_budgets_watts: Mapping[str, float] = field(default_factory=dict)
    queues: tuple[TenantQueue, ...] = ()
    """Tenant queues and their quotas; empty: nothing is limited by quota."""
    reference_gpu_watts: float | None = None
    """The energy term's denominator when this is a part of a larger cluster (decomposition)."""
    mig: Mapping[str, MigGeometry] = field(default_factory=dict)
    """MIG geometry of GPU types (from models/); filled only for snapshots with slices."""
    power_saving: PowerSaving = field(default_factory=PowerSaving)
    """Which idle nodes may be suspended (solver.power_states); off by default."""
    energy_cap_watts: float | None = None
    """The round's cap of an energy budget; power_budget_watts is already at most it."""
    grid: GridForecast | None = None
    """The grid's carbon intensity and price from now on (solver.grid); None: carbon-blind."""

    @property
    def racks(self) -> tuple[str, ...]:
        return tuple(sorted({n.rack for n in self.nodes}))

    def node(self, name: str) -> Node:
        return self.nodes[self._index()[name]]

    def positions(self, names: frozenset[str]) -> tuple[int, ...]:
        """Ascending positions in ``nodes`` of the nodes `names` names, made once a set."""
        memo: dict[frozenset[str], tuple[int, ...]] = self.__dict__.setdefault("_positions", {})
        if names not in memo:
            memo[names] = positions_in(names, self._index(), self.__dict__["_node_names"])
        return memo[names]

    def _index(self) -> dict[str, int]:
        if "_node_index" not in self.__dict__:
            self.__dict__["_node_index"] = {n.name: k for k, n in enumerate(self.nodes)}
            self.__dict__["_node_names"] = frozenset(self.__dict__["_node_index"])
        index: dict[str, int] = self.__dict__["_node_index"]
        return index

    def queue_of(self, tenant: str) -> TenantQueue | None:
        """The declared queue of a job with this tenant (DEFAULT_QUEUE for none); None: the
        job's queue has no quota."""
        cached: dict[str, TenantQueue] | None = self.__dict__.get("_queue_index")
        if cached is None:
            cached = {q.name: q for q in self.queues}
            object.__setattr__(self, "_queue_index", cached)
        return cached.get(tenant or DEFAULT_QUEUE)

    def max_gpu_watts(self) -> float:
        """Power of every installed GPU at its TDP: the energy term's denominator (summed
        once: every queued job's reason reads it)."""
        if self.reference_gpu_watts is not None:
            return self.reference_gpu_watts
        cached: float | None = self.__dict__.get("_max_gpu_watts")
        if cached is None:
            cached = sum(n.gpu_count * self.gpu_types[n.gpu_type].tdp_watts for n in self.nodes)
            object.__setattr__(self, "_max_gpu_watts", cached)
        return cached


# ---------------------------------------------------------------- jobs


@dataclass(frozen=True)
class ModelSpec:
    """A transformer, sized for the analytic performance model (``solver.perfmodel.throughput``)."""

    parameters: float
    layers: int
    hidden_size: int
    attention_heads: int
    sequence_length: int
    global_batch_size: int


@dataclass(frozen=True)
class ProfilePoint:
    gpu_type: str
    num_gpus: int
    tensor_parallel: int
    pipeline_parallel: int
    sm_clock_mhz: int
    samples_per_second: float
    watts: float
    memory_per_gpu_gib: float
    mig_profile: str = ""
    """Set: measured on one MIG instance of this profile."""


@dataclass(frozen=True)
class ThroughputProfile:
    points: tuple[ProfilePoint, ...]


Workload = ModelSpec | ThroughputProfile


@dataclass(frozen=True)
class Shape:
    """How a job's GPUs are organised: num_gpus = data x tensor x pipeline."""

    gpu_type: str
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int

    @property
    def num_gpus(self) -> int:
        return self.data_parallel * self.tensor_parallel * self.pipeline_parallel


@dataclass(frozen=True)
class GpuSlice:
    node: str
    gpu_indices: tuple[int, ...]


def gpus_per_node(placement: tuple[GpuSlice, ...]) -> dict[str, int]:
    """GPU count per node of a placement."""
    counts: dict[str, int] = {}
    for s in placement:
        counts[s.node] = counts.get(s.node, 0) + len(s.gpu_indices)
    return counts


@dataclass(frozen=True)
class Allocation:
    """Where a job runs now (input) or will run (output)."""

    shape: Shape
    sm_clock_mhz: int
    placement: tuple[GpuSlice, ...]
    mig: MigInstance | None = None
    """Set: on this MIG instance of its one GPU."""
    observed_watts: float | None = None  # measured draw of all its GPUs (input only)

    def gpus_per_node(self) -> dict[str, int]:
        return gpus_per_node(self.placement)


@dataclass(frozen=True)
class Job:
    name: str
    tenant: str
    weight: float
    workload: Workload
    min_gpus: int
    max_gpus: int
    allowed_gpu_types: frozenset[str]
    """Empty: every type of the cluster."""
    remaining_samples: float = 0.0
    deadline_seconds: float | None = None
    current: Allocation | None = None
    preemptible: bool = True
    attained: AttainedService = field(default_factory=AttainedService)
    age_seconds: float = 0.0
    """Seconds since submission (finish-time fairness); 0: unknown or just submitted."""
    slices: SliceRequest | None = None
    """Set: the job may run on one MIG instance."""
    max_deferral_seconds: float | None = None
    """How long after submission a waiting job may wait for cleaner electricity (beside its
    deadline's slack; docs/carbon.md); None: only as its deadline allows."""
    completion_priority: float = 0.0
    """pi_j = 2^-rank by remaining time at best (docs/objective.md, "Completion priority")."""
    excluded_nodes: frozenset[str] = frozenset()
    """Nodes the job must not be placed on; see ``barred_nodes`` for the ones that bind."""
    preference: NodePreference | None = None
    """Nodes it would rather not run on, and how much (solver.preferences); None: any node."""

    def allows(self, gpu_type: str) -> bool:
        return not self.allowed_gpu_types or gpu_type in self.allowed_gpu_types

    @functools.cached_property
    def barred_nodes(self) -> frozenset[str]:
        """Excluded nodes the job does not hold now (an exclusion governs new placements,
        as Slurm's ``--exclude`` does); ``excluded_nodes`` itself where it holds none."""
        held = {s.node for s in self.current.placement} if self.current else set()
        return self.excluded_nodes - held if held & self.excluded_nodes else self.excluded_nodes

    def may_use(self, node: str) -> bool:  # a plan may place the job there (``barred_nodes``)
        return node not in self.barred_nodes

    @property
    def required_samples_per_second(self) -> float | None:
        """Rate that meets the deadline; None without a deadline."""
        if self.deadline_seconds is None or self.remaining_samples <= 0:
            return None
        return self.remaining_samples / self.deadline_seconds


# ---------------------------------------------------------------- request


class Backend(enum.Enum):
    AUTO = "AUTO"
    CPSAT = "CPSAT"
    HEURISTIC = "HEURISTIC"
    AGGREGATE = "AGGREGATE"
    HIGHS = "HIGHS"
    PYOMO = "PYOMO"
    DECOMPOSED = "DECOMPOSED"


DEFAULT_TIME_BUDGET_SECONDS = 5.0
"""The time budget of a request that sets none (a server may lower it: settings.Limits)."""


@dataclass(frozen=True)
class SolveOptions:
    time_budget_seconds: float = DEFAULT_TIME_BUDGET_SECONDS
    backend: Backend = Backend.AUTO
    relative_gap: float = 0.0
    seed: int = 0
    threads: int = 0
    """0: the server's default."""
    pyomo_solver: str = ""
    """Pyomo solver name for Backend.PYOMO; empty: appsi_highs."""


@dataclass(frozen=True)
class Problem(Memoized):
    """A validated solve request."""

    cluster: Cluster
    jobs: tuple[Job, ...]
    weights: ObjectiveWeights = ObjectiveWeights()  # noqa: RUF009 (immutable)
    options: SolveOptions = SolveOptions()
    fairness: Fairness = Fairness()  # noqa: RUF009 (immutable, like the defaults above)


# ---------------------------------------------------------------- configurations


class Config(NamedTuple):
    """One way to run a job: shape and clock, with its predicted performance.

    Everything here is a constant of the configuration, which keeps the models linear. A named
    tuple, not a dataclass: tens of thousands are made for every solve, twice as fast.
    """

    job: str
    shape: Shape
    sm_clock_mhz: int
    samples_per_second: float
    watts: float
    """Power of all the job's GPUs together at this clock."""
    memory_per_gpu_gib: float
    min_nodes: int
    """Fewest nodes of its type that can hold it (tensor groups inside a node)."""
    min_racks: int
    measured: bool = False
    kept_only: bool = False
    """Over the memory model's limit, but the job runs in it now: usable only where it stays."""
    mig_profile: str = ""
    """Set: one MIG instance of this profile (shape 1 x 1 x 1); watts: above idle."""

    @property
    def num_gpus(self) -> int:
        return self.shape.num_gpus

    @property
    def gpu_type(self) -> str:
        return self.shape.gpu_type

    @property
    def tensor_parallel(self) -> int:
        return self.shape.tensor_parallel


# ---------------------------------------------------------------- plan


class JobState(enum.Enum):
    RUNNING = "RUNNING"
    QUEUED = "QUEUED"


class QueueReason(enum.Enum):
    NO_FEASIBLE_CONFIGURATION = "NO_FEASIBLE_CONFIGURATION"
    INSUFFICIENT_RESOURCES = "INSUFFICIENT_RESOURCES"
    NOT_WORTH_RUNNING = "NOT_WORTH_RUNNING"
    DEFERRED = "DEFERRED"
    """Waits for cleaner electricity within its slack (solver.core.carbon)."""


@dataclass(frozen=True)
class JobAssignment:
    job: str
    state: JobState
    config: Config | None = None
    placement: tuple[GpuSlice, ...] = ()
    migrated: bool = False
    queue_reason: QueueReason | None = None
    queue_detail: str = ""
    mig: MigInstance | None = None
    """Set: the MIG instance (profile, start) on the placement's one GPU."""
    power_limit_watts: float | None = None  # per GPU (solver.perfmodel.guard)

    def gpus_per_node(self) -> dict[str, int]:
        return gpus_per_node(self.placement)


def busy_nodes(assignments: Iterable[JobAssignment]) -> set[str]:
    """The nodes on which a running assignment holds a GPU (whole or through a MIG instance)."""
    return {
        s.node
        for a in assignments
        if a.state is JobState.RUNNING
        for s in a.placement
        if s.gpu_indices
    }


@dataclass(frozen=True)
class Plan:
    assignments: tuple[JobAssignment, ...]
    objective: ObjectiveBreakdown
    layout_changes: tuple[LayoutChange, ...] = ()
    """Every GPU whose MIG layout changes, with its new layout."""
    power_actions: tuple[PowerAction, ...] = ()
    """Nodes the plan suspends or resumes (solver.power_states)."""

    def assignment(self, job: str) -> JobAssignment:
        for a in self.assignments:
            if a.job == job:
                return a
        raise KeyError(job)


class Termination(enum.Enum):
    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    FALLBACK = "FALLBACK"
    INFEASIBLE = "INFEASIBLE"


@dataclass(frozen=True)
class SolveStats:
    termination: Termination
    backend_used: Backend
    objective: float
    best_bound: float | None
    relative_gap: float | None
    wall_seconds: float
    first_plan_seconds: float
    num_configurations: int
    num_configurations_enumerated: int
    detail: str = ""
    progress: tuple[tuple[float, float], ...] = ()
    """(seconds since the start, objective) of each better plan kept, in order (or unknown)."""
    resolve_seconds: float | None = None
    """Time the first solve took to a plan worth this answer, when the power margin broke."""


@dataclass(frozen=True)
class SolveResult:
    plan: Plan
    stats: SolveStats
