"""The power cap an energy budget sets for one round (docs/objective.md, "Energy budget").

PowerFlow's problem, most work within an energy budget over a horizon, as a scheduler runs it
round after round: what is left of the budget, spread evenly over the horizon left, is the
cluster's average draw for this round. Spreading evenly is what a round can do without a
forecast of later rounds: a round that spends less leaves more per second to the next ones (the
caller passes what is left), one that cannot spend its share does not borrow it back. The cap
never goes below what no plan can avoid: every GPU's idle power and the most the running jobs
that may not be stopped can draw.
"""

from __future__ import annotations

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.validation.common import duration_seconds
from solver.app.validation.power_states import wire_floor_watts


def energy_cap_watts(req: pb.SolveRequest) -> float | None:
    """The round's cap from `req.cluster.energy_budget` (validated); None without one."""
    c = req.cluster
    if not c.HasField("energy_budget"):
        return None
    e = c.energy_budget
    allowance = e.remaining_joules / duration_seconds(e.horizon_left)
    return max(allowance, unavoidable_watts(req))


def unavoidable_watts(req: pb.SolveRequest) -> float:
    """Every node's floor (up: its GPUs' idle power and its base power; suspended: the
    power-saving policy's draw), and each non-preemptible running job's GPUs at their TDP."""
    types = {t.name: t for t in req.cluster.gpu_types}
    idle = sum(wire_floor_watts(req.cluster, n, types.get(n.gpu_type)) for n in req.cluster.nodes)
    kept = 0.0
    for j in req.jobs:
        a = j.current_allocation
        if j.preemptible or not j.HasField("current_allocation") or a.gpu_type not in types:
            continue
        gpu = types[a.gpu_type]
        gpus = sum(len(s.gpu_indices) for s in a.placement)
        kept += gpus * (gpu.tdp_watts - gpu.idle_watts)
    return idle + kept


def capped_budget(req: pb.SolveRequest) -> tuple[float | None, float | None]:
    """The cluster budget in force (the tighter of the snapshot's and the energy cap) and the
    energy cap alone."""
    c = req.cluster
    budget = c.power_budget_watts if c.HasField("power_budget_watts") else None
    cap = energy_cap_watts(req)
    if cap is None:
        return budget, None
    return (cap if budget is None else min(budget, cap)), cap
