"""The heuristic: best-fit placement, tensor groups whole, kept jobs, power, priced passes,
local search."""

from __future__ import annotations

import time

import pytest

from solver.domain import Job, JobState, ObjectiveWeights, Problem
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search import heuristic
from solver.search.bound import solve_aggregate
from solver.search.heuristic import Heuristic, place, solve_heuristic
from solver.search.pricing import dual_prices
from solver.search.state import SearchState
from tests.factories import cluster, job, node, only_throughput, point, problem, running
from tests.fairness_cases import two_types_two_tenants
from tests.test_moves import IDLE, four


def test_place_prefers_the_tightest_single_node() -> None:
    c = cluster(node("n0"), node("n1", unavailable=frozenset({0, 1, 2, 3})))
    p = problem(c, job("a", point(4, 100)))
    cfg = next(x for x in build_config_set(p).by_job["a"] if x.num_gpus == 4)
    assert place(p, {"n0": 8, "n1": 4}, cfg) == {"n1": 4}


def test_place_keeps_tensor_groups_whole_and_racks_few() -> None:
    c = cluster(node("a", rack="r0"), node("b", rack="r0"), node("c", rack="r1"))
    p = problem(c, job("j", point(8, 100, tp=4)))
    cfg = next(x for x in build_config_set(p).by_job["j"] if x.num_gpus == 8)
    # 6 free on a and b, 8 on c: c alone holds it.
    assert place(p, {"a": 6, "b": 6, "c": 8}, cfg) == {"c": 8}
    # 6 free everywhere: groups of 4 only, 4 + 4 inside rack r0.
    assert place(p, {"a": 6, "b": 6, "c": 6}, cfg) == {"a": 4, "b": 4}
    assert place(p, {"a": 3, "b": 3, "c": 3}, cfg) is None


def test_heuristic_keeps_a_running_job_in_place() -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(4, 400), current=running("A100", {"n0": (4, 5, 6, 7)})),
        job("b", point(4, 400)),
        weights=ObjectiveWeights(1, 0, 0.5, 0, 0),
    )
    plan = solve_heuristic(p, build_config_set(p), time.monotonic() + 1)
    assert check_plan(p, plan.assignments) == []
    assert plan.assignment("a").placement[0].gpu_indices == (4, 5, 6, 7)
    assert plan.assignment("b").state is JobState.RUNNING


def one_node_held_by_a_running_job(migration: float) -> Problem:
    """ "big" runs on all eight GPUs of n0, worth 1 (and `migration` kept in place); four
    waiting one-GPU jobs are worth 1 each."""
    return problem(
        cluster(node("n0")),
        job("big", point(8, 400), min_gpus=8, current=running("A100", {"n0": tuple(range(8))})),
        *(job(f"s{i}", point(1, 100), max_gpus=1) for i in range(4)),
        weights=ObjectiveWeights(1, 0, migration, 0, 0),
    )


def test_first_pass_stops_a_running_job_for_waiting_jobs_worth_more_per_gpu() -> None:
    # Per GPU, keeping "big" earns (1 + 0.5) / 8 and each small job 1: the four small jobs
    # start and "big" stops (4 - 0.5); placing running jobs first kept "big" alone (1.5 - 0.5).
    p = one_node_held_by_a_running_job(migration=0.5)
    configs = build_config_set(p)
    h = Heuristic(p, configs)
    plan = materialize(p, configs, dict(h.first().choices))
    assert check_plan(p, plan.assignments) == []
    assert plan.assignment("big").state is JobState.QUEUED
    assert {a.job for a in plan.assignments if a.state is JobState.RUNNING} == {
        "s0",
        "s1",
        "s2",
        "s3",
    }
    assert plan.objective.total == pytest.approx(4 - 0.5)
    older = materialize(p, configs, dict(h.greedy(0.0, running_first=True).choices))
    assert older.objective.total == pytest.approx(1.0)


def test_first_pass_keeps_a_running_job_whose_migration_costs_more() -> None:
    # Keeping "big" now earns (1 + 10) / 8 a GPU, more than a small job's 1.
    p = one_node_held_by_a_running_job(migration=10.0)
    configs = build_config_set(p)
    plan = materialize(p, configs, dict(Heuristic(p, configs).first().choices))
    assert plan.assignment("big").state is JobState.RUNNING
    assert not plan.assignment("big").migrated
    assert plan.objective.total == pytest.approx(1.0)


def test_heuristic_fits_more_jobs_than_greedy_by_size() -> None:
    # Each job's best is 8 GPUs, but two 4-GPU jobs are worth more than one 8-GPU job.
    p = problem(
        cluster(node("n0")),
        job("a", point(4, 380), point(8, 400)),
        job("b", point(4, 380), point(8, 400)),
        weights=only_throughput(),
    )
    plan = solve_heuristic(p, build_config_set(p), time.monotonic() + 1)
    assert [a.state for a in plan.assignments] == [JobState.RUNNING, JobState.RUNNING]
    assert plan.objective.throughput == 2 * 380 / 400


def test_heuristic_respects_the_power_budget() -> None:
    p = problem(
        cluster(node("n0"), power=1900.0), job("a", point(8, 800)), weights=only_throughput()
    )
    plan = solve_heuristic(p, build_config_set(p), time.monotonic() + 1)
    assert check_plan(p, plan.assignments) == []
    a = plan.assignment("a")
    assert a.state is JobState.RUNNING and a.config is not None and a.config.sm_clock_mhz < 1410


def two_jobs_under_a_power_budget() -> Problem:
    """Two 4-GPU jobs and 1900 W over idle: one at the top clock (1400 W) leaves no room for
    the other at any clock; both at lower clocks (1100 + 800 W) make 0.95 + 0.85 = 1.8."""
    return problem(
        cluster(node("n0"), power=IDLE + 1900), four("a"), four("b"), weights=only_throughput()
    )


def test_priced_greedy_at_the_dual_prices_trades_clocks_for_a_second_job() -> None:
    p = two_jobs_under_a_power_budget()
    configs = build_config_set(p)
    h = Heuristic(p, configs)
    unpriced = h.greedy(0.0)
    assert set(unpriced.choices) == {"a"}
    dual = dual_prices(p, configs, time_limit=5)
    assert dual.watt > 0
    priced = h.greedy(dual)
    plan = materialize(p, configs, dict(priced.choices))
    assert check_plan(p, plan.assignments) == []
    assert plan.objective.total == pytest.approx(1.8)


def test_heuristic_reaches_the_optimum_under_a_binding_power_budget() -> None:
    p = two_jobs_under_a_power_budget()
    h = Heuristic(p, build_config_set(p))
    plan = h.run(time.monotonic() + 5)
    assert check_plan(p, plan.assignments) == []
    assert plan.objective.total == pytest.approx(1.8)
    assert h.first_plan_at is not None


def test_priced_passes_never_lose_to_the_first_plan() -> None:
    # GPUs, not power, bind: the passes and the local search keep the best plan met.
    p = problem(
        cluster(node("n0")),
        job("a", point(4, 380), point(8, 400)),
        job("b", point(4, 380), point(8, 400)),
        weights=only_throughput(),
    )
    configs = build_config_set(p)
    h = Heuristic(p, configs)
    first = materialize(p, configs, dict(h.greedy(0.0).choices))
    assert h.run(time.monotonic() + 5).objective.total >= first.objective.total - 1e-12


def test_placement_avoids_a_rack_without_power_for_the_job() -> None:
    # Best fit alone picks n0 (4 GPUs, the tightest), but rack r0 has no watts over idle left.
    c = cluster(node("n0", count=4, rack="r0"), node("n1", rack="r1"), rack_power={"r0": 200.0})
    p = problem(c, four("a"), weights=only_throughput())
    configs = build_config_set(p)
    state = SearchState(p)
    fitted = state.fit(p.jobs[0], configs.by_job["a"][0])
    assert fitted == ({"n1": 4}, False)
    plan = solve_heuristic(p, configs, time.monotonic() + 1)
    assert check_plan(p, plan.assignments) == []
    assert plan.assignment("a").placement[0].node == "n1"


def test_fixed_jobs_share_a_tight_rack_budget_at_lower_clocks() -> None:
    # Two non-preemptible jobs on one node: one at its top clock leaves the other no clock
    # within the rack budget, both at lower clocks fit. Every fixed job starts at its lowest
    # draw before any takes a higher clock, so the first plan is valid.
    def fixed(name: str, gpus: tuple[int, ...]) -> Job:
        return job(
            name,
            point(4, 400, watts=1600),
            current=running("A100", {"n0": gpus}),
            preemptible=False,
        )

    draft = problem(cluster(node("n0")), fixed("a", (0, 1, 2, 3)), fixed("b", (4, 5, 6, 7)))
    configs = build_config_set(draft).by_job["a"]
    top = max(configs, key=lambda c: c.watts).watts
    low = min(configs, key=lambda c: c.watts).watts
    assert top > low
    idle = 8 * 50.0
    budget = idle + (top - 200) + (low - 200) - 1.0  # a at its top and b at its lowest: over
    p = problem(
        cluster(node("n0"), rack_power={"r0": budget}),
        fixed("a", (0, 1, 2, 3)),
        fixed("b", (4, 5, 6, 7)),
    )
    plan = Heuristic(p, build_config_set(p)).run(time.monotonic())  # the first pass only
    assert check_plan(p, plan.assignments) == []
    assert all(a.state is JobState.RUNNING for a in plan.assignments)


def test_a_search_that_lowers_the_true_objective_under_drf_returns_the_guide_as_placed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under DRF the search steers by an estimate of F, so its moves can lower the plan's
    true objective; the guide as placed is kept then (here a search that stops every job)."""
    p = two_types_two_tenants()
    configs = build_config_set(p)
    guide = solve_aggregate(p, configs, integer=True, fairness=True)
    h = Heuristic(p, configs, lambda: False)
    assert not h.scorer.exact
    placed = materialize(
        p, configs, dict(h.guided(guide.choice, None, time.monotonic() + 5).choices)
    )
    assert placed.objective.fairness == pytest.approx(1.0)

    def stop_everything(scorer: object, state: SearchState, until: float, stop: object) -> None:
        for name in list(state.choices):
            state.release(name)

    monkeypatch.setattr(heuristic, "local_search", stop_everything)
    plan = Heuristic(p, configs, lambda: False).run_guided(guide.choice, time.monotonic() + 5)
    assert plan.objective.total >= placed.objective.total - 1e-9
    assert check_plan(p, plan.assignments) == []
    assert sum(a.state is JobState.RUNNING for a in plan.assignments) == 8
