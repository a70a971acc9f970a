"""Slurm node features and a job's ``--constraint`` -> node labels and a node selector.

A node's active features become labels (the feature the key, an empty value); a constraint
of one feature, of features joined by ``&`` (all) or by ``|`` (any) becomes a selector. The
rest of Slurm's syntax (node counts ``a*2``, matching OR and multiple counts in brackets,
parentheses, ``&`` and ``|`` mixed) asks for something a selector per node cannot say (all
nodes sharing one feature, so many nodes with each); the adapter gives such a job back to Slurm
as submitted, rather than plan it on nodes Slurm would refuse.
"""

from __future__ import annotations

import re

from solver.wire import LabelOperator, LabelRequirement, NodeSelectorTerm

_FEATURE = re.compile(r"^[A-Za-z0-9_.:+-]+$")
"""A feature name as slurm.conf's Features= writes them (no operator characters)."""


class ConstraintError(ValueError):
    """A constraint beyond a selector per node; the message says what and why."""


def node_features(text: str | list[str]) -> frozenset[str]:
    """Features of sinfo's ``active_features`` (a comma-separated string before Slurm 23.02,
    a list after)."""
    names = text.split(",") if isinstance(text, str) else text
    return frozenset(n.strip() for n in names if n.strip())


def selector_terms(constraint: str) -> list[NodeSelectorTerm]:
    """The terms a node must match one of; none for an empty constraint.

    Raises ConstraintError for the syntax a selector cannot say.
    """
    text = constraint.strip()
    if not text:
        return []
    if "&" in text and "|" in text:
        raise ConstraintError(f"--constraint {text!r} mixes & and |")
    alternatives = text.split("|")
    together = alternatives if len(alternatives) > 1 else text.split("&")
    for name in together:
        if not _FEATURE.match(name):
            raise ConstraintError(
                f"--constraint {text!r}: {name!r} is not a feature name (counts, brackets and "
                "parentheses ask for more than each node's features)"
            )

    def exists(name: str) -> LabelRequirement:
        return LabelRequirement(key=name, operator=LabelOperator.LABEL_OPERATOR_EXISTS)

    if len(alternatives) > 1:
        return [NodeSelectorTerm(requirements=[exists(n)]) for n in alternatives]
    return [NodeSelectorTerm(requirements=[exists(n) for n in together])]
