"""The checker's rules for node power actions (docs/power-states.md), one function each,
re-derived from the snapshot's policy and node states (not from the solver's code)."""

from __future__ import annotations

from collections.abc import Iterator

from solver.power_states import NodePowerState, PowerActionKind
from solver.scoring.view import PlanView, PlanViolation


def _used_nodes(view: PlanView) -> set[str]:
    return {s.node for r in view.running for s in r.assignment.placement if s.gpu_indices}


def check_resume_before_use(view: PlanView) -> Iterator[PlanViolation]:
    """A job on a suspended node needs the node's RESUME in the plan; a RESUME names a
    suspended node that a job of the plan uses."""
    resumed = {a.node for a in view.power_actions if a.kind is PowerActionKind.RESUME}
    used = _used_nodes(view)
    for r in view.running:
        for s in r.assignment.placement:
            node = view.nodes.get(s.node)
            if node is None or node.power.state is not NodePowerState.SUSPENDED:
                continue
            if s.node not in resumed:
                yield PlanViolation(
                    "power_state", r.job.name, f"node {s.node} is suspended and not resumed"
                )
    for name in sorted(resumed):
        node = view.nodes.get(name)
        if node is None or node.power.state is not NodePowerState.SUSPENDED:
            yield PlanViolation("power_state", "", f"RESUME of {name}, which is not suspended")
        elif name not in used:
            yield PlanViolation("power_state", "", f"RESUME of {name}, which no job uses")


def check_suspend_allowed(view: PlanView) -> Iterator[PlanViolation]:
    """A SUSPEND names an up node the policy lets go (enabled, not excluded, idle at least
    suspend_after) on which the plan runs nothing; one action per node."""
    policy = view.problem.cluster.power_saving
    used = _used_nodes(view)
    seen: set[str] = set()
    for a in view.power_actions:
        if a.node in seen:
            yield PlanViolation("power_state", "", f"more than one action for node {a.node}")
        seen.add(a.node)
        if a.kind is not PowerActionKind.SUSPEND:
            continue
        node = view.nodes.get(a.node)
        if node is None:
            yield PlanViolation("power_state", "", f"SUSPEND of unknown node {a.node}")
            continue
        p = node.power
        if not policy.enabled or a.node in policy.exclude_nodes:
            yield PlanViolation("power_state", "", f"the policy does not let {a.node} suspend")
        elif p.state is not NodePowerState.UP or p.idle_seconds < policy.suspend_after_seconds:
            yield PlanViolation("power_state", "", f"{a.node} is not up and idle for suspend_after")
        if a.node in used:
            yield PlanViolation("power_state", "", f"SUSPEND of {a.node}, which runs a job")


def check_spare_nodes(view: PlanView) -> Iterator[PlanViolation]:
    """Each GPU type keeps spare_nodes_per_type empty up nodes, where it had that many."""
    policy = view.problem.cluster.power_saving
    suspended = {a.node for a in view.power_actions if a.kind is PowerActionKind.SUSPEND}
    used = _used_nodes(view)
    empty_up: dict[str, int] = {}
    left: dict[str, int] = {}
    for n in view.nodes.values():
        if n.power.state is NodePowerState.UP and n.name not in used:
            empty_up[n.gpu_type] = empty_up.get(n.gpu_type, 0) + 1
            if n.name not in suspended:
                left[n.gpu_type] = left.get(n.gpu_type, 0) + 1
    for gpu_type, before in sorted(empty_up.items()):
        keep = min(policy.spare_nodes_per_type, before)
        if left.get(gpu_type, 0) < keep:
            yield PlanViolation(
                "power_state", "", f"fewer than {keep} empty {gpu_type} nodes left up"
            )


POWER_CHECKS = (check_resume_before_use, check_suspend_allowed, check_spare_nodes)
