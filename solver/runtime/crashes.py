"""Worker processes replaced after they died or were killed, counted by kind.

Process-wide: the service's metrics read the totals and its health the recent ones (a crash
loop turns readiness NOT_SERVING). Kinds: "solve" (a service's solve worker), "exact" (a full
model's isolated worker), "pool" (a local pool of a decomposed solve or a batch).
"""

from __future__ import annotations

import threading
import time
from collections import deque

KINDS = ("solve", "exact", "pool")

_lock = threading.Lock()
_totals: dict[str, int] = dict.fromkeys(KINDS, 0)
_recent: deque[float] = deque(maxlen=256)
"""When (time.monotonic()) the latest replacements of any kind happened."""


def record(kind: str, *, crash: bool = True) -> None:
    """A worker of `kind` died or was killed, and will be replaced. Only crashes (not kills on
    purpose, at a deadline) count towards a crash loop."""
    with _lock:
        _totals[kind] = _totals.get(kind, 0) + 1
        if crash:
            _recent.append(time.monotonic())


def totals() -> dict[str, int]:
    """Replacements so far in this process, by kind."""
    with _lock:
        return dict(_totals)


def recent(window_seconds: float) -> int:
    """Crashes of any kind within the last `window_seconds`."""
    since = time.monotonic() - window_seconds
    with _lock:
        return sum(t >= since for t in _recent)


def forget_recent() -> None:
    """Start a new window (tests: one test's kills must not count against the next)."""
    with _lock:
        _recent.clear()
