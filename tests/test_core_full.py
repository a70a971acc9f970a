"""The full model as a step (solver.core.steps.full): started only when building it, at the
backend's cost per variable, fits in the time left; stopped once the gap has closed."""

from __future__ import annotations

import dataclasses
import time

from solver.core.deadline import Clock, Deadline
from solver.core.incumbent import Incumbent
from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.core.steps.full import full_model_size, solve_full_model
from solver.domain import Backend, Problem
from solver.perfmodel.configs import build_config_set
from solver.search.heuristic import Heuristic
from tests.backend_helpers import _instance
from tests.factories import solve


def _on(backend: Backend, seconds: float = 2.0) -> Problem:
    p, _ = _instance("tiny-power")
    options = dataclasses.replace(p.options, backend=backend, time_budget_seconds=seconds)
    return dataclasses.replace(p, options=options)


def test_pyomo_runs_the_full_model_when_its_build_fits() -> None:
    r = solve(_on(Backend.PYOMO))
    assert "Pyomo/appsi_highs" in r.stats.detail


def test_pyomo_skips_the_full_model_its_build_would_outlast() -> None:
    """Pyomo's build and hand-over are Python and outside the solver's time limit (a 1 s call
    answered after 3.4 s at 25,006 variables): at a cost per variable that cannot fit, the
    guided plan answers within the budget."""
    slow = SolverSettings(pyomo_build_seconds_per_variable=10.0)
    r = solve(_on(Backend.PYOMO), settings=slow)
    assert "no time left to build and solve the full model" in r.stats.detail
    assert "Pyomo/" not in r.stats.detail
    assert r.stats.wall_seconds < 2.0


def test_cpsat_skips_the_full_model_its_build_would_outlast() -> None:
    """CP-SAT's model is built in Python too (a 1 s call at 157,000 variables answered after
    2.4 s when its build was costed as HiGHS's)."""
    slow = SolverSettings(cpsat_build_seconds_per_variable=10.0)
    r = solve(_on(Backend.CPSAT), settings=slow)
    assert "no time left to build and solve the full model" in r.stats.detail
    assert "CP-SAT" not in r.stats.detail
    assert "CP-SAT" in solve(_on(Backend.CPSAT)).stats.detail


def test_each_backend_pays_its_own_build() -> None:
    slow = SolverSettings(
        pyomo_build_seconds_per_variable=10.0, cpsat_build_seconds_per_variable=10.0
    )
    r = solve(_on(Backend.HIGHS), settings=slow)
    assert "no time left to build" not in r.stats.detail
    assert "HiGHS" in r.stats.detail


def test_an_explicit_backend_solves_a_model_beyond_the_in_process_size_in_a_worker() -> None:
    """As under AUTO: HiGHS's presolve cannot be stopped from Python (200 nodes / 400 jobs,
    201,260 variables: a 3 s HIGHS call answered after 4.2-4.4 s), so a model above
    ``in_process_max_variables`` is solved in a worker killed at the deadline."""
    isolated = SolverSettings(in_process_max_variables=0)
    r = solve(_on(Backend.HIGHS, 5.0), settings=isolated)
    assert "HiGHS OPTIMAL" in r.stats.detail and "in a worker process" in r.stats.detail
    r = solve(_on(Backend.HIGHS, 5.0))
    assert "HiGHS OPTIMAL" in r.stats.detail and "in a worker process" not in r.stats.detail


class _Done(Incumbent):
    """An incumbent whose gap has closed: the aggregated MIP's bound met by a placed plan."""

    def done(self) -> bool:
        return True


def test_the_full_model_stops_once_the_gap_has_closed_elsewhere() -> None:
    """On the exact side's thread it starts before the MIP's choice is placed; once that closes
    the gap its result cannot be kept (a `medium` call proven optimal after 0.3 s waited for it
    until its 5 s budget). HiGHS proves this snapshot's optimum in about 5 s when let run."""
    p, _ = _instance("hetero-power/hetero-power-32-s2")
    configs = build_config_set(p)
    now = time.monotonic()
    run = SolveRun(
        problem=p,
        settings=SolverSettings(),
        clock=Clock(Deadline(start=now, end=now + 60.0, finish_seconds=0.01, slowdown=1.0)),
        incumbent=_Done(p),
        configs=configs,
        heuristic=Heuristic(p, configs),
        threads=1,
    )
    run.incumbent.offer(run.heuristic.run(time.monotonic() + 1.0), "heuristic", Backend.HEURISTIC)
    solve_full_model(run, full_model_size(run), Backend.HIGHS, 1)
    [note] = [n for n in run.incumbent.notes if n.startswith("HiGHS")]
    assert note.startswith("HiGHS FEASIBLE") and "(0 nodes)" in note
