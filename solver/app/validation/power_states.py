"""Validation of node power states and the power-saving policy (docs/power-states.md)."""

from __future__ import annotations

import math

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import MAX_JOB_AGE_SECONDS, MAX_POWER_WATTS
from solver.app.validation.common import Collector, quoted

MAX_PERIOD_SECONDS = MAX_JOB_AGE_SECONDS
"""Idle times and the policy's durations: ten years, as a job's age."""

_STATES = frozenset(pb.NodePowerState.values())


def wire_floor_watts(cluster: pb.ClusterSnapshot, node: pb.Node, gpu: pb.GpuType | None) -> float:
    """What `node` draws with no job, read from the wire (solver.perfmodel.budgets reads the
    domain): suspended, the policy's draw; up, its GPUs' idle power and its base power. A
    value not yet validated (non-finite) or a GPU type not known counts 0."""

    def finite(x: float) -> float:
        return x if math.isfinite(x) else 0.0

    if node.power_state == pb.NODE_POWER_STATE_SUSPENDED:
        return finite(cluster.power_saving.suspended_node_watts)
    idle = node.gpu_count * gpu.idle_watts if gpu is not None and node.gpu_count > 0 else 0.0
    return finite(idle) + finite(node.base_watts)


def check_power_states(c: Collector, cluster: pb.ClusterSnapshot) -> None:
    """Each node's power fields, and the policy: durations well-formed and in range, watts
    finite and non-negative, excluded nodes known."""
    for i, n in enumerate(cluster.nodes):
        p = f"cluster.nodes[{i}]"
        if n.power_state not in _STATES:
            c.add(f"{p}.power_state", f"unknown power state {n.power_state}")
        if n.HasField("idle_for"):
            c.period(f"{p}.idle_for", n.idle_for, MAX_PERIOD_SECONDS)
        if n.HasField("base_watts"):
            c.non_negative(f"{p}.base_watts", n.base_watts, MAX_POWER_WATTS)
    if not cluster.HasField("power_saving"):
        return
    s, p = cluster.power_saving, "cluster.power_saving"
    c.period(f"{p}.suspend_after", s.suspend_after, MAX_PERIOD_SECONDS)
    c.period(f"{p}.resume_time", s.resume_time, MAX_PERIOD_SECONDS)
    c.non_negative(f"{p}.suspended_node_watts", s.suspended_node_watts, MAX_POWER_WATTS)
    if s.spare_nodes_per_type < 0:
        c.add(f"{p}.spare_nodes_per_type", f"must be >= 0, got {s.spare_nodes_per_type}")
    names = {n.name for n in cluster.nodes}
    for k, name in enumerate(s.exclude_nodes):
        if name not in names:
            c.add(f"{p}.exclude_nodes[{k}]", f"unknown node {quoted(name)}")


def check_running_on_suspended(c: Collector, req: pb.SolveRequest) -> None:
    """A running job cannot be on a suspended node."""
    asleep = {n.name for n in req.cluster.nodes if n.power_state == pb.NODE_POWER_STATE_SUSPENDED}
    if not asleep:
        return
    for i, j in enumerate(req.jobs):
        for k, s in enumerate(j.current_allocation.placement):
            if s.node in asleep:
                c.add(
                    f"jobs[{i}].current_allocation.placement[{k}].node",
                    f"node {quoted(s.node)} is suspended: no job runs on it",
                )
