"""Running jobs an aggregated solution moves although their shape stays, and which of them the
guided placement must move too.

The model keeps a running job on its GPUs in a column of its own that draws in its own racks;
when it moves one (its GPUs in its class's split instead), the watts of its racks go to others:
jobs it keeps there, or new jobs in the split. Kept anyway, such a job took those watts, the job
kept there went where the split had put a new job, and the new job found no room (1,024 nodes:
a chosen T4 job of 4 GPUs left out, docs/benchmarks.md). But following every move costs a
migration where the racks had room after all: the guided placement follows a move only where
the job's racks lack the watts to keep it beside what the solution puts there.
"""

from __future__ import annotations

from collections.abc import Mapping

from solver.domain import Config, Job
from solver.perfmodel import budgets
from solver.search.state import POWER_SLACK, SearchState

Split = Mapping[str, Mapping[str, float]]
"""Per job, its GPUs per rack in an aggregated solution (solver.search.guide)."""


def is_moved(job: Job, config: Config, split: Mapping[str, float] | None) -> bool:
    """Whether the solution moves the running `job` although `config` keeps its shape: its
    split (the class's GPUs it takes, which a job kept on its GPUs does not) holds all its
    GPUs. (Half of them, as an LP's fractional solution often has, lost 0.2-0.3 % at 256
    nodes / 400 jobs: treated as moved, the job found no room on its GPUs nor in its split.)"""
    return (
        split is not None
        and job.current is not None
        and config.shape == job.current.shape
        and sum(split.values()) >= config.num_gpus - 1e-6
    )


def moves_to_follow(state: SearchState, choice: Mapping[str, Config], racks: Split) -> set[str]:
    """The moved running jobs whose own racks cannot keep them beside what the solution puts
    there (its kept jobs, its split, and the jobs already in `state`), in job order: each one
    kept frees its split's watts for the next."""
    problem = state.problem
    cluster = problem.cluster
    rack_budgets = cluster.rack_power_budgets_watts
    if not racks or not rack_budgets:
        return set()
    moved = [
        j
        for j in problem.jobs
        if j.name in choice and j.name not in state.choices
        if is_moved(j, choice[j.name], racks.get(j.name))
    ]
    if not moved:
        return set()
    slack = {r: -state.rack_over(r) for r in rack_budgets}

    def draw(rack: str, watts: float) -> None:
        if rack in slack:
            slack[rack] -= watts

    def split_watts(c: Config, split: Mapping[str, float]) -> dict[str, float]:
        per_gpu = budgets.extra_watts_per_gpu(cluster, c)
        return {r: per_gpu * gpus for r, gpus in split.items()}

    for j in problem.jobs:
        c = choice.get(j.name)
        if c is None or j.name in state.choices:
            continue
        split = racks.get(j.name)
        if split is not None:
            for r, w in split_watts(c, split).items():
                draw(r, w)
        elif j.current is not None and c.shape == j.current.shape:
            for r, w in state.rack_delta(c, j.current.gpus_per_node()).items():
                draw(r, w)
    follow: set[str] = set()
    for j in moved:
        assert j.current is not None  # is_moved
        c = choice[j.name]
        own = state.rack_delta(c, j.current.gpus_per_node())
        if any(r in slack and slack[r] < w - POWER_SLACK for r, w in own.items()):
            follow.add(j.name)
            continue
        for r, w in own.items():
            draw(r, w)
        for r, w in split_watts(c, racks[j.name]).items():
            draw(r, -w)
    return follow
