"""Argument types every ``dsfro`` command shares, built on ``solver.app.limits``: a bad value
is an argparse usage error (exit 2) that says what is wrong."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from solver.app.limits import INT32_MAX, MAX_THREADS, parse_backend, parse_duration
from solver.extras import MissingServerError, server_module_missing

if TYPE_CHECKING:
    from solver.app.profile import Profile

T = TypeVar("T")


def duration_arg(text: str) -> float:
    """Seconds of ``5s``, ``500ms``, ``1.5s``, ``2m``, ``1h``, ``2d`` (a bare number is seconds)."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def backend_arg(text: str) -> str:
    """A backend's lower-case name, any case accepted."""
    try:
        return parse_backend(text).name.lower()
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


N = TypeVar("N", int, float)


def _ranged(kind: Callable[[str], N], name: str, low: N, high: N) -> Callable[[str], N]:
    """A `kind` value in [low, high] (NaN is never in it), errors naming the bound."""

    def parse(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {name} {text!r}") from None
        if not low <= value <= high:
            bounds = ", ".join(str(b) if isinstance(b, int) else f"{b:g}" for b in (low, high))
            raise argparse.ArgumentTypeError(f"must be in [{bounds}], got {text.strip()}")
        return value

    return parse


def int_arg(low: int, high: int) -> Callable[[str], int]:
    """An integer in [low, high]."""
    return _ranged(int, "integer", low, high)


def float_arg(low: float, high: float) -> Callable[[str], float]:
    """A finite number in [low, high]."""
    return _ranged(float, "number", low, high)


int32_arg = int_arg(-INT32_MAX - 1, INT32_MAX)
"""An integer that fits the wire's int32 fields."""
seed_arg = int_arg(0, INT32_MAX)
threads_arg = int_arg(0, MAX_THREADS)
"""Solver threads; 0: the default."""
positive_int_arg = int_arg(1, INT32_MAX)


def csv_arg(item: Callable[[str], T]) -> Callable[[str], list[T]]:
    """A comma-separated list of `item` values."""

    def parse(text: str) -> list[T]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError("expected a comma-separated list")
        return [item(t) for t in items]

    return parse


def profile_arg(text: str) -> Profile:
    """A TOML profile, loaded (solver.app.profile; its solver settings need the server
    install)."""
    try:
        from solver.app.profile import ProfileError, load_profile
    except ModuleNotFoundError as e:
        missing = server_module_missing(e)
        if missing is None:
            raise
        raise argparse.ArgumentTypeError(str(MissingServerError("a profile", missing))) from e
    try:
        return load_profile(text)
    except ProfileError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_profile_option(parser: argparse.ArgumentParser) -> None:
    """``--profile FILE``: weights and solver settings from a TOML profile; ``args.profile`` is
    the loaded Profile or None. The request's own fields and the command's flags win over it."""
    parser.add_argument(
        "--profile",
        type=profile_arg,
        metavar="FILE",
        help="TOML profile of objective weights and solver settings; the request's own "
        "fields and the command's flags win over it",
    )
