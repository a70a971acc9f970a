"""Decisions -> Slurm commands, and the plan file each placed job's launcher reads.

Per job, in a small thread pool (each ``scontrol`` is a few milliseconds, mostly waiting):
PLACE sets ``NumNodes``, ``NodeList``, ``Gres``, ``TresFreq`` (the SM clock, as
``--gpu-freq`` would) and the record in ``AdminComment`` in one ``scontrol update``, then writes
the plan file; REQUEUE runs ``scontrol requeuehold`` first; CHECKPOINT sends the checkpoint
signal. Then every job to release is released in one ``scontrol release``. A job whose update
failed is not released: it stays held and the next round plans it again. A failure is an
Outcome with the command's error, never an exception: one job can't stop the others.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from solver.files import write_text
from solver.slurm.commands import Slurm
from solver.slurm.decide import STALE, Action, Decision
from solver.slurm.hostlist import join
from solver.slurm.record import (
    EMPTY,
    MAX_ERROR_CHARS,
    Original,
    Record,
    Target,
    comment_digest,
)
from solver.slurm.state import SlurmJob


@dataclass(frozen=True)
class Outcome:
    """What became of one decision."""

    decision: Decision
    applied: bool
    error: str = ""


def original_of(job: SlurmJob, record: Record) -> Original:
    """The job's own request: from its record if the adapter changed it before, else now."""
    if record.original is not None:
        return record.original
    return Original(
        required_nodes=job.required_nodes,
        node_count=job.node_count,
        tres_per_node=job.tres_per_node,
        tres_freq=job.tres_freq,
        submit_time=float(job.submit_time),
    )


def place_fields(target: Target, record: Record) -> list[tuple[str, str]]:
    """The ``scontrol update`` fields that put a pending job where `target` says."""
    fields = [
        ("NumNodes", str(len(target.nodes))),
        ("NodeList", join(target.nodes)),
        ("Gres", target.gres()),
    ]
    if target.sm_clock_mhz > 0:
        fields.append(("TresFreq", f"gpu:{target.sm_clock_mhz}"))
    fields.append(("AdminComment", record.encode()))
    return fields


def restore_fields(original: Original, record: Record) -> list[tuple[str, str]]:
    """The fields that give a job back its own request (fallback)."""
    gres = ",".join(
        e.removeprefix("gres:").removeprefix("gres/")
        for e in original.tres_per_node.split(",")
        if e
    )
    fields = [
        ("NodeList", join(original.required_nodes)),
        ("NumNodes", str(max(original.node_count, 1))),
        ("TresFreq", original.tres_freq),
        # A job that asked for no GRES gets none back: Slurm 22.05 takes "gpu:0" (an empty
        # Gres= leaves "gres:" behind); before, it kept the GPUs the adapter had given it.
        ("Gres", gres or "gpu:0"),
    ]
    fields.append(("AdminComment", record.encode()))
    return fields


def plan_document(job_id: int, target: Target, at: float) -> dict[str, object]:
    """The plan file's content: what the job's launcher needs to start in the planned shape."""
    return {
        "job_id": job_id,
        "gpu_type": target.gpu_type,
        "nodes": list(target.nodes),
        "gpus_per_node": target.gpus_per_node,
        "num_gpus": target.num_gpus,
        "data_parallel": target.data_parallel,
        "tensor_parallel": target.tensor_parallel,
        "pipeline_parallel": target.pipeline_parallel,
        "sm_clock_mhz": target.sm_clock_mhz,
        "power_limit_watts": target.power_limit_watts,
        "planned_at": round(at, 3),
    }


def write_plan_files(plan_dir: Path, job_id: int, target: Target, at: float) -> None:
    """``<plan_dir>/<job id>.json`` and a ``.env`` to source (DSFRO_DATA_PARALLEL=...)."""
    doc = plan_document(job_id, target, at)
    write_text(plan_dir / f"{job_id}.json", json.dumps(doc, indent=2) + "\n")
    env = {
        f"DSFRO_{k.upper()}": ",".join(map(str, v)) if isinstance(v, list) else str(v)
        for k, v in doc.items()
        if k != "planned_at"
    }
    write_text(plan_dir / f"{job_id}.env", "".join(f"{k}={v}\n" for k, v in env.items()))


class Applier:
    """Applies one round's decisions to Slurm."""

    def __init__(
        self,
        slurm: Slurm,
        *,
        plan_dir: Path | None = None,
        checkpoint_signal: str = "USR1",
        workers: int = 4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.slurm = slurm
        self.plan_dir = plan_dir
        self.checkpoint_signal = checkpoint_signal
        self.workers = max(1, workers)
        self.clock = clock

    def apply(self, decisions: Sequence[Decision]) -> list[Outcome]:
        """Every decision applied (or failed); releases last, in one call."""
        with ThreadPoolExecutor(self.workers, thread_name_prefix="dsfro-slurm-apply") as pool:
            steps = list(pool.map(self._prepare, decisions))
        to_release = [d.job_id for d, ok, _, release in steps if ok and release]
        released = self._release(to_release)
        outcomes = []
        for d, ok, error, release in steps:
            if ok and release and d.job_id in released:
                ok, error = False, released[d.job_id]
            outcomes.append(Outcome(d, ok, error))
        return outcomes

    def _release(self, job_ids: list[int]) -> dict[int, str]:
        """Releases the jobs; returns those that failed, with the error."""
        if not job_ids:
            return {}
        result = self.slurm.release(job_ids)
        if result.ok:
            return {}
        failed = {}  # one at a time, to know which
        for job_id in job_ids:
            one = self.slurm.release([job_id])
            if not one.ok:
                failed[job_id] = one.error()
        return failed

    def _prepare(self, d: Decision) -> tuple[Decision, bool, str, bool]:
        """(decision, succeeded, error, to release) after the job's own commands."""
        try:
            return self._prepare_one(d)
        except OSError as e:  # the plan file
            return d, False, f"plan file: {e}", False

    def _prepare_one(self, d: Decision) -> tuple[Decision, bool, str, bool]:
        now = self.clock()
        record = d.record or EMPTY
        if d.action in (Action.PLACE, Action.REQUEUE):
            if d.action is Action.REQUEUE:
                done = self.slurm.requeue_hold(d.job_id)
                if not done.ok:
                    return d, False, done.error(), False
                if d.target is None:
                    kept = record.with_(
                        state="requeued",
                        at=now,
                        checkpoint_at=None,
                        original=original_of(d.job, record),
                    )
                    self.slurm.update(d.job_id, [("AdminComment", kept.encode())])
                    return d, True, "", False
            assert d.target is not None
            new = Record(
                state="placed",
                at=now,
                target=d.target,
                original=original_of(d.job, record),
                stale=record.stale,
                avoid=record.avoid,
            )
            done = self.slurm.update(d.job_id, place_fields(d.target, new))
            if not done.ok:
                return d, False, done.error(), False
            if self.plan_dir is not None:
                write_plan_files(self.plan_dir, d.job_id, d.target, now)
            return d, True, "", True
        if d.action is Action.RECLOCK:
            assert d.target is not None
            new = record.with_(at=now, target=d.target, checkpoint_at=None)
            fields = [("TresFreq", f"gpu:{d.target.sm_clock_mhz}"), ("AdminComment", new.encode())]
            done = self.slurm.update(d.job_id, fields)
            if done.ok and self.plan_dir is not None:
                write_plan_files(self.plan_dir, d.job_id, d.target, now)
            return d, done.ok, "" if done.ok else done.error(), False
        if d.action is Action.CHECKPOINT:
            done = self.slurm.signal(d.job_id, self.checkpoint_signal)
            if not done.ok:
                return d, False, done.error(), False
            marked = record.with_(checkpoint_at=now)
            done = self.slurm.update(d.job_id, [("AdminComment", marked.encode())])
            return d, done.ok, "" if done.ok else done.error(), False
        if d.action is Action.UNMARK:
            kept = record.with_(checkpoint_at=None)
            done = self.slurm.update(d.job_id, [("AdminComment", kept.encode())])
            return d, done.ok, "" if done.ok else done.error(), False
        if d.action is Action.REHOLD:
            done = self.slurm.hold([d.job_id])
            if done.ok and d.reason == STALE:  # counted: a job Slurm never starts goes back
                nodes = record.target.nodes if record.target is not None else ()
                avoid = tuple(sorted({*record.avoid, *nodes}))
                marked = record.with_(stale=record.stale + 1, avoid=avoid)
                done = self.slurm.update(d.job_id, [("AdminComment", marked.encode())])
            return d, done.ok, "" if done.ok else done.error(), False
        if d.action is Action.FALLBACK:
            new = Record(state="fallback", at=now, original=record.original)
            fields = (
                restore_fields(record.original, new)
                if record.original is not None
                else [("AdminComment", new.encode())]
            )
            done = self.slurm.update(d.job_id, fields)
            if not done.ok:
                return d, False, done.error(), False
            if self.plan_dir is not None:
                for suffix in (".json", ".env"):
                    with contextlib.suppress(FileNotFoundError):
                        (self.plan_dir / f"{d.job_id}{suffix}").unlink()
            return d, True, "", True
        if d.action is Action.SKIP:
            refused = comment_digest(d.job.comment)
            if record.error == d.detail[:MAX_ERROR_CHARS] and record.refused == refused:
                return d, True, "", False  # reported already: no write every round
            marked = record.with_(
                state=record.state or "invalid", at=now, error=d.detail, refused=refused
            )
            done = self.slurm.update(d.job_id, [("AdminComment", marked.encode())])
            return d, done.ok, "" if done.ok else done.error(), False
        return d, True, "", False  # WAIT, KEEP: nothing to do in Slurm
