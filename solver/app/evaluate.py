"""EvaluatePlan's scoring: a caller's plan checked against the snapshot and scored as the
solver scores its own plans, so that DSFRO's answer evaluates to the objective it reports and a
scheduler can compare its own plan with it term by term."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from solver.core.carbon import scored_round
from solver.core.settings import SolverSettings
from solver.domain import Allocation, Problem
from solver.mig import LayoutChange
from solver.power_states import PowerAction
from solver.scoring.evaluation import Evaluation, evaluate_allocations


def evaluate_plan(
    problem: Problem,
    allocations: Mapping[str, Allocation | None],
    changes: Sequence[LayoutChange] = (),
    actions: Sequence[PowerAction] = (),
    limits: Mapping[str, float] | None = None,
    *,
    settings: SolverSettings,
) -> Evaluation:
    """The plan (job -> allocation, None: queued) checked against `problem` and scored on the
    round the solver solves (``solver.core.carbon.scored_round``: under a grid forecast, the
    energy weight scaled and the deferred jobs the plan queues left out)."""
    queued = [name for name, a in allocations.items() if a is None]
    scored = scored_round(problem, settings, queued)
    return evaluate_allocations(
        problem, allocations, changes, actions, limits, None if scored is problem else scored
    )
