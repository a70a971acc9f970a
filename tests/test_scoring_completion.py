"""The completion priority (solver.scoring.completion; docs/objective.md, "Completion
priority"): its ranks, its weight on the wire, and every path choosing the plan it prefers."""

from __future__ import annotations

import dataclasses

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import objective_to_proto, problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.core.settings import SolverSettings
from solver.domain import Allocation, Backend, JobState, ObjectiveWeights, Problem
from solver.perfmodel.configs import best_rates, build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.completion import (
    completion_priorities,
    ranked_for_completion,
    with_completion_priorities,
)
from solver.scoring.evaluation import evaluate_allocations
from solver.scoring.objective import running_gain
from solver.search import quick
from tests.bruteforce import assert_models_meet_the_enumerated_optimum
from tests.factories import (
    cluster,
    job,
    make_request,
    node,
    only_throughput,
    point,
    problem,
    random_tiny,
    solve,
)
from tests.service_helpers import WAIT, serving
from tests.validation_helpers import INF, NAN


def test_ranks_by_remaining_time_at_the_best_pace_halving_per_rank() -> None:
    jobs = [
        job("slow", point(1, 1.0), remaining_samples=100.0),  # 100 s at its best
        job("fast", point(1, 10.0), remaining_samples=500.0),  # 50 s
        job("tie", point(1, 10.0), remaining_samples=500.0),  # 50 s: after "fast" by name
        job("done", point(1, 10.0), remaining_samples=0.0),
        job("cannot", point(1, 10.0), remaining_samples=5.0),  # no pace: no configuration
    ]
    best = {"slow": 1.0, "fast": 10.0, "tie": 10.0, "done": 10.0, "cannot": 0.0}
    pi = completion_priorities(jobs, best)
    assert pi == {"fast": 1.0, "tie": 0.5, "slow": 0.25, "done": 0.0, "cannot": 0.0}


def two_for_one_node(completion: float, backend: Backend = Backend.AUTO) -> Problem:
    """One 8-GPU node; "near" and "far" each run on 4 GPUs at 4 samples/s or on 8 at 7.6.
    Sharing (u = 4 / 7.6 each: 1.053) beats "near" alone (1.0) on throughput; with the
    completion weight at 1, "near" (100 s left at its best, against 1,000) alone is worth
    1 + 1 = 2 against 1.053 + 0.526 + 0.263 = 1.842 shared."""
    points = (point(4, 4.0), point(8, 7.6))
    weights = dataclasses.replace(only_throughput(), completion=completion)
    return problem(
        cluster(node("n0")),
        job("near", *points, min_gpus=4, remaining_samples=760.0),
        job("far", *points, min_gpus=4, remaining_samples=7600.0),
        weights=weights,
        backend=backend,
    )


def running_shapes(p: Problem, backend: Backend) -> dict[str, int]:
    r = solve(dataclasses.replace(p, options=dataclasses.replace(p.options, backend=backend)))
    assert check_plan(p, r.plan.assignments) == []
    return {
        a.job: a.config.num_gpus
        for a in r.plan.assignments
        if a.state is JobState.RUNNING and a.config is not None
    }


@pytest.mark.parametrize(
    "backend", [Backend.HEURISTIC, Backend.AGGREGATE, Backend.HIGHS, Backend.CPSAT, Backend.AUTO]
)
def test_every_path_runs_the_nearest_job_alone_when_the_weight_is_on(backend: Backend) -> None:
    assert running_shapes(two_for_one_node(0.0), backend) == {"near": 4, "far": 4}
    assert running_shapes(two_for_one_node(1.0), backend) == {"near": 8}


def test_the_term_is_in_the_breakdown_and_evaluate_scores_the_plan_alike() -> None:
    p = two_for_one_node(1.0, Backend.HIGHS)
    r = solve(p)
    o = r.plan.objective
    assert o.completion == pytest.approx(1.0)  # "near": weight 1, priority 1, u 1
    assert o.total == pytest.approx(o.throughput + o.completion)
    allocations = {
        a.job: None
        if a.config is None
        else Allocation(a.config.shape, a.config.sm_clock_mhz, a.placement)
        for a in r.plan.assignments
    }
    evaluated = evaluate_allocations(p, allocations)
    assert evaluated.plan is not None
    assert evaluated.plan.objective.total == pytest.approx(o.total, rel=1e-12)
    assert objective_to_proto(o).completion == pytest.approx(1.0)


def test_off_by_default_the_problem_is_left_as_it_is() -> None:
    p = two_for_one_node(0.0)
    assert ranked_for_completion(p) is p
    assert ObjectiveWeights().completion == 0.0


@pytest.mark.parametrize("value", [-1.0, NAN, INF])
def test_a_bad_completion_weight_is_named(value: float) -> None:
    r = make_request()
    r.weights.completion = value
    violations = validate_request(r, Limits())
    assert [v.field for v in violations] == ["weights.completion"]


def test_the_weight_crosses_the_wire_and_the_service_reports_the_term() -> None:
    r = make_request()
    r.weights.completion = 2.0
    assert problem_from_proto(r, Limits()).weights.completion == 2.0
    with serving() as (_, stub):
        response = stub.Solve(r, timeout=WAIT)
    assert response.plan.objective.completion > 0.0
    assert response.stats.termination != pb.TERMINATION_UNSPECIFIED


@pytest.mark.parametrize("seed", range(6))
def test_the_models_and_bounds_agree_with_enumeration_with_the_priority_on(seed: int) -> None:
    p = random_tiny(seed)
    p = dataclasses.replace(p, weights=dataclasses.replace(p.weights, completion=2.0))
    configs = build_config_set(p)
    assert best_rates(p) == dict(configs.best_samples_per_second)
    p = with_completion_priorities(p, configs.best_samples_per_second)
    assert max(j.completion_priority for j in p.jobs) == 1.0  # ranked: the term is in play
    optimum = assert_models_meet_the_enumerated_optimum(p, configs)
    if optimum == float("-inf"):
        return
    result = solve(p)
    assert result.plan.objective.total == pytest.approx(optimum, abs=1e-6)


def test_the_quick_plans_gain_counts_the_priority() -> None:
    defaults = SolverSettings()
    for seed in range(6):
        p = random_tiny(seed)
        p = dataclasses.replace(p, weights=dataclasses.replace(p.weights, completion=2.0))
        p = ranked_for_completion(p)
        q = quick._Quick(
            p, float("inf"), None, defaults.quick_chunk_jobs, defaults.quick_check_every
        )
        q.rows.load(p.jobs)
        assert {j.name: q.rows.best(j) for j in p.jobs} == best_rates(p)
        for j in p.jobs:
            for row in q.rows.of(j):
                expected = running_gain(j, q.config(j, row), q.rows.best(j), p.weights, q.max_watts)
                assert q.row_gain(j, row) == pytest.approx(expected, abs=1e-12)
