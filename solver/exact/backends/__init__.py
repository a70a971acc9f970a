"""Exact backends: one interface over the solvers that take the full ``Formulation``.

Plugin style: a backend is any object with a ``name`` and a ``solve`` method (``ExactBackend``);
``get_backend`` finds it by ``domain.Backend`` in a registry that imports the built-in ones on
first use (so that Pyomo is loaded only when asked for) and that ``register_backend`` extends.
Every backend returns an ``ExactOutcome`` with the same meaning: a status (each backend maps
its solver's own statuses in one table), the variables' values, and a bound only where the
solver proved it. Turning values into a scored plan happens once, in ``solver.exact.solve``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from solver.domain import Backend
from solver.exact.backends.base import (
    DEFAULT_OPTIONS,
    ExactBackend,
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    outcome,
)

_BUILTIN: dict[Backend, tuple[str, str]] = {
    Backend.CPSAT: ("solver.exact.backends.cpsat", "CpSatBackend"),
    Backend.HIGHS: ("solver.exact.backends.highs", "HighsBackend"),
    Backend.PYOMO: ("solver.exact.backends.pyomo_backend", "PyomoBackend"),
}
_registry: dict[Backend, Callable[[], ExactBackend]] = {}
_lock = threading.Lock()


def register_backend(backend: Backend, factory: Callable[[], ExactBackend]) -> None:
    """Make `factory()` the backend for `backend` (replaces a built-in one)."""
    with _lock:
        _registry[backend] = factory


def warm_up(backends: tuple[Backend, ...] = (Backend.CPSAT, Backend.HIGHS)) -> None:
    """Import these backends now: CP-SAT's first import (with pandas) takes 0.2-2 s, which a
    server should spend before it reports SERVING, not inside a caller's budget."""
    for backend in backends:
        get_backend(backend)


def get_backend(backend: Backend) -> ExactBackend:
    """A new instance of the exact backend for `backend` (CPSAT, HIGHS, PYOMO)."""
    with _lock:
        factory = _registry.get(backend)
    if factory is None:
        if backend not in _BUILTIN:
            raise ValueError(f"{backend.value} is not an exact backend")
        module, cls = _BUILTIN[backend]
        factory = getattr(importlib.import_module(module), cls)
        with _lock:
            _registry.setdefault(backend, factory)
    return factory()


def exact_backends() -> tuple[Backend, ...]:
    """The backends get_backend knows."""
    with _lock:
        return tuple(dict.fromkeys((*_BUILTIN, *_registry)))


def pyomo_solvers() -> list[str]:
    """The Pyomo solver names usable here (probed once; loads Pyomo on first call)."""
    module = importlib.import_module(_BUILTIN[Backend.PYOMO][0])
    solvers: list[str] = module.available_solvers()
    return solvers


__all__ = [
    "DEFAULT_OPTIONS",
    "ExactBackend",
    "ExactOptions",
    "ExactOutcome",
    "SolverStatus",
    "exact_backends",
    "get_backend",
    "outcome",
    "pyomo_solvers",
    "register_backend",
    "warm_up",
]
