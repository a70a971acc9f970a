"""Node failures: drawn once per seed as a Poisson process per node, each followed by its
repair, so that every policy of a comparison meets the same failures at the same instants."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from solver.simulate.settings import SAME_INSTANT_S, FailureSettings


class NodeFailures:
    """The failures still to come and the nodes down now."""

    def __init__(
        self,
        nodes: Sequence[str],
        settings: FailureSettings | None,
        *,
        seed: int,
        horizon_s: float,
    ) -> None:
        """Failures of `nodes` (in this order: the draw depends on it) until `horizon_s`."""
        self._settings = settings
        self._events = _draw(nodes, settings, seed, horizon_s)
        self.down_until: dict[str, float] = {}
        """Each node down now and when it comes back."""

    @property
    def next_failure_s(self) -> float:
        return self._events[0][0] if self._events else math.inf

    @property
    def next_repair_s(self) -> float:
        return min(self.down_until.values(), default=math.inf)

    def fail(self, t: float) -> list[str]:
        """The nodes whose failure has come by t; they are down from now on."""
        failed = []
        while self._settings is not None and self._events:
            at, node = self._events[0]
            if at > t + SAME_INSTANT_S:
                break
            heapq.heappop(self._events)
            self.down_until[node] = at + self._settings.repair_hours * 3600.0
            failed.append(node)
        return failed

    def repair(self, t: float) -> None:
        """Nodes whose repair is done by t are up again."""
        for node, until in list(self.down_until.items()):
            if until <= t + SAME_INSTANT_S:
                del self.down_until[node]


def _draw(
    nodes: Sequence[str], f: FailureSettings | None, seed: int, horizon_s: float
) -> list[tuple[float, str]]:
    if f is None:
        return []
    rng = np.random.default_rng([seed, 3])
    events: list[tuple[float, str]] = []
    rate = 1.0 / (f.node_mtbf_hours * 3600.0)
    for node in nodes:
        t = float(rng.exponential(1.0 / rate))
        while t < horizon_s:
            events.append((t, node))
            t += f.repair_hours * 3600.0 + float(rng.exponential(1.0 / rate))
    heapq.heapify(events)
    return events
