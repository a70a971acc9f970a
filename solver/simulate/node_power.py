"""The cluster's node power saving in the simulation loop (``solver.simulate.engine`` calls it):
``NodeStates`` kept in step with the jobs, for every policy alike.

At each event the nodes that hold a job (or are down) are marked used and the rule is settled
(resumes done, nodes empty for ``suspend_after_s`` suspended); the next suspend or resume end is
an event of the loop. Each round's request carries the states (``NodeStates.annotate``); after a
plan is applied, every job placed on a suspended node wakes it and starts ``resume_s`` later:
its restart delay, if any, follows the resume (a checkpoint loads once the node is up), and it
holds its GPUs meanwhile without progress (``LiveJob.restart_until``, the engine's restart
mechanism). With the rule off nothing here changes a run: no node is ever suspended, no event
added, the requests are sent as before.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.simulate.power_saving import NodeStates, PowerSavingSettings
from solver.simulate.rounds import LiveJob


class NodeRule:
    """The node power states of one simulation (``settings.enabled`` False: inert)."""

    def __init__(self, cluster: pb.ClusterSnapshot, settings: PowerSavingSettings) -> None:
        self.states = NodeStates(cluster, settings)
        self.on = settings.enabled
        self._started = False

    def at(self, t: float, active: Iterable[LiveJob], down: Collection[str]) -> None:
        """The states at t: the nodes used by running jobs or down are not empty; then the
        rule settles (resumes done, idle nodes suspended). Every node is up and empty from
        the first call on (the run's first event: nodes idle before the trace do not count)."""
        if self.on:
            if not self._started:
                self.states.empty_since = dict.fromkeys(self.states.nodes, t)
                self._started = True
            self.states.use(t, used_nodes(active) | set(down))
            self.states.settle(t)

    def next_event(self, t: float) -> float:
        """When the next node suspends or ends its resume (inf when off or none)."""
        return self.states.next_event(t) if self.on else float("inf")

    def annotate(self, request: pb.SolveRequest, t: float) -> None:
        """The round's request with each node's state and idle time, and the policy."""
        if self.on:
            self.states.annotate(request, t)

    def wake(self, t: float, placed: Sequence[LiveJob]) -> None:
        """Each job placed this round on a suspended (or still resuming) node waits for it:
        its start, and any restart delay after it, move by the resume's remaining time."""
        if not self.on:
            return
        for j in placed:
            assert j.allocation is not None
            nodes = sorted({s.node for s in j.allocation.placement if s.gpu_indices})
            ready = self.states.wake(t, nodes)
            j.resume_until = ready
            if ready > t:
                j.restart_until = max(j.restart_until, t) + (ready - t)

    def extra_watts(self, t0: float, t1: float, down: Collection[str]) -> float:
        """The draw beside the GPUs' idle power from t0 to t1 (states constant meanwhile:
        base power, suspended nodes' sleep draw less their GPUs' idle), counting the
        node-seconds suspended; 0 when off."""
        if not self.on:
            return 0.0
        self.states.accrue(t0, t1, down)
        return self.states.extra_watts(down)

    def tail(self, end: float) -> tuple[float | None, tuple[tuple[float, float], ...]]:
        """The idle draw at the end in the nodes' states, and how it falls as they suspend
        after the trace (``NodeStates.tail``); (None, ()) when off."""
        if not self.on:
            return None, ()
        return self.states.idle_draw(), self.states.tail(end)


def used_nodes(active: Iterable[LiveJob]) -> set[str]:
    """The nodes on which some active job holds GPUs."""
    return {
        s.node
        for j in active
        if j.allocation is not None
        for s in j.allocation.placement
        if s.gpu_indices
    }
