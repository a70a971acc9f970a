"""What determines an instance: the kinds of server and the shares of each kind of job."""

from __future__ import annotations

from dataclasses import dataclass


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
        if self.num_nodes < 1 or self.num_jobs < 0:
            raise ValueError("num_nodes must be >= 1 and num_jobs >= 0")
        if not self.node_kinds or any(k.share < 0 or k.gpus_per_node < 1 for k in self.node_kinds):
            raise ValueError("node_kinds must be non-empty with shares >= 0 and GPUs >= 1")
        for share in (
            self.profile_share,
            self.running_share,
            self.non_preemptible_share,
            self.deadline_share,
            self.rigid_share,
            self.restricted_share,
            self.unavailable_share,
            self.tight_rack_share,
            self.slice_share,
        ):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"share {share} not in [0, 1]")
        if self.philly_view not in ("snapshot", "arrivals"):
            raise ValueError("philly_view must be 'snapshot' or 'arrivals'")
        for fraction in (
            self.power_budget_fraction,
            self.rack_power_budget_fraction,
            self.tight_rack_power_budget_fraction,
        ):
            if fraction is not None and not 0 < fraction <= 1:
                raise ValueError("power budget fractions must be in (0, 1]")
        if self.tight_rack_share > 0 and (
            self.rack_power_budget_fraction is None or self.tight_rack_power_budget_fraction is None
        ):
            raise ValueError("tight racks need both rack power budget fractions")
