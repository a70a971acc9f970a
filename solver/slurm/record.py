"""The adapter's own state, kept in Slurm: each DSFRO job's AdminComment holds a record of
what the adapter did to it (``dsfro:{"v":1,"state":"placed",...}``).

Because the record lives in the job, a restarted adapter (or a second one after a fail-over)
knows every job's placement, shape and clock, what the job asked for before the adapter
changed it (to give it back to Slurm unchanged on fallback), and when a checkpoint was asked
for: nothing is lost with the adapter's memory. The adapter owns the AdminComment of the jobs
that carry a demand.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from solver.slurm.demand import PREFIX

VERSION = 1
MAX_ERROR_CHARS = 400
"""An error is cut to this length in the record (the log has it whole)."""


@dataclass(frozen=True)
class Target:
    """Where and how a job runs: what the adapter gives Slurm and the job's launcher."""

    gpu_type: str
    """The DSFRO GPU type."""
    gres_type: str
    """Its Slurm GRES type."""
    nodes: tuple[str, ...]
    gpus_per_node: int
    data_parallel: int
    tensor_parallel: int
    pipeline_parallel: int
    sm_clock_mhz: int
    power_limit_watts: float = 0.0
    """The plan's per-GPU power limit (``nvidia-smi -pl``), set by a Prolog at the job's start
    from the plan file (docs/integrations.md); 0: none (records written before it: none)."""

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_node * len(self.nodes)

    def gres(self) -> str:
        return (
            f"gpu:{self.gres_type}:{self.gpus_per_node}"
            if self.gres_type
            else (f"gpu:{self.gpus_per_node}")
        )

    def describe(self) -> str:
        return (
            f"{','.join(self.nodes)} x{self.gpus_per_node} {self.gpu_type} "
            f"dp{self.data_parallel} tp{self.tensor_parallel} pp{self.pipeline_parallel} "
            f"@{self.sm_clock_mhz} MHz"
        )


@dataclass(frozen=True)
class Original:
    """The job's own request before the adapter first changed it."""

    required_nodes: tuple[str, ...] = ()
    node_count: int = 1
    tres_per_node: str = ""
    tres_freq: str = ""
    submit_time: float = 0.0
    """When the job was submitted (Slurm rewrites its SubmitTime at each requeue; the job's age
    and a deadline relative to submission count from this); 0: unknown (older records)."""


@dataclass(frozen=True)
class Record:
    """The adapter's record of one job."""

    state: str
    """placed (released to a Target), fallback (released unchanged), invalid (demand
    rejected), or "" (nothing done yet)."""
    at: float = 0.0
    target: Target | None = None
    original: Original | None = None
    checkpoint_at: float | None = None
    """When the job was signalled to checkpoint before a move."""
    error: str = ""
    refused: str = ""
    """``comment_digest`` of the comment whose demand was refused (state invalid): fixed since,
    the job is no longer held back by fallback."""
    stale: int = 0
    """Placements of the job that Slurm never started (held again after ``replan_after``)."""
    avoid: tuple[str, ...] = ()
    """The nodes of those placements: excluded for the job in the rounds after (Slurm did not
    start it there: memory, CPUs or features DSFRO does not plan)."""

    def encode(self) -> str:
        body: dict[str, Any] = {"v": VERSION, "state": self.state, "at": round(self.at, 3)}
        if self.target is not None:
            body["target"] = {**asdict(self.target), "nodes": list(self.target.nodes)}
        if self.original is not None:
            body["orig"] = {
                **asdict(self.original),
                "required_nodes": list(self.original.required_nodes),
            }
        if self.checkpoint_at is not None:
            body["ckpt"] = round(self.checkpoint_at, 3)
        if self.error:
            body["error"] = self.error[:MAX_ERROR_CHARS]
        if self.refused:
            body["refused"] = self.refused
        if self.stale:
            body["stale"] = self.stale
        if self.avoid:
            body["avoid"] = list(self.avoid)
        return PREFIX + json.dumps(body, separators=(",", ":"), sort_keys=True)

    def with_(self, **changes: Any) -> Record:
        return replace(self, **changes)


EMPTY = Record(state="")


def comment_digest(comment: str) -> str:
    """A short digest of a job's comment: whether the demand changed since it was refused."""
    return hashlib.sha256(comment.strip().encode()).hexdigest()[:16]


def decode(admin_comment: str) -> Record:
    """The record in an AdminComment; EMPTY for none, or one this adapter can't read (a
    record is rewritten whole the next time the adapter acts on the job)."""
    text = admin_comment.strip()
    if not text.startswith(PREFIX):
        return EMPTY
    try:
        body = json.loads(text[len(PREFIX) :])
        if not isinstance(body, dict) or body.get("v") != VERSION:
            return EMPTY
        t, o = body.get("target"), body.get("orig")
        return Record(
            state=str(body.get("state", "")),
            at=float(body.get("at", 0.0)),
            target=None if t is None else Target(**{**t, "nodes": tuple(t["nodes"])}),
            original=None
            if o is None
            else Original(**{**o, "required_nodes": tuple(o["required_nodes"])}),
            checkpoint_at=None if body.get("ckpt") is None else float(body["ckpt"]),
            error=str(body.get("error", "")),
            refused=str(body.get("refused", "")),
            stale=int(body.get("stale", 0)),
            avoid=tuple(str(n) for n in body.get("avoid", ())),
        )
    except (TypeError, ValueError, KeyError):
        return EMPTY
