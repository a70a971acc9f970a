"""The aggregated bound's rows for soft node preferences (solver.search.bound_preferences):
what the nodes a job likes can hold, and what a running job kept where it runs pays there."""

from __future__ import annotations

import dataclasses

import pytest

from solver.domain import ObjectiveWeights, Problem, Termination
from solver.perfmodel.configs import build_config_set
from solver.preferences import NodePreference
from solver.search.bound import solve_aggregate
from solver.search.bound_preferences import levels, preference_floor
from solver.search.lagrangian import solve_lagrangian
from tests.bruteforce import optimum_of
from tests.factories import cluster, job, node, point, problem, running, solve
from tests.test_node_preferences import SEEDS, with_random_preferences

W = 0.05


def eights(*dislikes: float, jobs: int, liked_by_all: bool = True) -> Problem:
    """Nodes n0.. of 8 GPUs, disliked as given by every job; `jobs` jobs of exactly 8 GPUs,
    worth far more running than any preference: each takes a node of its own."""
    c = cluster(*(node(f"n{k}") for k in range(len(dislikes))))
    preference = NodePreference({f"n{k}": d for k, d in enumerate(dislikes) if d > 0})
    js = [
        dataclasses.replace(
            job(f"j{k}", point(8, 1000.0, 2400.0), min_gpus=8, max_gpus=8),
            preference=preference if liked_by_all else NodePreference(dict(preference.dislike)),
        )
        for k in range(jobs)
    ]
    return problem(c, *js, weights=dataclasses.replace(ObjectiveWeights(), node_preference=W))


def unpriced(p: Problem) -> Problem:
    return dataclasses.replace(
        p, jobs=tuple(dataclasses.replace(j, preference=None) for j in p.jobs)
    )


def bound(p: Problem, integer: bool = False) -> float:
    b = solve_aggregate(p, build_config_set(p), integer=integer).best_bound
    assert b is not None
    return b


def test_levels_count_the_gpus_at_each_dislike_of_usable_nodes() -> None:
    p = eights(0.0, 0.5, 1.0, 0.5, jobs=1)
    assert levels(p, p.jobs[0]) == {"A100": [(0.0, 8), (0.5, 16), (1.0, 8)]}
    assert preference_floor(p, p.jobs[0]) == {}
    barred = dataclasses.replace(p.jobs[0], excluded_nodes=frozenset({"n0"}))
    assert levels(p, barred) == {"A100": [(0.5, 16), (1.0, 8)]}
    assert preference_floor(p, barred) == {"A100": 0.5}


def test_jobs_beyond_what_liked_nodes_hold_pay_their_dislike_in_the_bound() -> None:
    """One liked node, two jobs that each fill a node: one of them runs on the disliked node
    in every plan, and the bound counts it (before, it counted nothing: the LP pooled both)."""
    p = eights(0.0, 1.0, jobs=2)
    assert bound(unpriced(p)) - bound(p) == pytest.approx(W, abs=1e-5)
    r = solve(p)
    assert r.plan.objective.node_preference == pytest.approx(1.0)
    assert r.stats.termination is Termination.OPTIMAL


def test_each_step_of_dislike_is_paid_by_what_the_nodes_below_it_cannot_hold() -> None:
    """Dislikes 0, 0.5 and 1 and three jobs that fill a node each: 0 + 0.5 + 1 per plan."""
    p = eights(0.0, 0.5, 1.0, jobs=3)
    assert bound(unpriced(p)) - bound(p) == pytest.approx(1.5 * W, abs=1e-5)
    assert bound(unpriced(p), integer=True) - bound(p, integer=True) == pytest.approx(
        1.5 * W, abs=1e-5
    )


def test_room_is_shared_by_a_rule_not_by_look_alike_rules() -> None:
    """Jobs with equal but separate preferences each see the whole liked node: a weaker row,
    still a bound (the test above pays 0.05 with one shared rule)."""
    p = eights(0.0, 1.0, jobs=2, liked_by_all=False)
    assert bound(unpriced(p)) - bound(p) == pytest.approx(0.0, abs=1e-5)


def dual(p: Problem) -> float:
    return solve_lagrangian(p, build_config_set(p), time_limit=5.0).best_bound


def test_a_running_job_kept_where_it_runs_pays_its_dislike_there_in_the_bound() -> None:
    """A job running on the node it dislikes, moving dearer than the dislike: kept, it pays
    its dislike, and the bound (the LP's, and the Lagrangian dual a decomposed solve reports)
    proves the plan; before, neither counted anything of it."""
    c = cluster(node("n0"), node("n1"))
    j = dataclasses.replace(
        job("j", point(8, 1000.0, 2400.0), min_gpus=8, max_gpus=8),
        preference=NodePreference({"n1": 1.0}),
        current=running("A100", {"n1": tuple(range(8))}),
    )
    p = problem(c, j, weights=dataclasses.replace(ObjectiveWeights(), node_preference=W / 2))
    assert p.weights.migration > W / 2  # moving costs more than the dislike: it stays
    assert bound(unpriced(p)) - bound(p) == pytest.approx(W / 2, abs=1e-5)
    assert dual(unpriced(p)) - dual(p) == pytest.approx(W / 2, abs=1e-5)
    r = solve(p)
    assert r.plan.assignment("j").placement == j.current.placement  # type: ignore[union-attr]
    assert r.stats.termination is Termination.OPTIMAL
    assert r.stats.best_bound == pytest.approx(r.plan.objective.total, abs=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_lp_and_mip_bounds_stay_above_the_enumerated_optimum(seed: int) -> None:
    p, configs, best = optimum_of(with_random_preferences, seed)
    if best == float("-inf"):  # no valid plan (a non-preemptible job over the budget)
        return
    for integer in (False, True):
        b = solve_aggregate(p, configs, integer=integer).best_bound
        assert b is not None and b >= best - 1e-9
    assert solve_lagrangian(p, configs, time_limit=5.0).best_bound >= best - 1e-9


def test_the_dual_prices_a_preference_every_usable_node_misses() -> None:
    """Every node disliked by half: each GPU pays it wherever it goes, in the dual too."""
    p = eights(0.5, 0.5, jobs=1)
    assert dual(unpriced(p)) - dual(p) == pytest.approx(0.5 * W, abs=1e-5)
