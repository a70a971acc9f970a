"""What every validation module shares: the violation type, the collector and name quoting."""

from __future__ import annotations

import math
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


_NAME_SHOWN = 64
"""Names are cut to this length in descriptions: error details travel in metadata."""


def quoted(name: str) -> str:
    """A name quoted for a description, shortened if very long."""
    if len(name) > _NAME_SHOWN:
        name = name[:_NAME_SHOWN] + "..."
    return f'"{name}"'


def duration_seconds(d: Duration) -> float:
    """Seconds of a google.protobuf.Duration, as a float."""
    return d.seconds + d.nanos / 1e9


def positive_duration(d: Duration) -> bool:
    """Well-formed (nanos in range, same sign as seconds) and > 0."""
    return d.seconds >= 0 and 0 <= d.nanos < 1_000_000_000 and duration_seconds(d) > 0


class Collector:
    """Accumulates violations, with the recurring checks as one-liners."""

    def __init__(self) -> None:
        self.out: list[FieldViolation] = []

    def add(self, path: str, description: str) -> None:
        self.out.append(FieldViolation(path, description))

    def positive(self, path: str, value: float) -> None:
        if not (math.isfinite(value) and value > 0):
            self.add(path, f"must be a positive finite number, got {value:g}")

    def non_negative(self, path: str, value: float) -> None:
        if not (math.isfinite(value) and value >= 0):
            self.add(path, f"must be a non-negative finite number, got {value:g}")

    def at_least(self, path: str, value: int, minimum: int) -> bool:
        if value < minimum:
            self.add(path, f"must be >= {minimum}, got {value}")
            return False
        return True

    def name(self, path: str, name: str, seen: dict[str, str]) -> None:
        """Non-empty and unique among ``seen`` (name -> path of its first use)."""
        if not name:
            self.add(path, "must not be empty")
        elif name in seen:
            self.add(path, f"duplicate name {quoted(name)} (also {seen[name]})")
        else:
            seen[name] = path
