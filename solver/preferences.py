"""Soft node preferences as plain typed data: how much a job would rather not run on a node.

Made at the edge (``solver.app.node_preferences``) from a job's preferred node terms and the
PreferNoSchedule taints it does not tolerate (Kubernetes' meaning); the objective charges it
(docs/objective.md, "Node preferences"). Never a bar: a job runs on a disliked node rather than
wait. Jobs of one rule share one object.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K")


@dataclass(frozen=True, eq=False)
class NodePreference:
    """Per node, in (0, 1]: how much the job would rather not run there (1: a node matching
    none of its preferred terms, or with a PreferNoSchedule taint it does not tolerate); a
    node not named costs nothing. Compared by identity: jobs of one rule share it."""

    dislike: Mapping[str, float]

    @functools.cached_property
    def disliked(self) -> frozenset[str]:
        """The nodes it would rather not run on."""
        return frozenset(self.dislike)

    def cost(self, gpus_per_node: Iterable[tuple[str, int]]) -> float:
        """Its GPUs on disliked nodes, each by how much (before the job's max_gpus)."""
        dislike = self.dislike
        return sum(k * dislike.get(node, 0.0) for node, k in gpus_per_node)


def preference_cost(
    preference: NodePreference | None, max_gpus: int, gpus_per_node: Mapping[str, int]
) -> float:
    """A running job's term of P: its GPUs on disliked nodes, weighed, over its max_gpus (at
    most 1, so at most the weight per job: a preference never outweighs running)."""
    if preference is None or not gpus_per_node:
        return 0.0
    return preference.cost(gpus_per_node.items()) / max(max_gpus, 1)


def dislike_of(preference: NodePreference | None, node: str) -> float:
    """How much a job would rather not run on `node` (0 without preferences)."""
    return 0.0 if preference is None else preference.dislike.get(node, 0.0)


def least_disliked(
    preference: NodePreference | None, candidates: Iterable[tuple[K, str]]
) -> K | None:
    """The first of (key, node) `candidates` on the node the job dislikes least (the first of
    all without preferences, or on a node it does not dislike: the rest are not read)."""
    best: tuple[float, K] | None = None
    for key, node in candidates:
        d = dislike_of(preference, node)
        if d == 0.0:
            return key
        if best is None or d < best[0]:
            best = (d, key)
    return None if best is None else best[1]
