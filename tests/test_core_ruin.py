"""Ruin and recreate as a step of the solve (solver.core.steps.ruin.run_ruin): it offers what it
gains, and beside the MIP it stops at once for an incumbent handed over that is worth more than
the best plan, so that the search places it while there is time."""

from __future__ import annotations

import time

from solver.core.deadline import Clock, Deadline
from solver.core.incumbent import Incumbent
from solver.core.settings import SolverSettings
from solver.core.steps import SolveRun
from solver.core.steps.portfolio import improve
from solver.core.steps.ruin import run_ruin
from solver.domain import Backend, Problem
from solver.perfmodel.configs import build_config_set
from solver.scoring.plans import materialize
from solver.search.guide import Guide
from solver.search.heuristic import Heuristic
from tests.test_ruin import running, two_for_three


def run_holding_a_and_b(p: Problem) -> SolveRun:
    """A run whose incumbent is "a" and "b" on the one node (2.0; "c", "d", "e" make 2.4)."""
    settings = SolverSettings()
    configs = build_config_set(p)
    run = SolveRun(
        problem=p,
        settings=settings,
        clock=Clock(Deadline.after(30.0, settings)),
        incumbent=Incumbent(p),
        configs=configs,
        heuristic=Heuristic(p, configs),
        threads=1,
    )
    _, state = running(p, "a", "b")
    run.incumbent.offer(materialize(p, configs, dict(state.choices)), "test", Backend.HEURISTIC)
    return run


def test_ruin_offers_the_exchange_single_moves_miss() -> None:
    run = run_holding_a_and_b(two_for_three())
    run_ruin(run, time.monotonic() + 30.0, yield_to_guides=True)  # nothing handed over
    best = run.incumbent.best
    assert best is not None
    assert {a.job for a in best.assignments if a.config is not None} == {"c", "d", "e"}


def test_ruin_beside_the_mip_stops_for_an_incumbent_handed_over() -> None:
    run = run_holding_a_and_b(two_for_three())
    first = run.incumbent.best
    run.hand_over(Guide({}, {}), 2.4)  # the aggregated model's value of "c", "d", "e"
    progress = run_ruin(run, time.monotonic() + 30.0, yield_to_guides=True)
    best = run.incumbent.best
    assert best is first  # still "a" and "b": no ruin was tried before the guide's turn
    assert progress is not None and progress.left_best is first  # resumable
    assert run.take_pending() is not None  # placed (here: nothing to place)
    progress = run_ruin(run, time.monotonic() + 30.0, yield_to_guides=True, resume=progress)
    best = run.incumbent.best
    assert best is not None
    assert {a.job for a in best.assignments if a.config is not None} == {"c", "d", "e"}
    assert progress is not None and progress.runs == 2 and progress.left_best is best


def test_ruin_goes_on_past_an_incumbent_worth_no_more_than_the_best() -> None:
    # The aggregated model relaxes placement: a choice worth 2.0 there places at 2.0 at best,
    # no gain over "a" and "b"; ruin and recreate keeps its turn.
    run = run_holding_a_and_b(two_for_three())
    run.hand_over(Guide({}, {}), 2.0)
    assert not run.pending_promises_more()
    run_ruin(run, time.monotonic() + 30.0, yield_to_guides=True)
    best = run.incumbent.best
    assert best is not None
    assert {a.job for a in best.assignments if a.config is not None} == {"c", "d", "e"}
    assert run.has_pending()  # still placed later, as before


def test_the_search_runs_ruin_first_then_the_priced_passes_then_ruin_again() -> None:
    # Ruin and recreate gains where single moves cannot; at short budgets the priced passes,
    # run first, took a third to a half of the time and gained nothing after the guide. Here
    # ruin stalls (its work limit) long before the end: the priced passes get their turn after
    # it, and ruin and recreate another from what they leave.
    p = two_for_three()
    run = run_holding_a_and_b(p)
    _, start = running(p, "a", "b")  # the first pass's state, where the priced passes start
    improve(run, Guide({}, {}), start, Backend.HEURISTIC)
    steps = [n.split(" +")[0].split(" in ")[0] for n in run.incumbent.notes]
    assert [n for n in steps if n in ("ruin and recreate", "priced passes")] == [
        "ruin and recreate",
        "priced passes",
        "ruin and recreate",
    ]
    best = run.incumbent.best
    assert best is not None
    assert {a.job for a in best.assignments if a.config is not None} == {"c", "d", "e"}
