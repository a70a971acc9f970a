"""The one home of what every door shares: limits, defaults, durations as text, and the names of
backends and export formats.

The service, the CLI, batches, sweeps and profiles read these rather than keeping their own
copies, so that a default or a name changes in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.domain import (
    DEFAULT_TIME_BUDGET_SECONDS,
    Backend,
    EnergyBasis,
    FairnessMode,
    FairnessScope,
)
from solver.wire import MAX_JOB_WEIGHT, MIN_JOB_WEIGHT, weight_problem

INT32_MAX = 2**31 - 1
"""Largest value of the wire's int32 fields (seed, threads, counts)."""
MAX_THREADS = 256
"""Most solver threads a request, profile or flag may ask for."""
MAX_TIME_BUDGET_SECONDS = 300.0
"""Default of the largest time budget a server accepts."""
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Default largest request or response: snapshots of thousands of nodes exceed gRPC's 4 MiB."""
EXPORT_FORMATS = ("mps", "lp")
"""File formats ``dsfro export`` writes the full model in."""

# Numeric ranges of a request. Each maximum is orders of magnitude above any real cluster, yet
# small enough that every sum and product the models form (power in mW, objective coefficients
# scaled to integers for CP-SAT) stays finite and within int64. Not settings: a server that
# raised them would let requests break its own models.
MAX_POWER_WATTS = 1e10
"""Cluster and rack power budgets and a configuration's draw: 10 GW, above the largest data
centre campus announced (a few GW); in mW (the power rows' unit) 1e13, far inside int64."""
MAX_GPU_WATTS = 1e5
"""A GPU's TDP and idle power: 100 kW, against 0.3-1.5 kW for today's accelerators."""
MAX_GPU_MEMORY_GIB = 1e6
"""Memory of one GPU, and a configuration's memory per GPU: 1 PiB, against 80-288 GiB today."""
MAX_TFLOPS = 1e7
"""Peak TFLOPs of one GPU: 10 EFLOPs, against ~1,000-5,000 TFLOPs today."""
MIN_TFLOPS = 1e-3
"""Peak TFLOPs of one GPU: at least 1 GFLOP/s, against ~10 for the oldest GPUs profiled (K80).
Near-zero (subnormal) peaks made a step's compute time infinite: NaN GPU activity, and
EvaluatePlan and Solve failed (INTERNAL) on the plans of such a type."""
MAX_BANDWIDTH_GBPS = 1e8
"""Memory, intra-node and network bandwidth: 100 Pb/s, against ~1e4 Gb/s today."""
MIN_BANDWIDTH_GBPS = 1e-3
"""Memory, intra-node and network bandwidth: at least 1 MB/s (1 Mb/s for the network). A
subnormal bandwidth halved to 0 (a ZeroDivisionError) or made transfer times infinite."""
MAX_SM_CLOCK_MHZ = 100_000
"""An SM clock: 100 GHz, against ~2 GHz today."""
MAX_OBJECTIVE_WEIGHT = 1e3
"""Each objective weight (throughput, energy, migration, locality, deadline). The defaults are
0.01-1, so 1e3 leaves any ratio an operator means. CP-SAT scales the objective to integers
(x1e6): objective weight x job weight x 1e6 must stay well inside int64 summed over every
configuration, and at 1e6 x 1e6 a single term (1e18) already overflowed it."""
MAX_SAMPLES = 1e18
"""Remaining samples of a job: 1e18, against ~1e11 for the largest training runs."""
MAX_SAMPLES_PER_SECOND = 1e12
"""A configuration's measured throughput, against ~1e6 samples/s in the bundled profiles."""
MAX_MODEL_PARAMETERS = 1e15
"""Parameters of a modelled job: a quadrillion, against ~1e12 for the largest models."""
MIN_MODEL_PARAMETERS = 1.0
"""Parameters of a modelled job: at least one. Fewer, down to subnormal numbers, made the
analytic model's compute time underflow to 0, so a one-GPU step took no time: infinite
throughput, NaN objective coefficients, and a HiGHS bound LP that ignored its time limit."""
MAX_DEADLINE_SECONDS = 10 * 365 * 86400.0
"""Time to a job's deadline: ten years."""
MAX_ENERGY_JOULES = 1e17
"""An energy budget: 10 GW for a year (3.2e17 J) rounded down to 1e17 J."""
MAX_ENERGY_HORIZON_SECONDS = 10 * 365 * 86400.0
"""An energy budget's horizon: ten years."""
MAX_JOB_AGE_SECONDS = 10 * 365 * 86400.0
"""Time since a job was submitted: ten years."""
MAX_FAIRNESS_HORIZON_SECONDS = 7 * 86400.0
"""How long one plan runs: a week (scheduling rounds are seconds to hours)."""
MAX_FAIRNESS_MEAN_WEIGHT = 1e3
"""Fairness.mean_weight: beyond a thousand times the least row, F is the mean row alone in
all but name (and the objective's scale suffers as for MAX_OBJECTIVE_WEIGHT)."""
MIN_DEADLINE_SAMPLES = 1.0
"""Remaining samples of a job with a deadline: at least one (a sample is the smallest unit of
work). Fewer, down to subnormal numbers, made the rate the deadline asks for (samples over
seconds) underflow to 0 and the deadline term divide by zero."""
MAX_HIDDEN_SIZE = 2**20
"""Hidden size of a modelled job: 1,048,576, against ~16,000-25,000 for the largest models."""
MAX_SEQUENCE_LENGTH = 2**24
"""Tokens per sample of a modelled job: 16.8M, against ~4k-1M context lengths today."""
MAX_BATCH_TOKENS = 2**34
"""Tokens per optimizer step (global_batch_size x sequence_length) of a modelled job: 1.7e10,
against ~1.6e7 for the largest runs. With MAX_HIDDEN_SIZE it keeps the analytic model's
integer message sizes (2 bytes x tokens x hidden) far inside int64: beyond it the vectorised
model's int64 arithmetic wrapped around silently (a 1,000x wrong throughput) or raised
OverflowError."""

__all__ = [
    "DEFAULT_TIME_BUDGET_SECONDS",
    "EXPORT_FORMATS",
    "INT32_MAX",
    "MAX_BANDWIDTH_GBPS",
    "MAX_BATCH_TOKENS",
    "MAX_DEADLINE_SECONDS",
    "MAX_FAIRNESS_HORIZON_SECONDS",
    "MAX_FAIRNESS_MEAN_WEIGHT",
    "MAX_GPU_MEMORY_GIB",
    "MAX_GPU_WATTS",
    "MAX_HIDDEN_SIZE",
    "MAX_JOB_AGE_SECONDS",
    "MAX_JOB_WEIGHT",
    "MAX_MESSAGE_BYTES",
    "MAX_MODEL_PARAMETERS",
    "MAX_OBJECTIVE_WEIGHT",
    "MAX_POWER_WATTS",
    "MAX_SAMPLES",
    "MAX_SAMPLES_PER_SECOND",
    "MAX_SEQUENCE_LENGTH",
    "MAX_SM_CLOCK_MHZ",
    "MAX_TFLOPS",
    "MAX_THREADS",
    "MAX_TIME_BUDGET_SECONDS",
    "MIN_BANDWIDTH_GBPS",
    "MIN_DEADLINE_SAMPLES",
    "MIN_JOB_WEIGHT",
    "MIN_MODEL_PARAMETERS",
    "MIN_TFLOPS",
    "Limits",
    "backend_name",
    "backend_names",
    "fairness_mode_names",
    "fairness_scope_names",
    "format_duration",
    "parse_backend",
    "parse_duration",
    "parse_fairness_mode",
    "parse_fairness_scope",
    "weight_problem",
]


@dataclass(frozen=True)
class Limits:
    """Size and time limits of one server; requests beyond them are rejected."""

    max_nodes: int = 20000
    max_jobs: int = 20000
    max_gpus_per_node: int = 64
    max_profile_points_per_job: int = 4096
    max_profile_points: int = 500_000
    """Profile points of all jobs together. Each is read, checked and interpolated (about 3 us
    apiece on a 2-core machine, so 500,000 take some 1.6 s; 7 us before their check and
    conversion were trimmed): 20,000 jobs of 250 points, a 234
    MiB request, took 50 s, answered 34 s past a 10 s budget and turned the server NOT_SERVING.
    Measured profiles hold tens of points a job (a few shapes x clocks x GPU types)."""
    max_gpu_types: int = 256
    """Entries of cluster.gpu_types and of a job's allowed_gpu_types."""
    max_sm_clocks_per_gpu_type: int = 4096
    """Supported clocks of one GPU type; every clock multiplies the configurations enumerated
    (1,000,000 clocks took 7-10 s), and real GPUs expose at most a few hundred."""
    max_rack_power_budgets: int = 20000
    """Entries of cluster.rack_power_budgets: at most one per rack, and a rack has a node."""
    max_queues: int = 10000
    """Entries of cluster.queues: Kueue clusters run hundreds of ClusterQueues, not more."""
    max_placement_slices: int = 4096
    """Slices of one allocation or assignment: 4096 nodes of 8 GPUs is a 32,768-GPU job.
    A slice's gpu_indices (and a node's unavailable_gpu_indices) are limited by
    max_gpus_per_node."""
    max_node_rules: int = 256
    """Entries of a node's labels or taints, of a job's node_selector or node_preferences
    terms, a term's requirements or a job's tolerations (Kubernetes objects carry tens); a
    requirement's values are limited by max_nodes (an IN list of host names)."""
    max_rule_node_pairs: int = 4_000_000
    """Distinct node rules (a job's node_selector and tolerations, as a whole; its
    node_preferences and tolerations, likewise) times nodes. A rule is resolved into the
    nodes it bars (or how much it dislikes each), over every node, and every path works per
    distinct barred set: 2,000 jobs each confined by its own selector to 50 of 20,000 nodes
    (40 million pairs, a 4 MB request) took 4-6 s to read and answered 7-12 s late at 3 and
    10 s budgets. Jobs under one rule share it: a site's rules are few."""
    max_name_length: int = 253
    """Characters of a name (GPU types, nodes, racks, jobs, tenants): a DNS name's maximum, as
    Kubernetes allows for object names. Names must also be printable (no control characters)."""
    max_time_budget_seconds: float = MAX_TIME_BUDGET_SECONDS
    default_time_budget_seconds: float = DEFAULT_TIME_BUDGET_SECONDS
    """The budget of a request that sets none."""

    def time_budget(self, requested: float | None) -> float:
        """The budget a request gets: its own, else this server's default."""
        return self.default_time_budget_seconds if requested is None else requested


# ---------------------------------------------------------------- durations

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


def parse_duration(text: str) -> float:
    """Seconds of ``5s``, ``500ms``, ``1.5s``, ``2m``, ``1h``, ``2d`` (a bare number is seconds).

    Raises ValueError for anything else, and for zero.
    """
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"invalid duration {text!r}: use e.g. 5s, 500ms, 1.5s, 2m, 1h or 2d")
    seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2) or "s"]
    if seconds <= 0:
        raise ValueError(f"duration {text!r} must be > 0")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest of ``500ms``, ``5s``, ``1.5s`` that parse_duration reads back exactly."""
    if seconds < 1 and float(f"{seconds * 1000:g}") / 1000 == seconds:
        return f"{seconds * 1000:g}ms"
    if float(f"{seconds:g}") == seconds:
        return f"{seconds:g}s"
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


# ---------------------------------------------------------------- names


def backend_name(backend: Backend) -> str:
    """A backend's lower-case name, as the CLI, profiles and batch results spell it."""
    return backend.name.lower()


def backend_names() -> tuple[str, ...]:
    """Every backend's lower-case name."""
    return tuple(backend_name(b) for b in Backend)


def fairness_mode_names() -> tuple[str, ...]:
    """Every fairness mode's lower-case name (max_min, drf, ...)."""
    return tuple(m.name.lower() for m in FairnessMode)


def fairness_scope_names() -> tuple[str, ...]:
    return tuple(s.name.lower() for s in FairnessScope)


def parse_fairness_mode(text: str) -> FairnessMode:
    """The fairness mode of a name (case-insensitive, '-' for '_'); ValueError names them."""
    try:
        return FairnessMode[text.strip().upper().replace("-", "_")]
    except KeyError:
        names = ", ".join(fairness_mode_names())
        raise ValueError(f"unknown fairness mode {text!r}; one of {names}") from None


def parse_fairness_scope(text: str) -> FairnessScope:
    """The fairness scope of a name (case-insensitive); ValueError names them."""
    try:
        return FairnessScope[text.strip().upper()]
    except KeyError:
        names = ", ".join(fairness_scope_names())
        raise ValueError(f"unknown fairness scope {text!r}; one of {names}") from None


def parse_energy_basis(text: str) -> EnergyBasis:
    """The energy basis of a name (case-insensitive: draw, waste); ValueError names them."""
    try:
        return EnergyBasis[text.strip().upper()]
    except KeyError:
        names = ", ".join(b.name.lower() for b in EnergyBasis)
        raise ValueError(f"unknown energy basis {text!r}; one of {names}") from None


def parse_backend(text: str) -> Backend:
    """The backend of a name (case-insensitive); ValueError names the valid ones."""
    try:
        return Backend[text.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown backend {text!r}; one of {', '.join(backend_names())}") from None
