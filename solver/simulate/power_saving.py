"""Node power states in the simulated cluster (docs/power-states.md): Slurm's power saving,
run by the cluster for every policy alike.

A node that has held no job for ``suspend_after_s`` is suspended (never an excluded node, and
``spare_nodes_per_type`` empty nodes of each type stay up), and draws ``suspended_node_watts``
instead of its base power and its GPUs' idle power. A job placed on a suspended node wakes it:
the node draws its up power while it boots, and the job starts ``resume_s`` later (it holds its
GPUs without progress meanwhile, as during a restart). Policies see each node's state and idle
time in the snapshot; DSFRO plans around them, the baselines place as their papers do and pay
the resumes they cause. The rule is the cluster's, not a policy's: every policy gets the same.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import Allocation, Problem
from solver.power_states import NodePowerState, PowerAction, PowerActionKind

UP, SUSPENDED, RESUMING = "up", "suspended", "resuming"


@dataclass(frozen=True)
class PowerSavingSettings:
    """The cluster's power-saving rule (off by default: the runs of earlier issues unchanged)."""

    enabled: bool = False
    suspend_after_s: float = 1800.0
    """Slurm's SuspendTime: an assumption of this simulator (sites choose 10-60 minutes)."""
    resume_s: float = 300.0
    """Boot of a GPU server to a usable node: an assumption of this simulator (a few minutes)."""
    suspended_node_watts: float = 20.0
    """A suspended server's draw (its BMC and standby rails): an assumption of this simulator."""
    node_base_watts: float = 0.0
    """A node's draw when up beside its GPUs; 0 unless the scenario says (docs/simulation.md)."""
    spare_nodes_per_type: int = 0
    exclude_nodes: frozenset[str] = frozenset()


class NodeStates:
    """Each node's power state, and since when it has held no job."""

    def __init__(self, cluster: pb.ClusterSnapshot, settings: PowerSavingSettings) -> None:
        self.settings = settings
        self.nodes = {n.name: n for n in cluster.nodes}
        idle = {t.name: t.idle_watts for t in cluster.gpu_types}
        self.idle_gpu_watts = {n.name: n.gpu_count * idle[n.gpu_type] for n in cluster.nodes}
        self.state = dict.fromkeys(self.nodes, UP)
        self.up_at: dict[str, float] = {}
        self.empty_since: dict[str, float | None] = dict.fromkeys(self.nodes, 0.0)
        self.suspends = 0
        self.resumes = 0
        self.suspended_node_seconds = 0.0

    # ------------------------------------------------------------ the rule

    def use(self, t: float, used: Collection[str]) -> None:
        """The nodes that hold a job from t on (the others are empty since they emptied)."""
        for name in self.nodes:
            if name in used:
                self.empty_since[name] = None
            elif self.empty_since[name] is None:
                self.empty_since[name] = t

    def settle(self, t: float) -> None:
        """Resumes done by t; nodes empty for suspend_after by t suspended."""
        for name, when in list(self.up_at.items()):
            if when <= t + 1e-9:
                self.state[name] = UP
                del self.up_at[name]
        if not self.settings.enabled:
            return
        s = self.settings
        by_type: dict[str, list[str]] = {}
        for name, n in self.nodes.items():
            if self.state[name] == UP and self.empty_since[name] is not None:
                by_type.setdefault(n.gpu_type, []).append(name)
        for names in by_type.values():
            spare = len(names)
            for name in sorted(names, key=lambda x: (self._since(x), x)):  # longest empty first
                if spare <= s.spare_nodes_per_type:
                    break
                if name in s.exclude_nodes or t - self._since(name) < s.suspend_after_s - 1e-9:
                    continue
                self.state[name] = SUSPENDED
                self.suspends += 1
                spare -= 1

    def wake(self, t: float, nodes: Iterable[str]) -> float:
        """Resume the suspended ones of `nodes`; when all of them are up (t if none slept)."""
        ready = t
        for name in nodes:
            if self.state[name] == SUSPENDED:
                self.state[name] = RESUMING
                self.up_at[name] = t + self.settings.resume_s
                self.resumes += 1
            if self.state[name] == RESUMING:
                ready = max(ready, self.up_at[name])
        return ready

    def next_event(self, t: float) -> float:
        """The next time a resume ends or an empty node reaches suspend_after."""
        out = min(self.up_at.values(), default=math.inf)
        if self.settings.enabled:
            for name in self.nodes:
                since = self.empty_since[name]
                if (
                    self.state[name] == UP
                    and since is not None
                    and name not in self.settings.exclude_nodes
                ):
                    when = since + self.settings.suspend_after_s
                    if when > t + 1e-9:
                        out = min(out, when)
        return out

    def _since(self, name: str) -> float:
        since = self.empty_since[name]
        return math.inf if since is None else since

    # ------------------------------------------------------------ what it means

    def extra_watts(self, down: Collection[str] = ()) -> float:
        """The draw beside the GPUs' idle power that the engine counts: each up or resuming
        node's base power; for each suspended node, its sleep draw less its GPUs' idle power.
        Failed nodes (`down`) are off."""
        s = self.settings
        out = 0.0
        for name, state in self.state.items():
            if name in down:
                continue
            if state == SUSPENDED:
                out += s.suspended_node_watts - self.idle_gpu_watts[name]
            else:
                out += s.node_base_watts
        return out

    def accrue(self, t0: float, t1: float, down: Collection[str] = ()) -> None:
        """Count the node-seconds spent suspended from t0 to t1 (states constant meanwhile)."""
        asleep = sum(1 for n, x in self.state.items() if x == SUSPENDED and n not in down)
        self.suspended_node_seconds += asleep * max(t1 - t0, 0.0)

    def idle_draw(self) -> float:
        """The cluster's draw with no job running, in the nodes' current states."""
        return sum(self.idle_gpu_watts.values()) + self.extra_watts()

    def tail(self, t: float) -> tuple[tuple[float, float], ...]:
        """After the trace ends at t (every node empty from its last job on): each time, in
        seconds after t, at which the rule suspends nodes, and the cluster's draw from then on
        (``idle_draw`` before the first). Empty when the rule is off or nothing is left to
        suspend: the equal-horizon padding of an idle cluster under the rule."""
        after = copy.deepcopy(self)
        after.use(t, ())
        steps: list[tuple[float, float]] = []
        now, last = t, after.idle_draw()
        while (when := after.next_event(now)) < math.inf:
            after.settle(when)
            if (draw := after.idle_draw()) != last:
                steps.append((when - t, draw))
            now, last = when, draw
        return tuple(steps)

    def tail_watts(self) -> float:
        """The cluster's draw once every node may suspend (an idle cluster after the trace)."""
        s = self.settings
        if not s.enabled:
            return sum(self.idle_gpu_watts.values()) + s.node_base_watts * len(self.nodes)
        by_type: dict[str, list[str]] = {}
        for name, n in self.nodes.items():
            by_type.setdefault(n.gpu_type, []).append(name)
        total = 0.0
        for names in by_type.values():
            stay = [x for x in names if x in s.exclude_nodes]
            rest = sorted(x for x in names if x not in s.exclude_nodes)
            stay += rest[: max(s.spare_nodes_per_type - len(stay), 0)]
            for name in names:
                up = name in stay
                total += (
                    (self.idle_gpu_watts[name] + s.node_base_watts)
                    if up
                    else s.suspended_node_watts
                )
        return total

    def annotate(self, request: pb.SolveRequest, t: float) -> None:
        """The nodes' states, idle times and base power, and the policy, in a round's request."""
        s = self.settings
        for n in request.cluster.nodes:
            state = self.state.get(n.name, UP)
            n.power_state = (
                pb.NODE_POWER_STATE_SUSPENDED if state == SUSPENDED else pb.NODE_POWER_STATE_UP
            )
            since = self.empty_since.get(n.name)
            n.idle_for.FromNanoseconds(0 if since is None else round(max(t - since, 0.0) * 1e9))
            if s.node_base_watts:
                n.base_watts = s.node_base_watts
        if s.enabled:
            p = request.cluster.power_saving
            p.enabled = True
            p.exclude_nodes.extend(sorted(s.exclude_nodes))
            p.suspend_after.FromNanoseconds(round(s.suspend_after_s * 1e9))
            p.resume_time.FromNanoseconds(round(s.resume_s * 1e9))
            p.suspended_node_watts = s.suspended_node_watts
            p.spare_nodes_per_type = s.spare_nodes_per_type


def resumes_for(problem: Problem, allocations: Mapping[str, Allocation]) -> list[PowerAction]:
    """The RESUME of every suspended node of the snapshot that the plan places a job on: the
    cluster resumes them whoever planned, so that a policy which does not emit power actions
    (every baseline) pays the same resume as one that does."""
    asleep = {n.name for n in problem.cluster.nodes if n.power.state is NodePowerState.SUSPENDED}
    used = {s.node for a in allocations.values() for s in a.placement if s.gpu_indices}
    reason = "a job of the plan is placed on it"
    return [PowerAction(n, PowerActionKind.RESUME, reason) for n in sorted(asleep & used)]
