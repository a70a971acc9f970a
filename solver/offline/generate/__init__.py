"""Benchmark instance generator: seeded, realistic ``SolveRequest`` snapshots from public data.

Clusters follow the Alibaba PAI 2020 machine spec (``data/alibaba``) or a mix of current 8-GPU
servers; GPU figures come from the catalog (``models/gpus.json``). Job sizes, durations and
tenants are drawn from the Philly trace (``data/philly``). A share of the jobs carry measured
throughput profiles (Gavel on K80/P100/V100, Pollux on T4); the others carry a public
transformer architecture for the analytic model. ``instances/README.md`` states every
assumption. The JSON form of the request is the instance file format::

    python -m solver.offline.generate --nodes 128 --jobs 256 --seed 1 --out instances/medium.json
    python -m solver.offline.generate --tiny instances
    python -m solver.offline.generate --family hetero-power-32 --seed 1 --out hp.json

The package: ``spec`` (InstanceSpec), ``data`` (the public extracts), ``cluster`` (node mixes,
racks, the allocator), ``jobs`` (profile and model jobs), ``instance`` (``generate``,
``to_json``), ``tiny`` (the hand-checkable instances) and ``cli``.
"""

from __future__ import annotations

from solver.offline.generate.cli import (
    FAMILIES,
    FAMILY_ARGS,
    HETERO_POWER_ARGS,
    HETERO_POWER_FAMILIES,
    build_parser,
    main,
    spec_from_args,
)
from solver.offline.generate.cluster import (
    HETERO_POWER_KINDS,
    MIXES,
    MODERN_KINDS,
    NETWORK_GBPS,
    hybrid_node_kinds,
    node_counts,
)
from solver.offline.generate.data import (
    DATA_DIR,
    GAVEL_PARAMETERS,
    GAVEL_TYPES,
    PAI_TYPES,
    POLLUX_PARAMETERS,
    MeasuredPoint,
    MeasuredWorkload,
    Philly,
    gavel_workloads,
    load_philly,
    monotone,
    packed_placement,
    pai_node_kinds,
    pollux_workloads,
)
from solver.offline.generate.instance import (
    DEADLINE_TIGHTNESS,
    generate,
    rack_power_budgets,
    to_json,
)
from solver.offline.generate.jobs import (
    BYTES_PER_PARAMETER,
    ELASTIC_SCALE_DOWN,
    MODEL_ARCHITECTURES,
    STATE_MEMORY_SHARE,
    architectures,
    model_parallel_degree,
    profile_points,
    running_shape,
    state_gib,
)
from solver.offline.generate.spec import InstanceSpec, NodeKind, SpecError
from solver.offline.generate.tiny import tiny_instances

__all__ = [
    "BYTES_PER_PARAMETER",
    "DATA_DIR",
    "DEADLINE_TIGHTNESS",
    "ELASTIC_SCALE_DOWN",
    "FAMILIES",
    "FAMILY_ARGS",
    "GAVEL_PARAMETERS",
    "GAVEL_TYPES",
    "HETERO_POWER_ARGS",
    "HETERO_POWER_FAMILIES",
    "HETERO_POWER_KINDS",
    "MIXES",
    "MODEL_ARCHITECTURES",
    "MODERN_KINDS",
    "NETWORK_GBPS",
    "PAI_TYPES",
    "POLLUX_PARAMETERS",
    "STATE_MEMORY_SHARE",
    "InstanceSpec",
    "MeasuredPoint",
    "MeasuredWorkload",
    "NodeKind",
    "Philly",
    "SpecError",
    "architectures",
    "build_parser",
    "gavel_workloads",
    "generate",
    "hybrid_node_kinds",
    "load_philly",
    "main",
    "model_parallel_degree",
    "monotone",
    "node_counts",
    "packed_placement",
    "pai_node_kinds",
    "pollux_workloads",
    "profile_points",
    "rack_power_budgets",
    "running_shape",
    "spec_from_args",
    "state_gib",
    "tiny_instances",
    "to_json",
]
