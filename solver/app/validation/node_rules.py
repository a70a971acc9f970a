"""Node labels and taints, job selectors and tolerations: well formed, in Kubernetes' rules.

A rule that cannot mean what its writer meant (an empty term, which Kubernetes matches with
nothing; IN without values; GT with a word) is refused with its field path, never read as
"every node" or "no node".
"""

from __future__ import annotations

from collections.abc import Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.node_preferences import preference_key, soft_tainted
from solver.app.node_rules import HARD_EFFECTS, integer, rule_key
from solver.app.validation.common import Collector, quoted


def check_rule_pairs(
    c: Collector, jobs: Sequence[pb.Job], nodes: Sequence[pb.Node], limits: Limits
) -> bool:
    """Distinct rules times nodes within the server's limit (each rule, and each distinct
    preference, is resolved over every node); False (and a violation on ``jobs``) if not."""
    tainted = any(t.effect in HARD_EFFECTS for n in nodes for t in n.taints)
    rules = {rule_key(j) for j in jobs if tainted or j.node_selector or j.tolerations}
    soft = soft_tainted(nodes)
    liked = {preference_key(j) for j in jobs if soft or j.node_preferences}
    pairs = (len(rules) + len(liked)) * len(nodes)
    if pairs <= limits.max_rule_node_pairs:
        return True
    c.add(
        "jobs",
        f"{len(rules) + len(liked)} distinct node rules (node_selector, node_preferences and "
        f"tolerations) over {len(nodes)} "
        f"nodes make {pairs} rule-node pairs, above the limit of {limits.max_rule_node_pairs} "
        "(max_rule_node_pairs; each rule is resolved over every node within the time budget): "
        "give the jobs of one rule the same selector, or select by labels, not host names",
    )
    return False


MAX_PREFERENCE_WEIGHT = 100
"""A preferred term's weight is 1 to 100, as in Kubernetes."""
_LISTED = (pb.LABEL_OPERATOR_IN, pb.LABEL_OPERATOR_NOT_IN)
_BARE = (pb.LABEL_OPERATOR_EXISTS, pb.LABEL_OPERATOR_DOES_NOT_EXIST)
_COMPARED = (pb.LABEL_OPERATOR_GT, pb.LABEL_OPERATOR_LT)


def check_key(c: Collector, path: str, key: str, limits: Limits) -> bool:
    """A label or taint key: non-empty, printable, without white space."""
    if not key:
        c.add(path, "must not be empty")
        return False
    if not c.text(path, key, limits.max_name_length):
        return False
    if any(ch.isspace() for ch in key):
        c.add(path, f"must not contain white space, got {quoted(key)}")
        return False
    return True


class Checked:
    """Label keys and values found well formed so far in a request: nodes share most of them
    (20,000 nodes of 32 labels each: 0.97 s checked one by one)."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.values: set[str] = set()


def check_node_rules(c: Collector, p: str, node: pb.Node, limits: Limits, done: Checked) -> None:
    """A node's labels and taints (``p``: the node's path)."""
    labels = node.labels
    if c.count(f"{p}.labels", len(labels), limits.max_node_rules, "max_node_rules"):
        fresh = [(k, v) for k, v in labels.items() if k not in done.keys or v not in done.values]
        for key, value in sorted(fresh):
            lp = f"{p}.labels[{quoted(key)}]"
            if key in done.keys or check_key(c, lp, key, limits):
                done.keys.add(key)
                if value in done.values or c.text(lp, value, limits.max_name_length):
                    done.values.add(value)
    if not c.count(f"{p}.taints", len(node.taints), limits.max_node_rules, "max_node_rules"):
        return
    seen: dict[tuple[str, int], int] = {}
    for k, taint in enumerate(node.taints):
        tp = f"{p}.taints[{k}]"
        check_key(c, f"{tp}.key", taint.key, limits)
        c.text(f"{tp}.value", taint.value, limits.max_name_length)
        if taint.effect not in pb.TaintEffect.values() or not taint.effect:
            c.add(
                f"{tp}.effect",
                f"must be NO_SCHEDULE, PREFER_NO_SCHEDULE or NO_EXECUTE, got {taint.effect}",
            )
        elif (taint.key, taint.effect) in seen:
            first = seen[taint.key, taint.effect]
            c.add(tp, f"duplicate key {quoted(taint.key)} and effect (also taints[{first}])")
        else:
            seen[taint.key, taint.effect] = k


def check_job_rules(c: Collector, p: str, job: pb.Job, limits: Limits) -> None:
    """A job's node selector and tolerations (``p``: the job's path)."""
    terms = job.node_selector
    if c.count(f"{p}.node_selector", len(terms), limits.max_node_rules, "max_node_rules"):
        for t, term in enumerate(terms):
            _check_term(c, f"{p}.node_selector[{t}]", term, limits)
    preferred = job.node_preferences
    if c.count(f"{p}.node_preferences", len(preferred), limits.max_node_rules, "max_node_rules"):
        for t, soft in enumerate(preferred):
            sp = f"{p}.node_preferences[{t}]"
            if not 1 <= soft.weight <= MAX_PREFERENCE_WEIGHT:
                c.add(f"{sp}.weight", f"must be 1 to {MAX_PREFERENCE_WEIGHT}, got {soft.weight}")
            _check_term(c, f"{sp}.preference", soft.preference, limits)
    tolerations = job.tolerations
    if not c.count(f"{p}.tolerations", len(tolerations), limits.max_node_rules, "max_node_rules"):
        return
    for k, tol in enumerate(tolerations):
        tp = f"{p}.tolerations[{k}]"
        exists = tol.operator == pb.TOLERATION_OPERATOR_EXISTS
        if tol.operator not in pb.TolerationOperator.values():
            c.add(f"{tp}.operator", f"must be EQUAL or EXISTS, got {tol.operator}")
        elif exists and tol.value:
            c.add(f"{tp}.value", "must be empty with EXISTS")
        elif not exists and not tol.key:
            c.add(f"{tp}.key", "must not be empty with EQUAL (EXISTS with no key tolerates all)")
        if tol.key:
            check_key(c, f"{tp}.key", tol.key, limits)
        c.text(f"{tp}.value", tol.value, limits.max_name_length)
        if tol.effect not in pb.TaintEffect.values():
            c.add(f"{tp}.effect", f"unknown effect {tol.effect}")


def _check_term(c: Collector, p: str, term: pb.NodeSelectorTerm, limits: Limits) -> None:
    requirements = term.requirements
    if not requirements:
        c.add(f"{p}.requirements", "must not be empty (an empty term matches no node)")
        return
    if not c.count(f"{p}.requirements", len(requirements), limits.max_node_rules, "max_node_rules"):
        return
    for r, req in enumerate(requirements):
        rp = f"{p}.requirements[{r}]"
        check_key(c, f"{rp}.key", req.key, limits)
        values = req.values
        if not c.count(f"{rp}.values", len(values), limits.max_nodes, "max_nodes"):
            continue
        for v, value in enumerate(values):
            c.text(f"{rp}.values[{v}]", value, limits.max_name_length)
        if req.operator in _LISTED and not values:
            c.add(f"{rp}.values", "must not be empty with IN or NOT_IN")
        elif req.operator in _BARE and values:
            c.add(f"{rp}.values", "must be empty with EXISTS or DOES_NOT_EXIST")
        elif req.operator in _COMPARED and (len(values) != 1 or integer(values[0]) is None):
            got = quoted(values[0]) if len(values) == 1 else f"{len(values)} values"
            c.add(f"{rp}.values", f"must be one integer with GT or LT, got {got}")
        elif req.operator not in (*_LISTED, *_BARE, *_COMPARED):
            c.add(
                f"{rp}.operator",
                f"must be IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT or LT, got {req.operator}",
            )
