"""The first checked plan: the heuristic's priced greedy passes, re-insertion and local search.

Its work is limited by passes, so its plan does not depend on the machine's speed; the clock
only stops it on an overloaded machine (``heuristic_share`` of the budget), and stops even its
first greedy pass when the answer is due.
"""

from __future__ import annotations

from solver.core.steps import SolveRun
from solver.domain import Backend


def run_heuristic(run: SolveRun) -> list[str]:
    """Offer the heuristic's plan; the checker's violations of it (empty when it passed)."""
    clock = run.clock
    heuristic = run.heuristic
    plan = heuristic.run(
        clock.share_of_budget(run.settings.heuristic_share), stop_at=clock.work_end()
    )
    assert heuristic.first_plan_at is not None
    run.first_plan_seconds = heuristic.first_plan_at - clock.start
    violations = run.incumbent.violations(plan)
    if violations:
        # Only hard constraints of the request itself (non-preemptible jobs over a power
        # budget) defeat the heuristic, which places those jobs first whatever they draw.
        return [v.message for v in violations]
    run.incumbent.offer(plan, "heuristic", Backend.HEURISTIC)
    if heuristic.cut_short is not None:
        run.incumbent.note(
            f"the first greedy pass stopped at the deadline after {heuristic.cut_short} jobs"
        )
    return []
