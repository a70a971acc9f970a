"""Memory limits for solver worker processes: a worker whose resident memory passes the limit
is killed, and its caller answers with the plan it already has (status FALLBACK) while the
worker is replaced.

Resident memory (VmRSS), not address space: the solvers' thread arenas reserve gigabytes of
virtual memory they never touch, so an RLIMIT_AS small enough to matter would break them.
The limit is process-wide, set once by the server (``--worker-memory-mib``), and handed to the
worker processes it starts (``LIMIT_ENV``), which watch their own workers alike.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

WATCH_SECONDS = 0.1
"""How often a pool's workers are measured while it runs tasks."""

LIMIT_ENV = "DSFRO_WORKER_MEMORY_BYTES"
"""Set in the environment of worker processes: the limit their own workers get."""


def _from_environment() -> int | None:
    raw = os.environ.get(LIMIT_ENV, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


_limit_bytes: int | None = _from_environment()


def set_worker_memory_limit(limit_bytes: int | None) -> None:
    """Resident memory a solver worker process may use (None: no limit)."""
    global _limit_bytes
    if limit_bytes is not None and limit_bytes <= 0:
        raise ValueError(f"worker memory limit must be positive, got {limit_bytes}")
    _limit_bytes = limit_bytes


def worker_memory_limit() -> int | None:
    return _limit_bytes


def resident_bytes(pid: int) -> int | None:
    """VmRSS of process `pid`, or None if it is gone (or not on Linux)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def private_bytes(pid: int) -> int | None:
    """Memory of process `pid` that no other process shares (its private pages: what one more
    such process costs), or None if it is gone (or not on Linux)."""
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith((b"Private_Clean:", b"Private_Dirty:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return total


MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""This container's memory limit: cgroup v2, then v1 ("max", or a huge number, for none)."""


def memory_room_bytes(limits: Iterable[str] | None = None) -> int | None:
    """The memory this process's container may use: the smaller of its cgroup limit (the files
    `limits`, default MEMORY_LIMITS) and the machine's memory (MemTotal); None where neither
    can be read."""
    found: list[int] = []
    for path in MEMORY_LIMITS if limits is None else limits:
        with contextlib.suppress(OSError, ValueError):
            raw = Path(path).read_text().strip()
            if raw != "max" and int(raw) < 2**60:
                found.append(int(raw))
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                found.append(int(line.split()[1]) * 1024)
    return min(found) if found else None


class TooManyWorkers(ValueError):
    """More worker processes than this machine's (or container's) memory holds."""


def overflow(count: int, each: int | None = None) -> str | None:
    """Why `count` processes of `each` private bytes (default: this process's own) would not
    fit in this machine's or container's memory before they run anything; None if they fit
    (or either figure is unknown)."""
    each = private_bytes(os.getpid()) if each is None else each
    room = memory_room_bytes()
    if not each or not room or count * each <= room:
        return None
    return (
        f"{count} worker processes would take about {count * each / 2**30:.1f} GiB before they "
        f"run anything ({each / 2**20:.0f} MiB each), and this machine or container has "
        f"{room / 2**30:.1f} GiB"
    )


def check_workers_fit(count: int, cores: int) -> None:
    """TooManyWorkers when `count` worker processes, more than the `cores` (one each gains
    nothing more), would not fit in memory (``overflow``, each counted as this process: a
    worker imports what it did; a busy caller counts high, so a pool of one worker a core is
    never refused)."""
    if count > cores and (why := overflow(count)) is not None:
        raise TooManyWorkers(f"{why}: more than the {cores} cores gain nothing")


def over_limit(pid: int) -> int | None:
    """The resident bytes of `pid` if they exceed the limit, else None."""
    if _limit_bytes is None:
        return None
    rss = resident_bytes(pid)
    return rss if rss is not None and rss > _limit_bytes else None


def kill_if_over_limit(pid: int) -> str | None:
    """Kill `pid` if it is over the limit; the reason, for the answer's detail."""
    rss = over_limit(pid)
    if rss is None or _limit_bytes is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    reason = (
        f"worker process {pid} used {rss / 2**20:.0f} MiB, over its memory limit of "
        f"{_limit_bytes / 2**20:.0f} MiB, and was killed"
    )
    log.warning("%s", reason)
    return reason


@contextmanager
def watching(pids: Callable[[], Iterable[int]]) -> Iterator[list[str]]:
    """While the block runs, kill any of `pids()` over the limit; yields the reasons so far."""
    reasons: list[str] = []
    if _limit_bytes is None:
        yield reasons
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(WATCH_SECONDS):
            for pid in list(pids()):
                reason = kill_if_over_limit(pid)
                if reason is not None:
                    reasons.append(reason)

    thread = threading.Thread(target=watch, name="dsfro-memory-watch", daemon=True)
    thread.start()
    try:
        yield reasons
    finally:
        done.set()
        thread.join()
