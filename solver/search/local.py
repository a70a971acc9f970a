"""Local search over the moves of solver.search.moves, in a fixed order and pass count.

A pass tries to admit every queued job (with a clock repair when power blocks it), then to swap
each still-queued job in for a running one (which restarts elsewhere if it can, other queued
jobs filling what is left), then re-places (after a change) and re-clocks every running job.
Passes stop when one gains nothing or after `passes`: a work limit, so the result does not
depend on the machine's speed; `deadline` is only a safety stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from solver.search.moves import (
    EPSILON,
    move_admit,
    move_clock,
    move_reshape,
    move_swap,
    queued_by_value,
)
from solver.search.repair import Ladders
from solver.search.scorer import Scorer
from solver.search.state import SearchState

LOCAL_PASSES = 3
"""Passes at most (each stops the search once it gains nothing)."""


def local_search(
    scorer: Scorer,
    state: SearchState,
    deadline: float,
    passes: int | None = None,
    stop: Callable[[], bool] | None = None,
) -> float:
    """Run the move passes on `state` (LOCAL_PASSES at most by default) until `deadline` or
    `stop()`; returns the objective gained."""
    total = 0.0
    jobs = scorer.problem.jobs
    ladders = Ladders(scorer)
    for _ in range(LOCAL_PASSES if passes is None else passes):
        gained = 0.0
        for move in (move_admit, move_swap):
            for job in queued_by_value(scorer, state):
                if time.monotonic() >= deadline or (stop is not None and stop()):
                    return total + gained
                gained += move(scorer, state, job, ladders)
        # Re-placing every job costs a placement per configuration: worth it only once the
        # admissions changed the cluster (the state comes re-inserted to a standstill).
        reshape = gained > EPSILON
        for job in jobs:
            if time.monotonic() >= deadline or (stop is not None and stop()):
                return total + gained
            if reshape:
                gained += move_reshape(scorer, state, job)
            gained += move_clock(scorer, state, job)
        total += gained
        if gained <= EPSILON:
            break
    return total
