"""What Slurm says about its nodes and jobs, read from ``sinfo --json`` and ``squeue --json``
(Slurm 22.05, OpenAPI plugin v0.0.38) into plain records.

Only the fields the adapter uses are read; a field missing or of the wrong type is a
SlurmOutputError naming it (``squeue --json: jobs[3].job_id: ...``), never a KeyError deep in
a round. Note that 22.05's ``squeue --json`` ignores ``-j``/``-p`` filters and lists finished
jobs for MinJobAge seconds: callers filter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from solver.slurm.constraint import node_features
from solver.slurm.hostlist import HostlistError, expand, indices

USABLE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
"""Base node states in which a node runs jobs (sinfo's ``state``, lower-case)."""
UNUSABLE_FLAGS = frozenset(
    {
        "DRAIN",
        "FAIL",
        "MAINTENANCE",
        "NOT_RESPONDING",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWER_DOWN",
        "REBOOT_REQUESTED",
        "REBOOT_ISSUED",
        "RESERVED",
        "INVALID_REG",
        "PLANNED",
    }
)
"""Node state flags under which no new job starts on a node."""
ACTIVE_JOB_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"})
"""Job states in which a job holds its GPUs."""

_GRES = re.compile(
    r"^(?P<name>[^:(]+)(?::(?P<type>[^:(]+))?:(?P<count>\d+)(?:\((?P<extra>[^)]*)\))?$"
)
_GRES_TYPELESS = re.compile(r"^(?P<name>[^:(]+)(?:\((?P<extra>[^)]*)\))?$")


class SlurmOutputError(ValueError):
    """Output of a Slurm command that the adapter can't read; the message names the field."""


@dataclass(frozen=True)
class Gres:
    """One GRES entry: ``gpu:h100:4(IDX:0-3)`` -> name gpu, type h100, count 4, indices."""

    name: str
    type: str
    count: int
    indices: tuple[int, ...] = ()


@dataclass(frozen=True)
class SlurmNode:
    """A node as sinfo shows it."""

    name: str
    state: str
    flags: frozenset[str]
    gpu_type: str | None
    """The GRES type of its GPUs; None without GPUs or with several types."""
    gpu_count: int
    used_indices: frozenset[int]
    partitions: tuple[str, ...]
    reason: str = ""
    features: frozenset[str] = frozenset()
    """Its active features (slurm.conf's Features=, a job's ``--constraint`` matches them)."""

    @property
    def usable(self) -> bool:
        """Whether new jobs may start here now."""
        return self.state in USABLE_STATES and not (self.flags & UNUSABLE_FLAGS)

    @property
    def draining(self) -> bool:
        """Drained or draining: up, but no new job starts here."""
        return self.state in USABLE_STATES and "DRAIN" in self.flags

    @property
    def powered_down(self) -> bool:
        """Idle and powered down by Slurm's power saving, nothing else wrong: a job placed
        here makes Slurm resume the node (ResumeProgram) and starts once it is up."""
        return (
            self.state == "idle"
            and "POWERED_DOWN" in self.flags
            and not (self.flags & (UNUSABLE_FLAGS - {"POWERED_DOWN"}))
        )


@dataclass(frozen=True)
class SlurmJob:
    """A job as squeue shows it."""

    job_id: int
    name: str
    state: str
    reason: str
    held: bool
    """Pending with priority 0 (``sbatch --hold``, ``scontrol hold``, ``requeuehold``)."""
    partition: str
    account: str
    user: str
    comment: str
    admin_comment: str
    requeue: bool
    submit_time: int
    deadline: int
    """Slurm's ``--deadline`` as a Unix time; 0: none."""
    node_count: int
    required_nodes: tuple[str, ...]
    tres_per_node: str
    tres_freq: str
    restart_count: int
    allocation: tuple[tuple[str, Gres | None], ...] = ()
    """Running: (node, its GPU GRES or None) for every allocated node, in Slurm's order."""
    tres_other: str = ""
    """Its TRES per job, per task and per socket (``--gpus``, ``--gpus-per-task``, ...)."""
    excluded_nodes: tuple[str, ...] = ()
    """Its ``--exclude`` (ExcNodeList): nodes Slurm never gives it."""
    constraint: str = ""
    """Its ``--constraint`` (the features its nodes must have)."""
    dependency: str = ""
    """Its ``--dependency`` as squeue shows it (``afterok:9(unfulfilled),...``)."""
    eligible_time: int = 0
    """Its ``--begin`` as a Unix time (0: none, or held before one was set)."""
    start_time: int = 0
    end_time: int = 0
    """When it started and ended (Unix times; 0 or a forecast while it has not)."""
    reservation: str = ""
    """Its ``--reservation`` (squeue's ``resv_name``)."""
    exclusive: bool = False
    """``--exclusive``: no other job on its nodes (squeue's ``shared`` "none")."""
    time_limit_minutes: int | None = None
    """Its ``--time`` in minutes; None: unlimited."""

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_JOB_STATES

    def gpus_not_per_node(self) -> str:
        """The job's GPU request other than per node (``--gpus=4``: "gres:gpu:4"), or ""."""
        for entry in split_top(self.tres_other):
            if entry.removeprefix("gres:").removeprefix("gres/").split(":")[0] == "gpu":
                return entry
        return ""

    def requested_gpus_per_node(self) -> int:
        """GPUs per node the job asks for (``--gres=gpu[:type]:N``); 0 without."""
        for entry in split_top(self.tres_per_node):
            gres = parse_gres(entry.removeprefix("gres:").removeprefix("gres/"), "tres_per_node")
            if gres.name == "gpu":
                return gres.count
        return 0


def split_top(text: str) -> list[str]:
    """`text` split at commas outside parentheses (``gpu:a:1(IDX:0,2),gpu:b:0``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip() and p.strip() != "(null)"]


def parse_gres(entry: str, where: str) -> Gres:
    """One GRES entry: ``gpu:h100:8``, ``gpu:8(S:0-1)``, ``gpu:h100:2(IDX:0,3)``, ``gpu``."""
    m = _GRES.match(entry)
    if m is None:
        m2 = _GRES_TYPELESS.match(entry)
        if m2 is None:
            raise SlurmOutputError(f"{where}: not a GRES entry: {entry!r}")
        return Gres(m2.group("name"), "", 1)
    extra = m.group("extra") or ""
    found: list[int] = []
    if extra.startswith("IDX:"):  # the rest is one index list: IDX:0-1,6-7
        try:
            found = indices(extra.removeprefix("IDX:"))
        except HostlistError as e:
            raise SlurmOutputError(f"{where}: {e}") from None
    return Gres(m.group("name"), m.group("type") or "", int(m.group("count")), tuple(found))


def _gpu_entries(text: str, where: str) -> list[Gres]:
    return [g for g in (parse_gres(e, where) for e in split_top(text or "")) if g.name == "gpu"]


class _Fields:
    """Typed access to one JSON object, naming the field on error."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, Mapping):
            raise SlurmOutputError(f"{where}: expected an object, got {type(data).__name__}")
        self.data, self.where = data, where

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
        value = self.data.get(key, default)
        if value is None:
            if default is None:
                raise SlurmOutputError(f"{self.where}.{key}: missing")
            return default
        if isinstance(value, bool) and kind is int:
            raise SlurmOutputError(f"{self.where}.{key}: expected an integer, got {value!r}")
        if not isinstance(value, kind):
            raise SlurmOutputError(
                f"{self.where}.{key}: expected {getattr(kind, '__name__', kind)}, "
                f"got {type(value).__name__} {value!r}"
            )
        return value

    def strings(self, key: str) -> list[str]:
        value = self.get(key, list, [])
        if not all(isinstance(v, str) for v in value):
            raise SlurmOutputError(f"{self.where}.{key}: expected a list of strings")
        return list(value)


def _load(text: str | bytes, what: str, key: str) -> list[Any]:
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise SlurmOutputError(f"{what}: not JSON: {e}") from None
    top = _Fields(data, what)
    items = top.get(key, list)
    errors = top.get("errors", list, [])
    if errors:
        raise SlurmOutputError(f"{what}: Slurm reported errors: {errors}")
    return list(items)


def parse_sinfo(text: str | bytes) -> list[SlurmNode]:
    """The nodes of ``sinfo --json``."""
    out = []
    for i, item in enumerate(_load(text, "sinfo --json", "nodes")):
        f = _Fields(item, f"sinfo --json: nodes[{i}]")
        gpus = _gpu_entries(f.get("gres", str, ""), f"{f.where}.gres")
        used = _gpu_entries(f.get("gres_used", str, ""), f"{f.where}.gres_used")
        types = {g.type for g in gpus}
        out.append(
            SlurmNode(
                name=f.get("name", str),
                state=f.get("state", str).lower(),
                flags=frozenset(s.upper() for s in f.strings("state_flags")),
                gpu_type=types.pop() if len(types) == 1 else None,
                gpu_count=sum(g.count for g in gpus),
                used_indices=frozenset(i for g in used for i in g.indices),
                partitions=tuple(f.strings("partitions")),
                reason=f.get("reason", str, ""),
                features=_features(f),
            )
        )
    return out


def _features(f: _Fields) -> frozenset[str]:
    """Active features: ``active_features`` (``features`` where Slurm omits it)."""
    key = "active_features" if "active_features" in f.data else "features"
    value = f.get(key, (str, list), "")
    return node_features(value if isinstance(value, str) else f.strings(key))


def _allocation(f: _Fields) -> tuple[tuple[str, Gres | None], ...]:
    resources = f.data.get("job_resources") or {}
    r = _Fields(resources, f"{f.where}.job_resources")
    nodes = []
    for k, item in enumerate(r.get("allocated_nodes", list, [])):
        nodes.append(_Fields(item, f"{r.where}.allocated_nodes[{k}]").get("nodename", str))
    if not nodes:
        try:
            nodes = expand(f.get("nodes", str, ""))
        except HostlistError as e:
            raise SlurmOutputError(f"{f.where}.nodes: {e}") from None
    details = f.strings("gres_detail")
    per_node: list[Gres | None] = []
    for k, detail in enumerate(details):
        found = _gpu_entries(detail, f"{f.where}.gres_detail[{k}]")
        per_node.append(found[0] if found else None)
    if per_node and len(per_node) != len(nodes):
        raise SlurmOutputError(
            f"{f.where}.gres_detail: {len(per_node)} entries for {len(nodes)} nodes"
        )
    return tuple(zip(nodes, per_node or [None] * len(nodes), strict=True))


def _hosts(f: _Fields, key: str) -> tuple[str, ...]:
    """A hostlist field (``node[1-3],gpu7``) as node names."""
    try:
        return tuple(expand(f.get(key, str, "")))
    except HostlistError as e:
        raise SlurmOutputError(f"{f.where}.{key}: {e}") from None


def parse_squeue(text: str | bytes) -> list[SlurmJob]:
    """The jobs of ``squeue --json`` (all of them: 22.05 ignores squeue's filters here)."""
    out = []
    for i, item in enumerate(_load(text, "squeue --json", "jobs")):
        f = _Fields(item, f"squeue --json: jobs[{i}]")
        state = f.get("job_state", str)
        required, excluded = (_hosts(f, key) for key in ("required_nodes", "excluded_nodes"))
        priority = f.get("priority", int, 0)
        reason = f.get("state_reason", str, "")
        out.append(
            SlurmJob(
                job_id=f.get("job_id", int),
                name=f.get("name", str, ""),
                state=state,
                reason=reason,
                held=state == "PENDING" and (priority == 0 or reason.startswith("JobHeld")),
                partition=f.get("partition", str, ""),
                account=f.get("account", str, ""),
                user=f.get("user_name", str, ""),
                comment=f.get("comment", str, ""),
                admin_comment=f.get("admin_comment", str, ""),
                requeue=f.get("requeue", bool, False),
                submit_time=f.get("submit_time", int, 0),
                deadline=f.get("deadline", int, 0),
                node_count=f.get("node_count", int, 1),
                required_nodes=required,
                excluded_nodes=excluded,
                constraint=f.get("features", str, ""),
                dependency=f.get("dependency", str, ""),
                eligible_time=f.get("eligible_time", int, 0),
                start_time=f.get("start_time", int, 0),
                end_time=f.get("end_time", int, 0),
                reservation=f.get("resv_name", str, ""),
                exclusive=f.get("shared", str, "") == "none",
                time_limit_minutes=_minutes(f.get("time_limit", int, 0)),
                tres_per_node=f.get("tres_per_node", str, ""),
                tres_freq=f.get("tres_freq", str, ""),
                restart_count=f.get("restart_cnt", int, 0),
                allocation=_allocation(f) if state in ACTIVE_JOB_STATES else (),
                tres_other=",".join(
                    t
                    for k in ("tres_per_job", "tres_per_task", "tres_per_socket")
                    if (t := f.get(k, str, ""))
                ),
            )
        )
    return out


INFINITE = 0xFFFFFFFE
"""Slurm's INFINITE (NO_VAL is one more): a 32-bit field's "no limit"."""


def _minutes(limit: int) -> int | None:
    """A time limit in minutes; None for unlimited (0, or Slurm's INFINITE and NO_VAL)."""
    return None if limit <= 0 or limit >= INFINITE else limit


def in_partition(jobs: Sequence[SlurmJob], partition: str | None) -> list[SlurmJob]:
    """The jobs of `partition` (all for None); a job submitted to several is in each."""
    if partition is None:
        return list(jobs)
    return [j for j in jobs if partition in j.partition.split(",")]
