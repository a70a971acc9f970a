"""What determines an instance: the kinds of server and the shares of each kind of job."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from solver.app.limits import Limits


class SpecError(ValueError):
    """A spec that cannot make an instance; ``field`` names the ``InstanceSpec`` field at fault
    (the command line reports it as its option)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


@dataclass(frozen=True)
class NodeKind:
    """One kind of server: its GPU type, GPUs per server, relative share of the nodes."""

    gpu_type: str
    gpus_per_node: int
    share: float
    nodes_per_rack: int = 8


@dataclass(frozen=True)
class InstanceSpec:
    """Everything that determines an instance; the same spec always gives the same bytes."""

    name: str
    """A label for the instance (not written into the request)."""
    num_nodes: int
    num_jobs: int
    node_kinds: tuple[NodeKind, ...]
    seed: int = 0
    profile_share: float = 0.5
    """Share of jobs with a measured ThroughputProfile; the rest get a ModelSpec."""
    running_share: float = 0.3
    """Share of jobs that try to get a current allocation (if their GPUs are free)."""
    non_preemptible_share: float = 0.1
    """Share of the running jobs that may not be moved (at least one if any runs)."""
    deadline_share: float = 0.2
    rigid_share: float = 0.5
    """Share of jobs with min_gpus == max_gpus."""
    restricted_share: float = 0.25
    """Share of model jobs whose allowed GPU types are a strict subset of the cluster's."""
    unavailable_share: float = 0.01
    """Share of all GPUs marked unavailable."""
    power_budget_fraction: float | None = None
    """Cluster GPU power budget as a fraction of all GPUs at TDP; None: no budget."""
    rack_power_budget_fraction: float | None = None
    """Every rack's GPU power budget as a fraction of its GPUs at TDP; None: no rack budgets."""
    tight_rack_share: float = 0.0
    """Share of the racks (at least one if above 0) whose budget is the tighter
    ``tight_rack_power_budget_fraction`` instead (drawn uniformly)."""
    tight_rack_power_budget_fraction: float | None = None
    time_budget_seconds: float = 10.0
    slice_share: float = 0.0
    """Share of jobs that are one-GPU slice jobs (docs/mig.md); they replace profile or model
    jobs at the same positions."""
    philly_view: str = "snapshot"
    """How GPU counts are weighted: "snapshot" (by job duration: the jobs present at one
    moment) or "arrivals" (by job count: the jobs as submitted)."""

    def __post_init__(self) -> None:
        # Beyond a server's limits the snapshot is refused whole (--nodes 100000000 ran out
        # of memory building it).
        most = Limits()
        if not 1 <= self.num_nodes <= most.max_nodes:
            top = f"{most.max_nodes:,} (max_nodes)"
            raise SpecError("num_nodes", f"must be from 1 to {top}, got {self.num_nodes}")
        if not 0 <= self.num_jobs <= most.max_jobs:
            top = f"{most.max_jobs:,} (max_jobs)"
            raise SpecError("num_jobs", f"must be from 0 to {top}, got {self.num_jobs}")
        if self.seed < 0:
            raise SpecError("seed", f"must be >= 0, got {self.seed}")
        if not math.isfinite(self.time_budget_seconds) or self.time_budget_seconds <= 0:
            raise SpecError(
                "time_budget_seconds", f"must be finite and > 0, got {self.time_budget_seconds}"
            )
        if not self.node_kinds or any(k.share < 0 or k.gpus_per_node < 1 for k in self.node_kinds):
            raise SpecError("node_kinds", "must be non-empty with shares >= 0 and GPUs >= 1")
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_share") and not 0.0 <= value <= 1.0:
                raise SpecError(f.name, f"must be a share in [0, 1], got {value}")
            if f.name.endswith("_fraction") and value is not None and not 0 < value <= 1:
                raise SpecError(f.name, f"must be a fraction in (0, 1], got {value}")
        if self.philly_view not in ("snapshot", "arrivals"):
            raise SpecError("philly_view", "must be 'snapshot' or 'arrivals'")
        if self.tight_rack_share > 0:
            for name in ("rack_power_budget_fraction", "tight_rack_power_budget_fraction"):
                if getattr(self, name) is None:
                    raise SpecError(name, "needed where a share of the racks is tight")
