"""What every ``dsfro`` command shares: its two kinds of failure, already explained on stderr,
and how field violations print."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Protocol


class InputError(Exception):
    """Bad input that is already explained on stderr: exit 2."""


class RemoteError(Exception):
    """The service failed the call, already explained on stderr: exit 1."""


class Violation(Protocol):
    @property
    def field(self) -> str: ...

    @property
    def description(self) -> str: ...


def print_violations(path: str, violations: Iterable[Violation]) -> None:
    """One line per violation, then a count naming the file."""
    shown = list(violations)
    for v in shown:
        print(f"{v.field}: {v.description}", file=sys.stderr)
    print(f"dsfro: {path}: {len(shown)} problem(s)", file=sys.stderr)
