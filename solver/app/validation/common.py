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

    def period(self, path: str, d: Duration, maximum: float) -> float | None:
        """Seconds of a well-formed duration in [0, maximum]; None (and a violation) otherwise."""
        secs = duration_seconds(d)
        if d.seconds < 0 or not 0 <= d.nanos < 1_000_000_000 or secs > maximum:
            self.add(path, f"must be in [0, {maximum:g}]s, got {secs:g}s")
            return None
        return secs

    def positive(
        self, path: str, value: float, maximum: float | None = None, minimum: float | None = None
    ) -> bool:
        """> 0, finite and, when given, >= minimum and <= maximum."""
        if not (math.isfinite(value) and value > 0):
            self.add(path, f"must be a positive finite number, got {value:g}")
            return False
        if minimum is not None and value < minimum:
            self.add(path, f"must be >= {minimum:g}, got {value:g}")
            return False
        return self.at_most(path, value, maximum)

    def non_negative(self, path: str, value: float, maximum: float | None = None) -> bool:
        """>= 0, finite and, when given, <= maximum."""
        if not (math.isfinite(value) and value >= 0):
            self.add(path, f"must be a non-negative finite number, got {value:g}")
            return False
        return self.at_most(path, value, maximum)

    def at_most(self, path: str, value: float, maximum: float | None) -> bool:
        if maximum is not None and value > maximum:
            if isinstance(value, int) and isinstance(maximum, int):  # counts: every digit
                self.add(path, f"must be <= {maximum}, got {value}")
            else:
                self.add(path, f"must be <= {maximum:g}, got {value:g}")
            return False
        return True

    def count(self, path: str, n: int, maximum: int, limit: str) -> bool:
        """A repeated field's length within the server's limit (named in the description)."""
        if n > maximum:
            self.add(path, f"{n} entries exceed the limit of {maximum} ({limit})")
            return False
        return True

    def text(self, path: str, value: str, max_length: int) -> bool:
        """At most ``max_length`` characters, all printable (no control or NUL characters)."""
        if len(value) > max_length:
            self.add(
                path,
                f"must be at most {max_length} characters (max_name_length), got {len(value)}",
            )
            return False
        if not value.isprintable():
            k, ch = next((k, ch) for k, ch in enumerate(value) if not ch.isprintable())
            self.add(
                path,
                f"must contain printable characters only, got U+{ord(ch):04X} at position {k}",
            )
            return False
        return True

    def at_least(self, path: str, value: int, minimum: int) -> bool:
        if value < minimum:
            self.add(path, f"must be >= {minimum}, got {value}")
            return False
        return True

    def name(self, path: str, name: str, seen: dict[str, str], max_length: int) -> None:
        """Non-empty, well-formed (``text``) and unique among ``seen`` (name -> path of its
        first use)."""
        if not name:
            self.add(path, "must not be empty")
            return
        if not self.text(path, name, max_length):
            return
        if name in seen:
            self.add(path, f"duplicate name {quoted(name)} (also {seen[name]})")
        else:
            seen[name] = path
