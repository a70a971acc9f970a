"""A plan -> one decision per job, with its reason: what the adapter will do in Slurm.

Pure: no Slurm call, no clock of its own. The round applies the decisions (solver.slurm.apply)
or, under ``--dry-run``, prints them.

What is decided:
- a waiting (held) job the plan runs is placed (node list, GPUs per node, clock, then
  released) if it fits now: nodes still up and not drained (read again just before), the same
  GPU count on each node (Slurm's GRES is per node); else it waits for the next round;
- a running job the plan keeps stays; one it moves, reshapes or stops is requeued, only if
  Slurm may requeue it and its demand allows it, after the checkpoint signal and grace;
- a job released but not started whose nodes went down or drained, or that has waited longer
  than ``replan_after``, is held again, to be planned anew.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from solver.slurm.record import Record, Target, comment_digest, decode
from solver.slurm.snapshot import Snapshot, Tracked, as_submitted, gpu_request
from solver.slurm.state import SlurmJob, SlurmNode
from solver.wire import JobAssignment, JobState, Plan, QueueReason


class Action(StrEnum):
    PLACE = "place"
    """Held job: node list, GRES, clock and plan file set, then released."""
    WAIT = "wait"
    """Held job stays held."""
    KEEP = "keep"
    """Running job stays as it is."""
    RECLOCK = "reclock"
    """Running job stays, at another SM clock: its TresFreq and plan file change (Slurm
    applies a job's --gpu-freq when a step starts)."""
    CHECKPOINT = "checkpoint"
    """Running job asked to checkpoint (the signal) before a move."""
    REQUEUE = "requeue"
    """Running job requeued held; with a target, placed there and released at once."""
    UNMARK = "uncheckpoint"
    """Running job the plan keeps after its checkpoint signal: the mark is cleared, so that a
    later move signals it again and waits the whole grace."""
    REHOLD = "rehold"
    """Released job not yet started: held again, to be planned anew."""
    FALLBACK = "fallback"
    """Held job given back to Slurm as it was submitted (DSFRO out of reach too long)."""
    SKIP = "skip"
    """Job with a demand the adapter or DSFRO rejects: reported, left held."""


@dataclass(frozen=True)
class Decision:
    """What to do with one job, and why."""

    job: SlurmJob
    action: Action
    reason: str
    """A short code: planned, queued, node_unavailable, uneven_placement, ..."""
    detail: str = ""
    target: Target | None = None
    record: Record | None = None

    @property
    def job_id(self) -> int:
        return self.job.job_id


@dataclass(frozen=True)
class Rules:
    """The round's settings that decisions depend on."""

    checkpoint_grace: float = 0.0
    """Seconds between the checkpoint signal and the requeue; 0: requeue at once."""
    replan_after: float = 300.0
    """A released job that has not started after this long is held again and re-planned."""
    max_stale_placements: int = 2
    """A job placed this many times that Slurm never started (its memory or CPUs, which DSFRO
    does not plan, fit none of the nodes given, say) is given back to Slurm as submitted."""


STALE = "placement_stale"
"""The reason of a released job held again because Slurm did not start it in time."""


def target_of(a: JobAssignment, snapshot: Snapshot) -> Target | str:
    """The Target of a running assignment, or why Slurm can't express it."""
    per_node: dict[str, int] = {}
    for s in a.placement:
        per_node[s.node] = per_node.get(s.node, 0) + len(s.gpu_indices)
    counts = set(per_node.values())
    if len(counts) != 1:
        shape = " + ".join(f"{n}:{c}" for n, c in per_node.items())
        return f"uneven GPUs per node ({shape}); Slurm gives each node the same GRES count"
    # The GRES type of the placement's own nodes (two GRES types may map to one GPU type, and
    # a job's GRES has one type); none where the job asked for untyped GPUs (``--gres=gpu:N``:
    # Slurm refuses to give such a job a typed GRES by update).
    gres = {snapshot.nodes[n].gpu_type for n in per_node if n in snapshot.nodes}
    if len(gres) > 1:
        return f"nodes of GRES types {', '.join(sorted(t or '?' for t in gres))}; a job has one"
    t = snapshot.tracked.get(a.job)
    untyped = t is not None and gpu_request(as_submitted(t.job, t.record)) == (True, None)
    return Target(
        gpu_type=a.gpu_type,
        gres_type="" if untyped or not gres else gres.pop() or "",
        nodes=tuple(per_node),
        gpus_per_node=counts.pop(),
        data_parallel=a.data_parallel,
        tensor_parallel=a.tensor_parallel,
        pipeline_parallel=a.pipeline_parallel,
        sm_clock_mhz=a.sm_clock_mhz,
        power_limit_watts=a.power_limit_watts,
    )


def _unusable(nodes: tuple[str, ...], fresh: Mapping[str, SlurmNode]) -> list[str]:
    """The nodes that can't take a job now (a powered-down one can: Slurm resumes it)."""
    return [n for n in nodes if n not in fresh or not (fresh[n].usable or fresh[n].powered_down)]


def _same(a: Target, b: Target) -> bool:
    return (
        set(a.nodes) == set(b.nodes)
        and (a.gpu_type, a.gpus_per_node) == (b.gpu_type, b.gpus_per_node)
        and (a.data_parallel, a.tensor_parallel, a.pipeline_parallel)
        == (b.data_parallel, b.tensor_parallel, b.pipeline_parallel)
    )


def _waiting(
    t: Tracked,
    a: JobAssignment | None,
    snap: Snapshot,
    fresh: Mapping[str, SlurmNode],
    rules: Rules,
) -> Decision:
    job, record = t.job, t.record
    if record.stale >= rules.max_stale_placements and not t.evacuating:
        detail = (
            f"placed {record.stale} times and never started ({job.reason}): Slurm places it "
            "as submitted"
        )
        return Decision(job, Action.FALLBACK, "never_started", detail, record=record)
    if a is None:
        return Decision(job, Action.WAIT, "not_in_plan", record=record)
    if a.state != JobState.JOB_STATE_RUNNING:
        if record.avoid and a.queue_reason == QueueReason.QUEUE_REASON_NO_FEASIBLE_CONFIGURATION:
            detail = (
                f"placed {record.stale} times and never started ({job.reason}), and the nodes "
                "it was not placed on cannot hold it: Slurm places it as submitted"
            )
            return Decision(job, Action.FALLBACK, "never_started", detail, record=record)
        reason = QueueReason.Name(a.queue_reason).removeprefix("QUEUE_REASON_").lower()
        if t.evacuating:
            return Decision(job, Action.KEEP, "evacuation_queued", a.queue_detail, record=record)
        return Decision(job, Action.WAIT, "queued", f"{reason}: {a.queue_detail}", record=record)
    target = target_of(a, snap)
    keep = Action.KEEP if t.evacuating else Action.WAIT
    if isinstance(target, str):
        return Decision(job, keep, "uneven_placement", target, record=record)
    gone = _unusable(target.nodes, fresh)
    if gone:
        detail = f"{', '.join(gone)} no longer usable; the job waits for the next round"
        return Decision(job, keep, "node_unavailable", detail, target, record)
    if t.evacuating:
        return Decision(job, Action.REQUEUE, "evacuate_drained", target.describe(), target, record)
    return Decision(job, Action.PLACE, "planned", target.describe(), target, record)


def _running(
    t: Tracked,
    a: JobAssignment | None,
    snap: Snapshot,
    fresh: Mapping[str, SlurmNode],
    rules: Rules,
    now: float,
) -> Decision:
    job, record, current = t.job, t.record, t.running
    assert current is not None
    if a is None:
        return Decision(job, Action.KEEP, "not_in_plan", record=record)
    target: Target | None = None
    if a.state == JobState.JOB_STATE_RUNNING:
        found = target_of(a, snap)
        if isinstance(found, str):
            return Decision(job, Action.KEEP, "uneven_placement", found, record=record)
        if _same(found, current):
            if found.sm_clock_mhz != current.sm_clock_mhz:
                detail = f"{current.sm_clock_mhz} -> {found.sm_clock_mhz} MHz"
                reclocked = replace(current, sm_clock_mhz=found.sm_clock_mhz)
                return Decision(job, Action.RECLOCK, "clock_changed", detail, reclocked, record)
            if record.checkpoint_at is not None:
                detail = f"{current.describe()}; kept after its checkpoint signal"
                return Decision(job, Action.UNMARK, "planned", detail, record=record)
            return Decision(job, Action.KEEP, "planned", current.describe(), record=record)
        gone = _unusable(found.nodes, fresh)
        if gone:
            return Decision(job, Action.KEEP, "node_unavailable", ", ".join(gone), record=record)
        target = found
    if not job.requeue or t.demand.preemptible is False:
        return Decision(job, Action.KEEP, "not_requeueable", record=record)
    why = "moved" if target is not None else "preempted"
    detail = f"{current.describe()} -> {target.describe() if target else 'queued'}"
    if rules.checkpoint_grace > 0:
        if record.checkpoint_at is None:
            return Decision(job, Action.CHECKPOINT, why, detail, target, record)
        if now < record.checkpoint_at + rules.checkpoint_grace:
            left = record.checkpoint_at + rules.checkpoint_grace - now
            return Decision(
                job, Action.KEEP, "checkpoint_grace", f"{left:.0f} s left", record=record
            )
    return Decision(job, Action.REQUEUE, why, detail, target, record)


def decide(
    snap: Snapshot,
    plan: Plan,
    fresh: Mapping[str, SlurmNode],
    rules: Rules,
    now: float,
) -> list[Decision]:
    """Every job's decision under `plan`; `fresh`: the nodes read just before applying."""
    by_name = {a.job: a for a in plan.assignments}
    out = []
    for name, t in snap.tracked.items():
        a = by_name.get(name)
        if t.running is None:
            out.append(_waiting(t, a, snap, fresh, rules))
        else:
            out.append(_running(t, a, snap, fresh, rules, now))
    out.extend(reserved(snap, fresh, rules, now))
    out = within_free_gpus(out, snap, fresh)
    out.extend(reported(snap))
    return out


def within_free_gpus(
    decisions: list[Decision], snap: Snapshot, fresh: Mapping[str, SlurmNode]
) -> list[Decision]:
    """`decisions` with every release onto GPUs that are not free now held back: a PLACE
    waits, a REQUEUE to a target requeues held. Free: as `fresh` says, plus what this round's
    requeues free, less what released jobs not started are promised. A job released onto GPUs
    another job still holds (one in its checkpoint grace, one Slurm started since the
    snapshot) would pend there holding nothing, and the next round would promise the same
    GPUs again. An ``--exclusive`` job takes every GPU of its nodes (Slurm 22.05 gives it
    them all) and only nodes with every GPU free: it goes before the others, and two jobs
    planned onto one empty node where one is exclusive are not both released (the second
    would pend there until ``replan_after``)."""
    size = {name: node.gpu_count for name, node in fresh.items()}
    free = {name: node.gpu_count - len(node.used_indices) for name, node in fresh.items()}
    for d in decisions:
        if d.action is Action.REQUEUE:
            for name, gres in d.job.allocation:
                if gres is not None and name in free:
                    free[name] += len(gres.indices) or gres.count
    rehold = {d.job_id for d in decisions if d.action is Action.REHOLD}
    for job, record in snap.reserved:
        if job.job_id not in rehold and record.target is not None:
            for name in record.target.nodes:
                if name in free:
                    free[name] -= size[name] if job.exclusive else record.target.gpus_per_node
    out: dict[int, Decision] = {}
    first = sorted(range(len(decisions)), key=lambda k: not decisions[k].job.exclusive)
    for k in first:
        d = decisions[k]
        target = d.target
        if d.action not in (Action.PLACE, Action.REQUEUE) or target is None:
            out[k] = d
            continue
        exclusive = d.job.exclusive
        least = target.gpus_per_node  # an exclusive job: the whole node (and never less)
        need = {n: max(size.get(n, 0), least) if exclusive else least for n in target.nodes}
        short = [n for n in target.nodes if free.get(n, 0) < need[n]]
        if not short:
            for name in target.nodes:
                free[name] -= need[name]
            out[k] = d
            continue
        if exclusive:
            detail = f"{', '.join(short)}: not every GPU free now (--exclusive)"
        else:
            detail = f"{', '.join(short)}: fewer than {target.gpus_per_node} GPUs free now"
        if d.action is Action.PLACE:
            out[k] = Decision(d.job, Action.WAIT, "gpus_busy", detail, record=d.record)
        else:  # requeued held, placed anew next round
            out[k] = replace(d, target=None, detail=f"{d.detail}; {detail}")
    return [out[k] for k in range(len(decisions))]


def reserved(
    snap: Snapshot, fresh: Mapping[str, SlurmNode], rules: Rules, now: float
) -> list[Decision]:
    """Released jobs not started yet that can't start where they were sent, or have waited
    past ``replan_after``: held again (with or without a plan this round)."""
    out = []
    for job, record in snap.reserved:
        target = record.target
        gone = _unusable(target.nodes, fresh) if target is not None else []
        if gone:
            detail = f"released to {', '.join(gone)}, which can't run it now"
            out.append(Decision(job, Action.REHOLD, "node_unavailable", detail, record=record))
        elif job.job_id in snap.crowded:
            detail = "another job holds some of its planned GPUs now"
            out.append(Decision(job, Action.REHOLD, "gpus_taken", detail, record=record))
        elif now - record.at > rules.replan_after:
            detail = f"released {now - record.at:.0f} s ago, not started ({job.reason})"
            out.append(Decision(job, Action.REHOLD, STALE, detail, record=record))
    return out


def reported(snap: Snapshot, release: str | None = None) -> list[Decision]:
    """Decisions of the jobs that are not in the request: malformed or unplaceable demands,
    jobs not eligible yet (given back to Slurm with the others when `release` says why), and
    placement rules DSFRO does not plan (given back to Slurm)."""
    out = [
        Decision(j, Action.SKIP, "malformed_demand", e, record=decode(j.admin_comment))
        for j, e in snap.malformed
    ]
    out.extend(Decision(j, Action.WAIT, "no_gpu_type", e) for j, e in snap.unplaceable)
    for j, e in snap.ineligible:
        if release is None:
            out.append(Decision(j, Action.WAIT, "not_eligible", e))
        else:  # Slurm holds it to its --begin and --dependency itself
            out.append(
                Decision(
                    j, Action.FALLBACK, "dsfro_unavailable", release, record=decode(j.admin_comment)
                )
            )
    out.extend(
        Decision(j, Action.FALLBACK, reason, e, record=decode(j.admin_comment))
        for j, reason, e in snap.returned
    )
    return out


def _unchanged(t: Tracked) -> bool:
    """Whether the job's comment is the one whose demand was refused (records written before
    the digest was kept: taken as unchanged)."""
    return t.record.refused in ("", comment_digest(t.job.comment))


def fallback(snap: Snapshot, why: str, release: bool) -> list[Decision]:
    """Decisions of a round without a plan: held jobs are given back to Slurm unchanged when
    `release` (DSFRO out of reach for longer than the fallback time), else they wait; running
    jobs stay as they are (released ones: see ``reserved``)."""
    out = []
    for t in snap.tracked.values():
        if t.running is not None or t.evacuating:
            out.append(Decision(t.job, Action.KEEP, "no_plan", why, record=t.record))
        elif t.record.state == "invalid" and _unchanged(t):  # held until its comment is fixed
            detail = f"{why}; its demand was refused: {t.record.error}"
            out.append(Decision(t.job, Action.WAIT, "invalid_demand", detail, record=t.record))
        elif release:
            out.append(Decision(t.job, Action.FALLBACK, "dsfro_unavailable", why, record=t.record))
        else:
            out.append(Decision(t.job, Action.WAIT, "dsfro_unavailable", why, record=t.record))
    out.extend(reported(snap, why if release else None))
    return out
