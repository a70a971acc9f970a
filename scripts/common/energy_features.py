"""Random energy features for a generated snapshot (``bench_unseen --energy-features``): node
base power, a power-saving policy with suspended and long-idle nodes, a grid forecast with
deferrable jobs, an energy budget. What the generator leaves unset, drawn so that the request
stays consistent (no running job on a suspended node), as a site's scheduler would send it."""

from __future__ import annotations

import random

from solver._proto.dsfro.v1 import scheduler_pb2 as pb


def with_energy_features(request: pb.SolveRequest, rng: random.Random) -> list[str]:
    """Set random energy features on `request`; their description, for the record."""
    cluster = request.cluster
    out: list[str] = []
    if rng.random() < 0.5:
        out.append(_base_power(cluster, rng.choice([100.0, 300.0, 600.0])))
    if rng.random() < 0.6:
        out.append(_power_saving(request, rng))
    if rng.random() < 0.5:
        out.append(_grid(request, rng))
    if rng.random() < 0.3:
        out.append(_energy_budget(request, rng))
    return out


def _base_power(cluster: pb.ClusterSnapshot, watts: float) -> str:
    """Every node's base power, added to the budgets: a site that counts its nodes' own draw
    budgets it too (the generator's budgets are shares of the GPUs' draw)."""
    per_rack: dict[str, int] = {}
    for node in cluster.nodes:
        node.base_watts = watts
        per_rack[node.rack] = per_rack.get(node.rack, 0) + 1
    if cluster.HasField("power_budget_watts"):
        cluster.power_budget_watts += watts * len(cluster.nodes)
    for budget in cluster.rack_power_budgets:
        budget.watts += watts * per_rack.get(budget.rack, 0)
    return f"base={watts:g}W"


def _power_saving(request: pb.SolveRequest, rng: random.Random) -> str:
    cluster = request.cluster
    saving = cluster.power_saving
    saving.enabled = rng.random() < 0.8
    saving.suspend_after.FromSeconds(rng.choice([0, 300, 1800]))
    saving.resume_time.FromSeconds(rng.choice([0, 60, 600]))
    # A suspended node draws less than the same node up and idle (a site's figure is its
    # BMC's in standby): never more than the smallest node's floor.
    per_gpu = {t.name: t.idle_watts for t in cluster.gpu_types}
    floor = min(n.gpu_count * per_gpu.get(n.gpu_type, 0.0) + n.base_watts for n in cluster.nodes)
    saving.suspended_node_watts = min(rng.choice([0.0, 20.0, 80.0]), floor)
    saving.spare_nodes_per_type = rng.choice([0, 0, 1, 3])
    saving.price_node_floor = rng.random() < 0.5
    busy = {s.node for j in request.jobs for s in j.current_allocation.placement}
    idle = [n for n in cluster.nodes if n.name not in busy]
    for node in idle:
        node.idle_for.FromSeconds(rng.choice([0, 120, 3600]))
    asleep = rng.sample(idle, k=round(len(idle) * rng.choice([0.0, 0.3, 0.9])))
    for node in asleep:
        node.power_state = pb.NODE_POWER_STATE_SUSPENDED
    if cluster.nodes and rng.random() < 0.3:
        names = rng.sample(cluster.nodes, k=max(1, len(cluster.nodes) // 8))
        saving.exclude_nodes.extend(n.name for n in names)
    return (
        f"saving={'on' if saving.enabled else 'off'}/spare{saving.spare_nodes_per_type}"
        f"/asleep{len(asleep)}{'/floor' if saving.price_node_floor else ''}"
    )


def _grid(request: pb.SolveRequest, rng: random.Random) -> str:
    grid = request.cluster.grid
    hours = rng.choice([1, 6, 48])
    priced = rng.random() < 0.5
    for h in range(hours):
        point = grid.points.add(carbon_g_per_kwh=round(rng.uniform(20, 600), 1))
        point.start.FromSeconds(3600 * h)
        if priced:
            point.price_per_kwh = round(rng.uniform(0.02, 0.4), 3)
    if rng.random() < 0.5:
        grid.min_saving = rng.choice([0.0, 0.1, 0.5])
    grid.scale_energy = rng.random() < 0.5
    if rng.random() < 0.5:
        grid.saving_per_delay = rng.choice([0.0, 0.25, 2.0])
    waiting = [j for j in request.jobs if not j.HasField("current_allocation")]
    for job in rng.sample(waiting, k=len(waiting) // 2):
        job.max_deferral.FromSeconds(rng.choice([600, 7200, 86400]))
    return f"grid={hours}h{'/price' if priced else ''}"


def _energy_budget(request: pb.SolveRequest, rng: random.Random) -> str:
    """An allowance of a share of what the cluster draws at its GPUs' peak over the horizon."""
    cluster = request.cluster
    peak = {t.name: t.tdp_watts for t in cluster.gpu_types}
    watts = sum(n.gpu_count * peak.get(n.gpu_type, 0.0) + n.base_watts for n in cluster.nodes)
    hours = rng.choice([1, 8, 24])
    share = rng.choice([0.2, 0.5, 0.9, 1.2])
    budget = cluster.energy_budget
    budget.remaining_joules = share * watts * 3600 * hours
    budget.horizon_left.FromSeconds(3600 * hours)
    return f"energy={share:g}x{hours}h"
