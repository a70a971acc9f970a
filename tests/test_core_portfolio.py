"""The improvement phase's order (solver.core.steps.portfolio): on one core the aggregated
MIP runs after the priced passes and before the second ruin and recreate, not after the whole
search, where a 2 s call had left it 0.2 s (docs/benchmarks.md, "one thread against two")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from solver.core.settings import SolverSettings
from solver.core.steps import portfolio
from solver.domain import Backend
from tests.backend_helpers import _instance
from tests.factories import solve


def _recorded(calls: list[str], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return fn(*args, **kwargs)

    return wrapped


def _order(monkeypatch: pytest.MonkeyPatch, threads: int) -> list[str]:
    calls: list[str] = []
    for name, attr in (("mip", "run_mip"), ("ruin", "_ruin"), ("priced", "run_priced")):
        monkeypatch.setattr(portfolio, attr, _recorded(calls, name, getattr(portfolio, attr)))
    p, _ = _instance("hetero-power/hetero-power-32-s1")
    options = dataclasses.replace(
        p.options, backend=Backend.AUTO, time_budget_seconds=20.0, threads=threads
    )
    solve(dataclasses.replace(p, options=options), settings=SolverSettings(power_margin_z=0))
    return calls


def test_on_one_core_the_mip_runs_between_the_two_ruin_and_recreates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _order(monkeypatch, threads=1)[:4] == ["ruin", "priced", "mip", "ruin"]


def test_on_two_threads_the_mip_runs_beside_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its thread starts before the search's first ruin and recreate."""
    calls = _order(monkeypatch, threads=2)
    assert calls.count("mip") == 1
    assert calls.index("mip") < calls.index("priced")
