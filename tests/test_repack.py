"""Repacking a GPU type (solver.search.repack): a running job spread over two nodes no longer
keeps a chosen job that needs a whole node out, unless moving costs more than it gains."""

from __future__ import annotations

import time

from solver.domain import JobState, ObjectiveWeights, Plan, Problem
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.heuristic import Heuristic
from tests.factories import cluster, job, node, point, problem, running


def _spread_runner(migration: float) -> Problem:
    """Two four-GPU nodes. r runs on one GPU of each (two GPUs, data parallel); q needs four
    GPUs in one tensor group, so one whole node."""
    return problem(
        cluster(node("n0", count=4), node("n1", count=4)),
        job("r", point(2, 200.0), max_gpus=2, current=running("A100", {"n0": (3,), "n1": (0,)})),
        job("q", point(4, 400.0, tp=4), max_gpus=4),
        weights=ObjectiveWeights(1.0, 0.0, migration, 0.0, 0.0),
    )


def _guided_plan(p: Problem) -> Plan:
    configs = build_config_set(p)
    choice = {
        j.name: max(configs.by_job[j.name], key=lambda c: c.samples_per_second) for j in p.jobs
    }
    state = Heuristic(p, configs, lambda: False).guided(choice, None, time.monotonic() + 5)
    plan = materialize(p, configs, dict(state.choices))
    assert check_plan(p, plan.assignments) == []
    return plan


def _guided(p: Problem) -> dict[str, tuple[str, ...]]:
    plan = _guided_plan(p)
    return {
        a.job: tuple(s.node for s in a.placement)
        for a in plan.assignments
        if a.state is JobState.RUNNING
    }


def test_the_type_is_repacked_so_that_the_chosen_job_runs() -> None:
    nodes = _guided(_spread_runner(migration=0.05))
    assert set(nodes) == {"r", "q"}
    assert len(nodes["q"]) == 1 and len(nodes["r"]) == 1 and nodes["q"] != nodes["r"]


def test_no_repack_where_the_move_costs_more_than_the_job_gains() -> None:
    nodes = _guided(_spread_runner(migration=50.0))
    assert nodes == {"r": ("n0", "n1")}


def test_the_repack_moves_only_what_blocks_the_job() -> None:
    """A four-GPU and an eight-GPU node: r spread over both, k on four GPUs of the larger. q
    goes to the smaller node whole; k keeps its GPUs (largest first would have moved it)."""
    p = problem(
        cluster(node("n0", count=4), node("n1", count=8)),
        job("r", point(2, 200.0), max_gpus=2, current=running("A100", {"n0": (3,), "n1": (0,)})),
        job("k", point(4, 300.0), max_gpus=4, current=running("A100", {"n1": (1, 2, 3, 4)})),
        job("q", point(4, 400.0, tp=4), max_gpus=4),
        weights=ObjectiveWeights(1.0, 0.0, 0.05, 0.0, 0.0),
    )
    plan = _guided_plan(p)
    ran = {a.job: a for a in plan.assignments if a.state is JobState.RUNNING}
    assert set(ran) == {"r", "k", "q"}
    assert [s.node for s in ran["q"].placement] == ["n0"]
    assert ran["k"].placement == p.jobs[1].current.placement  # type: ignore[union-attr]
    assert plan.objective.migration == 1.0  # r alone
