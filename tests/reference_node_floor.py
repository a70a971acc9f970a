"""The node floor family of the reference model (solver.exact.node_floor), written apart from
the product: one loop over the nodes, its own reading of which nodes are priced."""

from __future__ import annotations

import math

from tests.reference_model import RefFormulation


def add_node_floor(f: RefFormulation) -> None:
    """busy[n] and free[n] on each node power saving may suspend that a job could use: the
    objective charges its base power while busy and each GPU left idle while busy."""
    cluster, w = f.problem.cluster, f.problem.weights
    policy = cluster.power_saving
    if not (policy.enabled and policy.price_node_floor) or w.energy <= 0:
        return
    scale = w.energy / cluster.max_gpu_watts()
    for n in cluster.nodes:
        asleep = n.power.state.value == "SUSPENDED"
        if n.name in policy.exclude_nodes or (n.unavailable_gpu_indices and not asleep):
            continue
        xs = [f.x[name, n.name] for name in f.jobs_with_configs() if (name, n.name) in f.x]
        if not xs:
            continue
        busy = f.add_var(f"busy[{n.name}]", 0, 1)
        free = f.add_var(f"free[{n.name}]", 0, n.gpu_count)
        f.add_row(
            "node_floor",
            f"node_busy[{n.name}]",
            [(x, 1) for x in xs] + [(busy, -n.available_gpus)],
            hi=0,
        )
        f.add_row(
            "node_floor",
            f"node_free[{n.name}]",
            [(busy, n.gpu_count)] + [(x, -1) for x in xs] + [(free, -1)],
            hi=0,
        )
        idle = cluster.gpu_types[n.gpu_type].idle_watts
        charge = [math.ceil(-scale * w * 1_000_000) / 1_000_000 for w in (n.power.base_watts, idle)]
        f.objective += [(busy, charge[0]), (free, charge[1])]
