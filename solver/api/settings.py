"""The one home of what every door shares: limits, defaults, durations as text, and the names of
backends and export formats.

The service, the CLI, batches, sweeps and profiles read these rather than keeping their own
copies, so that a default or a name changes in one place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.domain import DEFAULT_TIME_BUDGET_SECONDS, Backend

INT32_MAX = 2**31 - 1
"""Largest value of the wire's int32 fields (seed, threads, counts)."""
MAX_THREADS = 256
"""Most solver threads a request, profile or flag may ask for."""
MAX_TIME_BUDGET_SECONDS = 300.0
"""Default of the largest time budget a server accepts."""
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Default largest request or response: snapshots of thousands of nodes exceed gRPC's 4 MiB."""
EXPORT_FORMATS = ("mps", "lp")
"""File formats ``dsfro export`` writes the full model in."""

__all__ = [
    "DEFAULT_TIME_BUDGET_SECONDS",
    "EXPORT_FORMATS",
    "INT32_MAX",
    "MAX_MESSAGE_BYTES",
    "MAX_THREADS",
    "MAX_TIME_BUDGET_SECONDS",
    "Limits",
    "backend_name",
    "backend_names",
    "format_duration",
    "parse_backend",
    "parse_duration",
]


@dataclass(frozen=True)
class Limits:
    """Size and time limits of one server; requests beyond them are rejected."""

    max_nodes: int = 20000
    max_jobs: int = 20000
    max_gpus_per_node: int = 64
    max_profile_points_per_job: int = 4096
    max_time_budget_seconds: float = MAX_TIME_BUDGET_SECONDS
    default_time_budget_seconds: float = DEFAULT_TIME_BUDGET_SECONDS
    """The budget of a request that sets none."""

    def time_budget(self, requested: float | None) -> float:
        """The budget a request gets: its own, else this server's default."""
        return self.default_time_budget_seconds if requested is None else requested


# ---------------------------------------------------------------- durations

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds of ``5s``, ``500ms``, ``1.5s``, ``2m``, ``1h`` (a bare number is seconds).

    Raises ValueError for anything else, and for zero.
    """
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"invalid duration {text!r}: use e.g. 5s, 500ms, 1.5s or 2m")
    seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2) or "s"]
    if seconds <= 0:
        raise ValueError(f"duration {text!r} must be > 0")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest of ``500ms``, ``5s``, ``1.5s`` that parse_duration reads back exactly."""
    if seconds < 1 and float(f"{seconds * 1000:g}") / 1000 == seconds:
        return f"{seconds * 1000:g}ms"
    if float(f"{seconds:g}") == seconds:
        return f"{seconds:g}s"
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


# ---------------------------------------------------------------- names


def backend_name(backend: Backend) -> str:
    """A backend's lower-case name, as the CLI, profiles and batch results spell it."""
    return backend.name.lower()


def backend_names() -> tuple[str, ...]:
    """Every backend's lower-case name."""
    return tuple(backend_name(b) for b in Backend)


def parse_backend(text: str) -> Backend:
    """The backend of a name (case-insensitive); ValueError names the valid ones."""
    try:
        return Backend[text.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown backend {text!r}; one of {', '.join(backend_names())}") from None
