"""A waiting job's own placement rules, judged before it is sent: whether Slurm would start it
yet (``--begin``, ``--dependency``), whether DSFRO can honour its rules (``--constraint``,
``--reservation``, ``--nodelist``) or gives it back to Slurm, and whether any node of its GPU
types is left to it (``--exclude``, ``--nodelist``, ``--constraint``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from solver.slurm.constraint import ConstraintError, selector_terms
from solver.slurm.eligible import waiting_for
from solver.slurm.state import SlurmJob, SlurmNode

GIVEN_BACK = "given back to Slurm as submitted"


@dataclass(frozen=True)
class Refusal:
    """Why a waiting job is not sent this round."""

    kind: Literal["ineligible", "returned", "unplaceable"]
    """Not eligible yet (waits held), given back to Slurm, or no node left to it (waits)."""
    reason: str
    """The decision's reason code (for ``returned``)."""
    why: str


def screen(
    job: SlurmJob,
    own: SlurmJob,
    allowed: Sequence[str],
    nodes: Mapping[str, SlurmNode],
    node_types: Mapping[str, str],
    jobs: Mapping[int, SlurmJob],
    now: float,
) -> Refusal | None:
    """`own`: the job as submitted; `nodes`, `node_types`: the snapshot's; `jobs`: squeue's,
    by id. None: the job is sent."""
    if (wait := waiting_for(job, jobs, now)) is not None:
        return Refusal("ineligible", "not_eligible", wait)
    try:
        selector_terms(own.constraint)
    except ConstraintError as e:
        return Refusal("returned", "constraint", f"{e}: {GIVEN_BACK}")
    if own.reservation:
        why = f"its --reservation {own.reservation}: DSFRO plans no reserved node"
        return Refusal("returned", "reservation", f"{why}; {GIVEN_BACK}")
    if len(own.required_nodes) > 1:
        why = "its --nodelist names several nodes, all of which a placement must include"
        return Refusal("returned", "nodelist", f"{why}: {GIVEN_BACK}")
    if not (own.required_nodes or own.excluded_nodes or own.constraint):
        return None  # no rule narrows its nodes: no walk over every node for each waiting job
    typed = {n for n, t in node_types.items() if not allowed or t in allowed}
    if own.required_nodes and not typed & {*own.required_nodes}:
        why = f"its --nodelist {own.required_nodes[0]} is no node of its GPU types here"
        return Refusal("unplaceable", "no_gpu_type", why)
    left = typed - set(own.excluded_nodes)
    if own.excluded_nodes and not left:
        why = "its --exclude names every node of its GPU types in the snapshot"
        return Refusal("unplaceable", "no_gpu_type", why)
    if own.constraint and not _featured(own.constraint, left, nodes):
        why = f"no node of its GPU types here has --constraint {own.constraint}"
        return Refusal("unplaceable", "no_gpu_type", why)
    return None


def _featured(constraint: str, usable: Iterable[str], nodes: Mapping[str, SlurmNode]) -> bool:
    """Whether a usable node has the features of one of the constraint's terms."""
    terms = [{r.key for r in t.requirements} for t in selector_terms(constraint)]
    return any(any(t <= nodes[n].features for t in terms) for n in usable)
