"""The joint MIG model in a solve (docs/mig.md, "The joint model"): after the heuristic packing,
an exact backend solves whole GPUs and slices together, warm-started from the packed plan.

Only where the model covers the snapshot (``solver.exact.mig_model.supports``) and is small
(``JOINT_MAX_VARIABLES``); elsewhere the packed plan answers alone and no bound is reported.
The better checked plan wins; the backend's bound is reported as proven, since the model
leaves out no plan that could be better (changed layouts are represented by maximal ones,
symmetric GPUs by one order).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from solver.domain import Backend, Plan, Problem
from solver.exact.backends import ExactOptions, get_backend
from solver.exact.mig_model import estimate_size, supports
from solver.exact.mig_plans import build_mig, extract_mig, hint_mig
from solver.perfmodel.configs import ConfigSet
from solver.scoring.checker import check_plan

log = logging.getLogger(__name__)

JOINT_MAX_VARIABLES = 20_000
"""Above this many variables the joint model is not built (the packing answers alone)."""
EXACT = (Backend.CPSAT, Backend.HIGHS)
MIN_JOINT_SECONDS = 0.05
"""The joint model is not solved with less time than this left."""
JOINT_BUILD_SECONDS_PER_VARIABLE = 2.6e-5
"""Building the joint model (Python): 0.77 s for 29,524 variables on this 2-core machine. A
model whose estimate takes longer than the time left is not built: at 0.3 s an 80-job MIG
snapshot on HiGHS answered at 0.85 s, building a model it then found too big."""


@dataclass(frozen=True)
class Joint:
    """The joint model's answer: the better checked plan, the proven bound (None: none), why."""

    plan: Plan
    bound: float | None
    detail: str


def joint_solve(problem: Problem, configs: ConfigSet, packed: Plan, seconds: float) -> Joint | None:
    """The joint model on `problem` for at most `seconds`, from `packed`; None when it does not
    apply (not an exact backend, a snapshot it does not cover, too big, no time)."""
    backend = problem.options.backend
    if backend not in EXACT or seconds < MIN_JOINT_SECONDS or supports(problem):
        return None
    until = time.monotonic() + seconds
    estimate = estimate_size(problem, configs)
    if estimate > JOINT_MAX_VARIABLES:  # told before building: the build alone ran past budgets
        return Joint(packed, None, f"joint MIG model not built (~{estimate} variables)")
    if estimate * JOINT_BUILD_SECONDS_PER_VARIABLE > seconds:
        return Joint(packed, None, f"joint MIG model not built: ~{estimate} variables, no time")
    f = build_mig(problem, configs)
    if f.num_variables > JOINT_MAX_VARIABLES:
        return Joint(packed, None, f"joint MIG model not built ({f.num_variables} variables)")
    left = until - time.monotonic()  # building it is Python, within the same seconds
    if left < MIN_JOINT_SECONDS:
        return Joint(packed, None, "joint MIG model: no time left after building it")
    o = problem.options
    options = ExactOptions(
        time_limit=left, relative_gap=o.relative_gap, seed=o.seed, threads=max(o.threads, 1)
    )
    solver = get_backend(backend)
    outcome = solver.solve(f, hint=hint_mig(f, packed), options=options)
    best, why = packed, "joint MIG model: no better plan"
    if outcome.values is not None:
        try:
            plan = extract_mig(f, outcome.values)
        except ValueError as e:
            log.error("joint MIG solution unreadable: %s", e)
            return Joint(packed, None, f"joint MIG model: unreadable solution ({e})")
        violations = check_plan(problem, plan.assignments, plan.layout_changes)
        if violations:
            log.error("joint MIG plan rejected by the checker: %s", violations[0])
            return Joint(packed, None, f"joint MIG plan failed the checker ({violations[0]})")
        if plan.objective.total > packed.objective.total:
            best, why = plan, "joint MIG model"
    return Joint(best, outcome.best_bound, f"{why} ({solver.name}, {outcome.status.value})")
