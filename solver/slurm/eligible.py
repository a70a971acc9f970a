"""Whether a held DSFRO job may start now: its ``--begin`` time has come and its
``--dependency`` holds.

Slurm does not evaluate the dependencies of a held job (they stay ``(unfulfilled)`` after the
job they name has ended), so the adapter evaluates them from squeue's jobs, as Slurm would on
release: ``after`` (the job started), ``afterany`` (ended), ``afterok`` (completed),
``afternotok`` (ended otherwise), each with its ``+minutes`` delay, and ``singleton`` (no other
job of its name and user running); items joined by ``,`` must all hold, by ``?`` one of them.
A job released before its dependencies hold would sit in Slurm's queue on the GPUs planned
for it. A job squeue no longer lists has ended long ago: its dependency holds (Slurm forgets
it too); a kind of dependency the adapter does not know (``aftercorr``, ``afterburstbuffer``)
is left to Slurm: it holds here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from solver.slurm.state import SlurmJob

ENDED = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
    }
)
STARTED = ENDED | {"RUNNING", "SUSPENDED", "COMPLETING", "STOPPED"}

_ITEM = re.compile(r"^(\w+):(\d+)(?:_[\d*]+)?(?:\+(\d+))?(?:\(\w+\))?$")


def waiting_for(job: SlurmJob, jobs: Mapping[int, SlurmJob], now: float) -> str | None:
    """Why the job may not start yet; None if it may."""
    if job.eligible_time > now:
        return f"its --begin is {job.eligible_time - now:.0f} s away"
    text = job.dependency.strip()
    if not text or text == "(null)":
        return None
    items = re.split(r"[,?]", text)
    open_items = [i for i in items if not _holds(i, job, jobs, now)]
    if not open_items or ("?" in text and len(open_items) < len(items)):
        return None
    return f"its --dependency {', '.join(open_items)} does not hold yet"


def _holds(item: str, job: SlurmJob, jobs: Mapping[int, SlurmJob], now: float) -> bool:
    item = item.strip()
    if item.startswith("singleton"):
        return not any(
            o.job_id != job.job_id and o.name == job.name and o.user == job.user and o.active
            for o in jobs.values()
        )
    m = _ITEM.match(item)
    if m is None:
        return True  # a form the adapter does not read: Slurm judges it on release
    kind, other, delay = m.group(1), jobs.get(int(m.group(2))), int(m.group(3) or 0) * 60
    if other is None:
        return True
    if kind == "after":
        return other.state in STARTED and now >= other.start_time + delay
    if kind not in ("afterany", "afterok", "afternotok"):
        return True
    if other.state not in ENDED or now < other.end_time + delay:
        return False
    ok = other.state == "COMPLETED"
    return kind == "afterany" or ok == (kind == "afterok")
