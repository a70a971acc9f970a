"""Timing for benchmarks that print tables."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def fastest(step: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The shortest of `repeat` runs of `step`, in seconds, and what the last run returned."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = step()
        best = min(best, time.perf_counter() - start)
    return best, out
