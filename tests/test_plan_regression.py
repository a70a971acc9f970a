"""Same plans for the same seed: every case below is work-limited (it closes its gap, or runs the
heuristic with a budget it never reaches), so its plan does not depend on the machine's speed,
and a change of the solver's structure must leave it as it is. A change that is meant to alter
one shows up in the diff of its golden file; review it, then regenerate with
DSFRO_UPDATE_GOLDEN=1 pytest tests/test_plan_regression.py.

The simulator cases run short windows of the default scenarios with the deterministic
policies, and compare every job's start, finish, energy, migrations and preemptions.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.cli.main import main
from solver.core.settings import SolverSettings
from solver.domain import Backend, JobState, Plan, Problem
from solver.search.quick import quick_plan
from tests.factories import solve

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden" / "plans"
UPDATE = bool(os.environ.get("DSFRO_UPDATE_GOLDEN"))

HP = "instances/hetero-power"
PLAN_CASES: dict[str, tuple[str, Backend, float, int, int]] = {
    # name: (instance, backend, budget in seconds, seed, threads)
    "tiny-1node.auto": ("instances/tiny-1node.json", Backend.AUTO, 10, 0, 1),
    "tiny-power.auto": ("instances/tiny-power.json", Backend.AUTO, 10, 0, 1),
    "tiny-migration.auto": ("instances/tiny-migration.json", Backend.AUTO, 10, 0, 1),
    "small.auto": ("instances/small.json", Backend.AUTO, 20, 3, 1),
    "hetero-power-32-s1.auto": (f"{HP}/hetero-power-32-s1.json", Backend.AUTO, 30, 0, 1),
    "small.heuristic": ("instances/small.json", Backend.HEURISTIC, 60, 0, 0),
    "medium.heuristic": ("instances/medium.json", Backend.HEURISTIC, 60, 0, 0),
    "pai.heuristic": ("instances/pai.json", Backend.HEURISTIC, 60, 0, 0),
    "modern-power.heuristic": ("instances/modern-power.json", Backend.HEURISTIC, 60, 0, 0),
    "hetero-power-32-s1.heuristic": (f"{HP}/hetero-power-32-s1.json", Backend.HEURISTIC, 60, 0, 0),
    "hetero-power-64-s1.heuristic": (f"{HP}/hetero-power-64-s1.json", Backend.HEURISTIC, 60, 0, 0),
}
SIM_CASES: dict[str, tuple[str, str, str]] = {
    # name: (scenario, policy, simulated window)
    "philly-a.fifo": ("philly-a", "fifo", "4h"),
    "philly-a.gavel": ("philly-a", "gavel", "4h"),
    "philly-a.sia": ("philly-a", "sia", "4h"),
    "philly-a.dsfro-heuristic": ("philly-a", "dsfro-heuristic", "4h"),
    "llm-b.fifo": ("llm-b", "fifo", "6h"),
}


def fingerprint(plan: Plan) -> dict[str, Any]:
    """Every job's state, configuration and GPUs, and the objective."""
    out: list[list[Any]] = []
    for a in sorted(plan.assignments, key=lambda a: a.job):
        if a.state is JobState.RUNNING:
            assert a.config is not None
            s = a.config.shape
            gpus = sorted([p.node, list(p.gpu_indices)] for p in a.placement)
            out.append(
                [
                    a.job,
                    "RUNNING",
                    s.gpu_type,
                    s.data_parallel,
                    s.tensor_parallel,
                    s.pipeline_parallel,
                    a.config.sm_clock_mhz,
                    gpus,
                ]
            )
        else:
            out.append([a.job, "QUEUED", a.queue_reason.name if a.queue_reason else None])
    return {"objective": plan.objective.total, "assignments": out}


def _problem(path: str, backend: Backend, budget: float, seed: int, threads: int) -> Problem:
    p = pipeline.to_problem(load_request_json(ROOT / path), Limits(max_time_budget_seconds=600))
    options = dataclasses.replace(
        p.options, backend=backend, time_budget_seconds=budget, seed=seed, threads=threads
    )
    return dataclasses.replace(p, options=options)


def _compare(name: str, got: Any) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(got, indent=0, sort_keys=True) + "\n"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    want = json.loads(path.read_text())
    assert got == want, f"{name}: plan changed; review, then DSFRO_UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", sorted(PLAN_CASES))
def test_the_plan_is_the_recorded_one(name: str) -> None:
    result = solve(_problem(*PLAN_CASES[name]))
    got = fingerprint(result.plan)
    got["termination"] = result.stats.termination.name
    _compare(name, got)


def test_the_quick_plan_is_the_recorded_one() -> None:
    settings = SolverSettings()
    quick = quick_plan(
        _problem("instances/medium.json", Backend.AUTO, 5, 0, 0),
        float("inf"),
        chunk_jobs=settings.quick_chunk_jobs,
        check_every=settings.quick_check_every,
    )
    _compare("medium.quick", fingerprint(quick.plan))


def _jobs_csv(out: Path) -> list[list[Any]]:
    (path,) = out.glob("*-jobs.csv")
    rows = []
    with path.open() as f:
        for r in csv.DictReader(f):
            rows.append(
                [
                    r["job_id"],
                    r["first_start_s"],
                    r["finish_s"],
                    round(float(r["energy_j"]), 3),
                    int(r["migrations"]),
                    int(r["preemptions"]),
                ]
            )
    return rows


@pytest.mark.parametrize("name", sorted(SIM_CASES))
def test_the_simulation_is_the_recorded_one(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, policy, window = SIM_CASES[name]
    argv = ["simulate", "--scenario", scenario, "--policy", policy, "--seed", "1"]
    assert main([*argv, "--max-time", window, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    _compare(f"sim-{name}", _jobs_csv(tmp_path))
