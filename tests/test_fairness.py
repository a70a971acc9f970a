"""The fairness term (solver.scoring.fairness, solver.exact.fairness): F as documented, the
exact backends' optimum equal to exhaustive enumeration in every mode and scope, every bound
proven, and what each mode prefers on hand-built cases."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from solver.domain import (
    AttainedService,
    Backend,
    Fairness,
    FairnessMode,
    FairnessScope,
    Problem,
    Quota,
    TenantQueue,
)
from solver.exact import formulation
from solver.exact.backends import SolverStatus
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.fairness import FairnessTerms, fairness_headroom
from solver.search.bound import solve_aggregate
from tests.bruteforce import optimum_of, solve_exact
from tests.factories import A100, V100, cluster, job, node, point, problem, running, solve
from tests.fairness_cases import fair, two_types_two_tenants
from tests.reference_fairness import reference_value

MODES = [
    FairnessMode.MAX_MIN,
    FairnessMode.PROPORTIONAL,
    FairnessMode.DRF,
    FairnessMode.FINISH_TIME,
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scope", list(FairnessScope))
def test_f_is_the_documented_formula_on_every_combination_of_configurations(
    mode: FairnessMode, scope: FairnessScope
) -> None:
    for seed in range(3):
        p, configs = fair(seed, mode, scope)
        best = configs.best_samples_per_second
        terms = FairnessTerms(p, best)
        options = [[None, *configs.by_job[j.name][:4]] for j in p.jobs]
        for combo in itertools.product(*options):
            run = {j.name: c for j, c in zip(p.jobs, combo, strict=True) if c is not None}
            assert terms.value(run) == pytest.approx(reference_value(p, best, run), rel=1e-9)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scope", list(FairnessScope))
@pytest.mark.parametrize("backend", [Backend.CPSAT, Backend.HIGHS])
def test_the_exact_optimum_is_the_enumerated_one_and_every_bound_holds(
    mode: FairnessMode, scope: FairnessScope, backend: Backend
) -> None:
    for seed in range(3):
        p, configs, best = optimum_of(fair, seed, mode, scope)
        r = solve_exact(backend, formulation.build(p, configs))
        assert r.status is SolverStatus.OPTIMAL and r.plan is not None
        assert check_plan(p, r.plan.assignments) == []
        assert r.plan.objective.total == pytest.approx(best, abs=1e-6)
        assert r.best_bound is not None and r.best_bound >= best - 1e-9
        # the model's rounding and tangents overrate by little
        assert r.best_bound - best <= 1e-2 * max(abs(best), 1.0)
        # the aggregated LP bounds the objective without F; the headroom bounds weight x F
        lp = solve_aggregate(p, configs)
        head = fairness_headroom(p, configs.by_job, configs.best_samples_per_second)
        assert lp.best_bound is not None and lp.best_bound + head >= best - 1e-9


def _two_jobs_one_gpu(mode: FairnessMode, **a: AttainedService) -> Problem:
    """Two identical one-GPU jobs, one GPU free: only one of them can run."""
    c = cluster(node("n0", count=1))
    jobs = [
        job(name, point(1, 100.0), attained=a.get(name, AttainedService()), remaining_samples=1e5)
        for name in ("x", "y")
    ]
    return dataclasses.replace(problem(c, *jobs), fairness=Fairness(mode))


@pytest.mark.parametrize("mode", [FairnessMode.MAX_MIN, FairnessMode.PROPORTIONAL])
def test_the_job_with_less_attained_service_runs(mode: FairnessMode) -> None:
    for behind in ("x", "y"):
        served = AttainedService(gpu_seconds=3600.0, normalized_seconds=1800.0)
        ahead = "y" if behind == "x" else "x"
        p = _two_jobs_one_gpu(mode, **{ahead: served})
        configs = build_config_set(p)
        r = solve_exact(Backend.CPSAT, formulation.build(p, configs))
        assert r.plan is not None
        running = [a.job for a in r.plan.assignments if a.config is not None]
        assert running == [behind]


def test_weighted_sum_is_indifferent_to_attained_service() -> None:
    """Without a fairness mode the same snapshot is a tie: F is 0 and not in the objective."""
    p = _two_jobs_one_gpu(FairnessMode.WEIGHTED_SUM, x=AttainedService(3600.0, 1800.0))
    r = solve_exact(Backend.CPSAT, formulation.build(p, build_config_set(p)))
    assert r.plan is not None and r.plan.objective.fairness == 0.0


def test_finish_time_fairness_runs_the_job_that_has_waited_longest() -> None:
    p = _two_jobs_one_gpu(FairnessMode.FINISH_TIME)
    p = dataclasses.replace(p, jobs=(dataclasses.replace(p.jobs[0], age_seconds=7200.0), p.jobs[1]))
    r = solve_exact(Backend.HIGHS, formulation.build(p, build_config_set(p)))
    assert r.plan is not None
    assert [a.job for a in r.plan.assignments if a.config is not None] == ["x"]
    assert r.plan.objective.fairness < 0  # minus the largest rho


def test_a_mean_weight_lifts_the_entity_above_one_that_cannot_be_helped() -> None:
    """Finish-time fairness by job: `blocked` (its queue has no quota) has the largest rho
    whatever the plan, so the least row alone leaves the choice to throughput (x, weight 2);
    with a mean weight, the short job y, whose rho grows fastest while it waits, runs."""
    c = dataclasses.replace(
        cluster(node("n0", count=1)), queues=(TenantQueue("blocked", cohort=""),)
    )
    b = job("b", point(1, 100.0), age_seconds=1e6, remaining_samples=1e5)
    b = dataclasses.replace(b, tenant="blocked")
    x = job("x", point(1, 100.0), weight=2.0, remaining_samples=1e5)
    y = job("y", point(1, 100.0), remaining_samples=2e3)
    running = {}
    for mean in (0.0, 3.0):
        p = dataclasses.replace(
            problem(c, b, x, y), fairness=Fairness(FairnessMode.FINISH_TIME, mean_weight=mean)
        )
        configs = build_config_set(p)
        for backend in (Backend.CPSAT, Backend.HIGHS):
            r = solve_exact(backend, formulation.build(p, configs))
            assert r.plan is not None and check_plan(p, r.plan.assignments) == []
            running[mean, backend] = [a.job for a in r.plan.assignments if a.config is not None]
            value = FairnessTerms(p, configs.best_samples_per_second).value(
                {a.job: a.config for a in r.plan.assignments if a.config is not None}
            )
            assert r.plan.objective.fairness == pytest.approx(p.weights.fairness * value)
    assert running[0.0, Backend.CPSAT] == running[0.0, Backend.HIGHS] == ["x"]
    assert running[3.0, Backend.CPSAT] == running[3.0, Backend.HIGHS] == ["y"]


def test_drf_gives_each_tenant_its_weighted_share_now_whatever_it_had() -> None:
    """Three GPUs, tenants a (weight 2) and b (weight 1) with three one-GPU jobs each: a gets
    two GPUs and b one, though b has had far more service (DRF is memoryless); F is 1, each
    tenant at its fair share."""
    quota = {A100.name: Quota(3.0)}
    served = AttainedService(gpu_seconds=1e6, normalized_seconds=1e6)
    queues = (
        TenantQueue("a", weight=2.0, quotas=quota),
        TenantQueue("b", weight=1.0, quotas=quota, attained=served),
    )
    c = dataclasses.replace(cluster(node("n0", count=3)), queues=queues)
    jobs = [
        dataclasses.replace(job(f"{t}{k}", point(1, 100.0), max_gpus=1), tenant=t)
        for t in "ab"
        for k in range(3)
    ]
    p = dataclasses.replace(
        problem(c, *jobs), fairness=Fairness(FairnessMode.DRF, FairnessScope.TENANT)
    )
    configs = build_config_set(p)
    for backend in (Backend.CPSAT, Backend.HIGHS):
        r = solve_exact(backend, formulation.build(p, configs))
        assert r.plan is not None and check_plan(p, r.plan.assignments) == []
        running = sorted(a.job[0] for a in r.plan.assignments if a.config is not None)
        assert running == ["a", "a", "b"], backend
        assert r.plan.objective.fairness == pytest.approx(p.weights.fairness * 1.0)


def test_drf_counts_a_tenant_spread_over_gpu_types_at_its_largest_share_not_their_sum() -> None:
    """Four A100s, four V100s. Tenant x (two jobs per type, each fitting one type) is entitled
    to half the cluster's dominant share: two GPUs of one type. Its heavier jobs, one per type,
    would hold one GPU of each, a dominant share of 1/4 (their shares' sum, 1/2, is not DRF's
    dominant share); DRF runs two of x's jobs on one type instead, and F is 1."""
    p = two_types_two_tenants()
    configs = build_config_set(p)
    terms = FairnessTerms(p, configs.best_samples_per_second)
    top = {j.name: max(configs.by_job[j.name], key=lambda c: c.sm_clock_mhz) for j in p.jobs}
    spread = {n: top[n] for n in ("xa1", "xv1", "y0", "y1", "y2", "y3", "y4", "y5")}
    assert terms.value(spread) == pytest.approx(0.5)  # x: 1/4 of A100s over its 1/2
    for backend in (Backend.CPSAT, Backend.HIGHS):
        r = solve_exact(backend, formulation.build(p, configs))
        assert r.plan is not None and check_plan(p, r.plan.assignments) == []
        ran = {a.job: a.config for a in r.plan.assignments if a.config is not None}
        x_types = [ran[n].gpu_type for n in ran if n.startswith("x")]
        assert len(x_types) == 2 and len(set(x_types)) == 1, (backend, x_types)
        assert r.plan.objective.fairness == pytest.approx(1.0)  # F, before its weight
        assert r.best_bound is not None and r.best_bound >= r.plan.objective.total - 1e-9


def _spread_tenant() -> Problem:
    """Four A100s, four V100s. Tenant x runs xa on two A100s and xv on one V100 and has xq
    queued (one GPU of either type, faster on a V100); its jobs may take six GPUs, so with
    tenant y's two one-GPU jobs its fair share is 3/4: three GPUs of one type."""
    c = cluster(node("a", count=4), node("v", V100, count=4))
    both = (point(1, 100.0), point(1, 120.0, gpu=V100))
    x = [
        job("xa", point(2, 150.0), max_gpus=2, current=running("A100", {"a": (0, 1)})),
        job("xv", point(1, 100.0, gpu=V100), max_gpus=2, current=running("V100", {"v": (0,)})),
        job("xq", *both, max_gpus=2),
    ]
    y = [job(f"y{k}", *both, max_gpus=1) for k in range(2)]
    p = problem(
        c, *(dataclasses.replace(j, tenant="x") for j in x),
        *(dataclasses.replace(j, tenant="y") for j in y),
    )  # fmt: skip
    return dataclasses.replace(p, fairness=Fairness(FairnessMode.DRF, FairnessScope.TENANT))


def test_drf_search_counts_what_a_configuration_adds_to_the_tenants_largest_share() -> None:
    p = _spread_tenant()
    configs = build_config_set(p)
    terms = FairnessTerms(p, configs.best_samples_per_second)
    scale = terms.drf_scale("x")
    assert scale == pytest.approx(4 / 3)

    def gain(name: str, gpu_type: str) -> float:
        by_type = {c.gpu_type: c for c in configs.by_job[name]}
        return terms.term(next(j for j in p.jobs if j.name == name), by_type[gpu_type])

    # x holds 2/4 of the A100s and 1/4 of the V100s: one more A100 lifts its largest share by
    # 1/4, one more V100 (2/4 then) not at all; the sum of dominant shares counted both.
    assert gain("xq", "A100") == pytest.approx(scale / 4)
    assert gain("xq", "V100") == 0.0
    # xv's own V100 adds nothing to x's largest share (2/4 of the A100s without it).
    assert gain("xv", "V100") == 0.0
    # nothing of y runs: each configuration counts its own dominant share.
    assert gain("y0", "V100") == pytest.approx(terms.drf_scale("y") / 4)


def test_drf_search_runs_the_queued_job_where_it_lifts_the_tenants_share() -> None:
    p = _spread_tenant()
    p = dataclasses.replace(p, weights=dataclasses.replace(p.weights, fairness=20.0))
    for backend in (Backend.HEURISTIC, Backend.AUTO):
        r = solve(dataclasses.replace(p, options=dataclasses.replace(p.options, backend=backend)))
        assert check_plan(p, r.plan.assignments) == []
        ran = {a.job: a.config for a in r.plan.assignments if a.config is not None}
        assert ran["xq"].gpu_type == "A100", backend  # x: three A100s, not two of each
        assert r.plan.objective.fairness == pytest.approx(1.0), backend


def test_drf_search_weighs_tenants_by_how_close_they_are_to_the_least_share() -> None:
    """As in the other least-row modes: x already holds 2/3 of its fair share (two of the four
    A100s over its 3/4), y nothing. y's configurations count in full, x's by exp(-2/3 over a
    typical term), so the search lifts the least tenant first and does not trade throughput
    for a tenant that is not the least."""
    p = _spread_tenant()
    configs = build_config_set(p)
    terms = FairnessTerms(p, configs.best_samples_per_second)
    estimate = terms.surrogates(configs.by_job)
    by_name = {j.name: j for j in p.jobs}

    def ratio(name: str) -> float:
        c = configs.by_job[name][0]
        assert terms.term(by_name[name], c) > 0
        return estimate[name][0] / (p.weights.fairness * terms.term(by_name[name], c))

    assert ratio("y0") == pytest.approx(1.0)
    assert ratio("xq") == pytest.approx(ratio("xa"))
    assert 0.0 < ratio("xq") < 0.2
