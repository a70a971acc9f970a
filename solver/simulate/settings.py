"""What a simulation assumes beyond its trace and cluster: the round rule, the policy's time, the
restart cost, node failures, feedback, the power headroom, node power saving and the truth's
error model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from solver.domain import EnergyBasis
from solver.perfmodel.guard import GuardParams
from solver.simulate.grid import GridSettings
from solver.simulate.power_saving import PowerSavingSettings
from solver.simulate.truth import DEFAULT_POWER_SIGMA, TruthSettings

SIMULATED_GUARD = GuardParams(
    model_uncertainty=DEFAULT_POWER_SIGMA, measured_uncertainty=DEFAULT_POWER_SIGMA
)
"""The power margin and limits of a simulation: the product's z and limit_z, and measured profiles
as uncertain as model predictions, because a simulated profile's watts are the model's
(solver/simulate/truth.py: no public table gives a job's watts per configuration)."""

CHECKPOINT_BYTES_PER_PARAMETER = 14
"""Mixed-precision Adam: fp16 weights (2 bytes) and fp32 weights, momentum and variance (12)
(Rajbhandari et al., ZeRO, SC'20, section 3.1); gradients are not checkpointed."""
WEIGHT_BYTES_PER_PARAMETER = 2
"""An evaluation job's model: its 16-bit weights alone (the same source), what it loads when it
restarts; it has no training state to save (its progress is the batches done)."""


RECONFIGURATION_S = 60.0
"""An assumption (no public figure found): destroying and creating GPU and compute instances
(``nvidia-smi mig -dci/-dgi/-cgi``, the instances concerned idle, NVIDIA MIG user guide) and
the device plugin advertising the new resources before a pod can bind one; twice the restart
overhead below. Configurable."""


@dataclass(frozen=True)
class RestartCost:
    """Seconds a job holds its GPUs without progress when it (re)starts after a stop, a move
    or a reshape: a fixed overhead (process start, communicator set-up) plus saving its
    checkpoint from the nodes it ran on and loading it on the nodes it runs on, each node its
    shard in parallel at ``bandwidth_bytes_per_s`` (distributed checkpointing, as Megatron-LM's
    and PyTorch DCP's sharded checkpoints are written and read: a job on n nodes moves its
    checkpoint n times as fast as one node). Both figures are assumptions of a scenario."""

    overhead_s: float = 30.0
    bandwidth_bytes_per_s: float = 2e9
    """Per node."""

    def seconds(
        self, parameters: float, save_nodes: int = 1, load_nodes: int = 1, evaluation: bool = False
    ) -> float:
        """A training job saves and loads its checkpoint; an evaluation job only loads its
        weights."""
        bandwidth = self.bandwidth_bytes_per_s
        if evaluation:
            weights = WEIGHT_BYTES_PER_PARAMETER * parameters
            return self.overhead_s + weights / (bandwidth * max(load_nodes, 1))
        size = CHECKPOINT_BYTES_PER_PARAMETER * parameters
        return (
            self.overhead_s
            + size / (bandwidth * max(save_nodes, 1))
            + size / (bandwidth * max(load_nodes, 1))
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
    fixed_rounds: bool = False
    """Gavel's simulator's rule instead (opt-in, the same for every policy): a round every
    ``round_interval_s``, arrivals and completions wait for it; a round ends early only when
    every job running in it has finished (Gavel's round ends with its last micro-task), and
    while nothing runs the next arrival starts one."""
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
    told budget x (1 - headroom); exceedance is measured against the whole budget. The same
    default (0) for scenarios and runs from files: ``power_guard`` sizes the headroom."""
    power_guard: GuardParams | None = SIMULATED_GUARD
    """The power margin rule and power limits for every policy (solver/simulate/guard.py);
    None: neither (the flat headroom alone, as before)."""
    truth: TruthSettings = field(default_factory=TruthSettings)
    reconfiguration_s: float = RECONFIGURATION_S
    """Seconds a GPU whose MIG layout a plan changes is unusable for the jobs that start on
    its changed part (``solver.simulate.mig_state``)."""
    power_saving: PowerSavingSettings = field(default_factory=PowerSavingSettings)
    """The cluster's node power saving, the same rule for every policy
    (``solver.simulate.power_saving``); off by default."""
    weights: Mapping[str, float] | None = None
    """Objective weights DSFRO's requests set (by ``ObjectiveWeights`` field name); None: the
    defaults. Plain data, so that settings pickle to the worker processes of ``--compare``."""
    energy_basis: EnergyBasis = EnergyBasis.DRAW
    """The energy basis DSFRO's requests set (a profile's ``energy_basis``; docs/objective.md)."""
    grid: GridSettings | None = None
    """The grid's true carbon intensity and price, and the forecast every request carries
    (``solver.simulate.grid``); None: none, and no carbon figures."""


SAME_INSTANT_S = 1e-9
"""Instants closer than this are one instant (events computed by different sums)."""
