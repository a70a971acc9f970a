"""A job's preferred node terms and the PreferNoSchedule taints it does not tolerate -> how
much it would rather not run on each node (``solver.preferences.NodePreference``).

Kubernetes' meaning, as a cost rather than a score: a node that misses preferred terms of
weight w out of the job's W is disliked w / W; one with a PreferNoSchedule taint the job does
not tolerate, wholly (1). Never a bar (docs/objective.md, "Node preferences"). Jobs of one rule
share one resolution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.node_rules import NodeRules, tolerates
from solver.preferences import NodePreference

PreferenceKey = tuple[tuple[Any, ...], tuple[Any, ...]]
"""A job's (preferred terms with their weights, tolerations), hashable."""


def preference_key(job: pb.Job) -> PreferenceKey:
    """The job's preferred terms and tolerations as a key."""
    terms = tuple(
        (p.weight, tuple((r.key, r.operator, tuple(r.values)) for r in p.preference.requirements))
        for p in job.node_preferences
    )
    tolerations = tuple((t.key, t.operator, t.value, t.effect) for t in job.tolerations)
    return terms, tolerations


def soft_tainted(nodes: Sequence[pb.Node]) -> bool:
    """Whether a node has a PreferNoSchedule taint."""
    return any(t.effect == pb.TAINT_EFFECT_PREFER_NO_SCHEDULE for n in nodes for t in n.taints)


class Preferences:
    """Each distinct rule's NodePreference, one object per rule (None: no node disliked)."""

    def __init__(self, nodes: Sequence[pb.Node], rules: NodeRules) -> None:
        self._rules = rules
        self._soft = [
            (n.name, soft)
            for n in nodes
            if (soft := [t for t in n.taints if t.effect == pb.TAINT_EFFECT_PREFER_NO_SCHEDULE])
        ]
        self._made: dict[PreferenceKey, NodePreference | None] = {}

    def of(self, job: pb.Job) -> NodePreference | None:
        if not job.node_preferences and not self._soft:
            return None
        key = preference_key(job)
        if key not in self._made:
            self._made[key] = self._resolve(*key)
        return self._made[key]

    def _resolve(
        self, terms: tuple[Any, ...], tolerations: tuple[Any, ...]
    ) -> NodePreference | None:
        dislike: dict[str, float] = {}
        total = sum(weight for weight, _ in terms)
        if total > 0:
            met: dict[str, int] = {}
            for weight, term in terms:
                for name in self._rules.matching(term):
                    met[name] = met.get(name, 0) + weight
            for name in self._rules.names:
                missed = total - met.get(name, 0)
                if missed > 0:
                    dislike[name] = missed / total
        for name, taints in self._soft:
            if not all(tolerates(tolerations, t) for t in taints):
                dislike[name] = 1.0
        return NodePreference(dislike) if dislike else None
