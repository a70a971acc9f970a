"""The best of several search states, each scored as a plan: the passes of the heuristic compete
through it."""

from __future__ import annotations

from solver.domain import Problem
from solver.perfmodel.configs import ConfigSet
from solver.scoring.plans import materialize
from solver.search.state import SearchState


class BestStates:
    """The best plan met so far, and every pass's state with its objective."""

    def __init__(self, problem: Problem, configs: ConfigSet, state: SearchState) -> None:
        self.problem = problem
        self.configs = configs
        self.plan = materialize(problem, configs, dict(state.choices))
        self.states: list[tuple[float, SearchState]] = [(self.plan.objective.total, state)]

    def offer(self, state: SearchState) -> None:
        plan = materialize(self.problem, self.configs, dict(state.choices))
        self.states.append((plan.objective.total, state))
        if plan.objective.total > self.plan.objective.total + 1e-12:
            self.plan = plan

    def leaders(self, count: int) -> list[SearchState]:
        """The `count` states of highest objective with different choices (ties: first met)."""
        out: list[SearchState] = []
        order = sorted(range(len(self.states)), key=lambda k: (-self.states[k][0], k))
        for k in order:
            state = self.states[k][1]
            if all(state.choices != other.choices for other in out):
                out.append(state)
            if len(out) == count:
                break
        return out
