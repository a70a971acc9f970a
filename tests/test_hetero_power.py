"""The stored hetero-power instances: AUTO against their proven optima, and the files current.

``instances/hetero-power/optima.json`` holds HiGHS's proofs on the full model
(``scripts/prove_optima.py``). A plan of AUTO's that beats a stored optimum, or a bound of
AUTO's below it, means the model, the checker or the objective changed meaning.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.domain import Backend
from solver.offline import generate as g
from solver.scoring.checker import check_plan
from tests.factories import solve

DIR = Path(__file__).resolve().parent.parent / "instances" / "hetero-power"
FILES = sorted(DIR.glob("hetero-power-*.json"))
OPTIMA: list[dict[str, Any]] = json.loads((DIR / "optima.json").read_text())["instances"]
TOLERANCE = 1e-6
"""Relative tolerance on objectives and bounds."""
AUTO_BUDGET_SECONDS = 2.0


def tolerance(value: float) -> float:
    return TOLERANCE * max(1.0, abs(value))


def command_of(path: Path) -> list[str]:
    """The generator arguments of a stored file, from its name (hetero-power-N-sS.json)."""
    m = re.fullmatch(r"(hetero-power-\d+)-s(\d+)\.json", path.name)
    assert m, path.name
    return ["--family", m.group(1), "--seed", m.group(2)]


def test_every_file_has_an_optimum_and_the_32_node_ones_are_proven() -> None:
    assert len(FILES) == 6
    assert sorted(e["instance"] for e in OPTIMA) == [f.name for f in FILES]
    for e in OPTIMA:
        assert (
            e["instance_sha256"] == hashlib.sha256((DIR / e["instance"]).read_bytes()).hexdigest()
        )
        assert e["objective"] <= e["best_bound"] + tolerance(e["objective"])
        if e["instance"].startswith("hetero-power-32-"):
            assert e["proven_optimal"], e["instance"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_stored_file_is_what_the_generator_writes(path: Path) -> None:
    assert path.read_text() == g.to_json(g.generate(g.spec_from_args(command_of(path))))


@pytest.mark.parametrize(
    "entry", [e for e in OPTIMA if e["proven_optimal"]], ids=lambda e: str(e["instance"])
)
def test_auto_respects_the_proven_optimum(entry: dict[str, Any]) -> None:
    problem = pipeline.to_problem(load_request_json(DIR / entry["instance"]), Limits())
    options = dataclasses.replace(
        problem.options, time_budget_seconds=AUTO_BUDGET_SECONDS, backend=Backend.AUTO
    )
    problem = dataclasses.replace(problem, options=options)
    result = solve(problem)
    assert check_plan(problem, result.plan.assignments) == []
    optimum = entry["objective"]
    assert result.plan.objective.total <= optimum + tolerance(optimum)
    if result.stats.best_bound is not None:
        assert result.stats.best_bound >= optimum - tolerance(optimum)
