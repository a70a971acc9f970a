"""Slurm's reservations still to come, read from ``scontrol -o show reservation``, and the
nodes they bar a job from.

An active reservation's nodes are flagged RESERVED in sinfo and left out of the snapshot
(solver.slurm.state). One that has not begun is not flagged, yet Slurm starts no job outside
it on its nodes whose time limit reaches into it (the job pends, "ReqNodeNotAvail, May be
reserved for other job"): the adapter bars those nodes to such a job, so that it is not
released where it would sit until ``--replan-after``.

The command has no JSON form in Slurm 22.05; its one-line form is ``Key=value`` pairs, and its
times are Unix seconds under ``SLURM_TIME_FORMAT=%s`` (solver.slurm.commands sets it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from solver.slurm.hostlist import HostlistError, expand
from solver.slurm.state import SlurmJob, SlurmOutputError

WHAT = "scontrol -o show reservation"
NONE_LISTED = "No reservations in the system"
_PAIR = re.compile(r" (?=[A-Za-z][A-Za-z0-9_]*=)")


@dataclass(frozen=True)
class Reservation:
    """One reservation: its nodes from `start` to `end` (Unix seconds)."""

    name: str
    start: int
    end: int
    nodes: tuple[str, ...]
    active: bool


def parse_reservations(text: str) -> list[Reservation]:
    """The reservations of ``scontrol -o show reservation`` (one per line)."""
    out = []
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and lines[0].strip().startswith(NONE_LISTED):
        return []
    for k, line in enumerate(lines):
        where = f"{WHAT}: line {k + 1}"
        fields = {}
        for pair in _PAIR.split(line.strip()):
            key, sep, value = pair.partition("=")
            if not sep:
                raise SlurmOutputError(f"{where}: {pair!r} is not Key=value")
            fields[key] = value
        name = fields.get("ReservationName")
        if not name:
            raise SlurmOutputError(f"{where}.ReservationName: missing")
        start, end = (_seconds(fields, key, f"{where}.{key}") for key in ("StartTime", "EndTime"))
        nodes = fields.get("Nodes", "")
        try:
            names = () if nodes in ("", "(null)") else tuple(expand(nodes))
        except HostlistError as e:
            raise SlurmOutputError(f"{where}.Nodes: {e}") from None
        out.append(Reservation(name, start, end, names, fields.get("State") == "ACTIVE"))
    return out


def _seconds(fields: dict[str, str], key: str, where: str) -> int:
    value = fields.get(key)
    if value is None:
        raise SlurmOutputError(f"{where}: missing")
    if not value.isdigit():
        expected = "expected Unix seconds (SLURM_TIME_FORMAT=%s)"
        raise SlurmOutputError(f"{where}: {expected}, got {value!r}")
    return int(value)


def barred_nodes(job: SlurmJob, reservations: Iterable[Reservation], now: float) -> set[str]:
    """The nodes of reservations still to come that `job`, started now, would run into: its
    time limit reaches past their start (no limit reaches every one). Its own reservation
    (a job submitted to one goes back to Slurm) and ended ones bar nothing."""
    limit = job.time_limit_minutes
    until = float("inf") if limit is None else now + 60.0 * limit
    return {
        node
        for r in reservations
        if r.name != job.reservation and r.end > now and r.start < until
        for node in r.nodes
    }


def reserved_later(reservations: Sequence[Reservation], now: float) -> list[Reservation]:
    """The reservations that have not begun at `now` (the active ones' nodes are flagged in
    sinfo already)."""
    return [r for r in reservations if not r.active and r.start > now]
