"""Tenant quotas (solver.perfmodel.quotas and the checker's check_queue_quotas): Kueue's
nominal, borrowing and lending limits, honoured by every plan the solver returns."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest

from solver.domain import (
    POWER,
    Backend,
    Cluster,
    Config,
    JobAssignment,
    JobState,
    Problem,
    Quota,
    TenantQueue,
)
from solver.perfmodel.configs import build_config_set
from solver.perfmodel.quotas import (
    QUOTA_BOUND,
    QuotaLedger,
    borrowed_jobs,
    queue_usage,
    residual_queues,
)
from solver.scoring.checker import PlanView, check_plan, check_queue_quotas
from tests.factories import cluster, job, node, point, problem, solve


def queues(c: Cluster, *qs: TenantQueue) -> Cluster:
    return dataclasses.replace(c, queues=qs)


def tenant_job(name: str, tenant: str, gpus: int = 4, sps: float = 100.0, weight: float = 1.0):  # type: ignore[no-untyped-def]
    return dataclasses.replace(job(name, point(gpus, sps), weight=weight), tenant=tenant)


def gpu_quota(nominal: float, borrowing: float | None = None, lending: float | None = None):  # type: ignore[no-untyped-def]
    return {"A100": Quota(nominal, borrowing, lending)}


def a_config(p: Problem, name: str) -> Config:
    return build_config_set(p).by_job[name][0]


def running_plan(p: Problem, names: list[str]) -> list[JobAssignment]:
    """Each named job running in its first configuration, on GPUs packed node after node."""
    configs = build_config_set(p)
    free = {n.name: list(n.available_gpu_indices) for n in p.cluster.nodes}
    out = []
    from solver.domain import GpuSlice

    for j in p.jobs:
        if j.name not in names:
            out.append(JobAssignment(j.name, JobState.QUEUED))
            continue
        c = configs.by_job[j.name][0]
        node_name = next(n for n, g in free.items() if len(g) >= c.num_gpus)
        gpus, free[node_name] = free[node_name][: c.num_gpus], free[node_name][c.num_gpus :]
        out.append(JobAssignment(j.name, JobState.RUNNING, c, (GpuSlice(node_name, tuple(gpus)),)))
    return out


def violations(p: Problem, plan: list[JobAssignment]) -> list[str]:
    return [v.message for v in check_queue_quotas(PlanView(p, plan))]


# ---------------------------------------------------------------- the rule, one case each


def test_a_queue_without_cohort_stays_within_nominal() -> None:
    c = queues(cluster(node("n0"), node("n1")), TenantQueue("a", quotas=gpu_quota(8)))
    p = problem(c, tenant_job("j1", "a"), tenant_job("j2", "a"), tenant_job("j3", "a"))
    assert violations(p, running_plan(p, ["j1", "j2"])) == []
    [message] = violations(p, running_plan(p, ["j1", "j2", "j3"]))
    assert "queue a uses 12 of A100 over its limit 8" in message


def test_a_gpu_type_without_quota_has_none_and_watts_without_quota_are_free() -> None:
    c = queues(cluster(node("n0")), TenantQueue("a", quotas={POWER: Quota(1e9)}))
    p = problem(c, tenant_job("j1", "a"))
    [message] = violations(p, running_plan(p, ["j1"]))
    assert "of A100 over its limit 0" in message
    c = queues(cluster(node("n0")), TenantQueue("a", quotas=gpu_quota(8)))
    p = problem(c, tenant_job("j1", "a"))
    assert violations(p, running_plan(p, ["j1"])) == []


def test_a_power_quota_counts_the_jobs_draw() -> None:
    c = queues(cluster(node("n0")), TenantQueue("a", quotas={**gpu_quota(8), POWER: Quota(1500)}))
    p = problem(c, tenant_job("j1", "a"), tenant_job("j2", "a"))  # 4 GPUs at 300 W each
    assert violations(p, running_plan(p, ["j1"])) == []
    [message] = violations(p, running_plan(p, ["j1", "j2"]))
    assert "uses 2400 of power over its limit 1500" in message


def test_a_cohort_lends_idle_quota_within_the_borrowing_limit() -> None:
    a = TenantQueue("a", cohort="c", quotas=gpu_quota(4, borrowing=4))
    b = TenantQueue("b", cohort="c", quotas=gpu_quota(8))
    c = queues(cluster(node("n0"), node("n1")), a, b)
    p = problem(c, *(tenant_job(f"a{k}", "a") for k in range(3)), tenant_job("b0", "b"))
    assert violations(p, running_plan(p, ["a0", "a1"])) == []  # a borrows 4 of b's idle 8
    over_limit = violations(p, running_plan(p, ["a0", "a1", "a2"]))
    assert any("queue a uses 12 of A100 over its limit 8" in m for m in over_limit)
    # b takes its own back: together over the cohort's 12
    cohort = violations(p, running_plan(p, ["a0", "a1", "b0"]))
    assert cohort == []  # 8 + 4 = 12: exactly the cohort's quota
    p2 = problem(c, *(tenant_job(f"a{k}", "a") for k in range(2)), tenant_job("b0", "b", 8))
    [message] = violations(p2, running_plan(p2, ["a0", "a1", "b0"]))
    assert "cohort c takes 16 of A100" in message and "quota 12" in message


def test_a_lending_limit_keeps_part_of_nominal_from_the_cohort() -> None:
    a = TenantQueue("a", cohort="c", quotas=gpu_quota(4))
    b = TenantQueue("b", cohort="c", quotas=gpu_quota(8, lending=4))  # keeps 4 unlent
    c = queues(cluster(node("n0"), node("n1")), a, b)
    p = problem(c, *(tenant_job(f"a{k}", "a") for k in range(3)))
    assert violations(p, running_plan(p, ["a0", "a1"])) == []  # 8 = 4 own + 4 lent by b
    [message] = violations(p, running_plan(p, ["a0", "a1", "a2"]))
    assert "cohort c" in message


def test_jobs_without_a_declared_queue_are_not_limited() -> None:
    c = queues(cluster(node("n0")), TenantQueue("a", quotas=gpu_quota(0)))
    p = problem(c, tenant_job("j1", ""), tenant_job("j2", "other"))
    assert violations(p, running_plan(p, ["j1", "j2"])) == []
    c = queues(cluster(node("n0")), TenantQueue("default", quotas=gpu_quota(4)))
    p = problem(c, tenant_job("j1", ""), tenant_job("j2", ""))
    assert len(violations(p, running_plan(p, ["j1", "j2"]))) == 1  # the declared default


# ------------------------------------------------------- the ledger agrees with the checker


@pytest.mark.parametrize("seed", range(20))
def test_the_ledger_admits_exactly_what_the_checker_accepts(seed: int) -> None:
    """Jobs taken one by one while the ledger says they fit give a plan the checker accepts;
    and a job the ledger refuses would have made the checker complain."""
    rng = random.Random(seed)
    qs = []
    for name in ("a", "b", "c"):
        cohort = rng.choice(["", "x", "x"])
        nominal = rng.choice([0, 4, 8, 12])
        borrowing = rng.choice([None, 0, 4]) if cohort else None
        lending = rng.choice([None, 0, 4]) if cohort else None
        qs.append(TenantQueue(name, cohort, quotas=gpu_quota(nominal, borrowing, lending)))
    c = queues(cluster(*(node(f"n{k}") for k in range(4))), *qs)
    jobs = [tenant_job(f"j{k}", rng.choice("abc"), rng.choice([2, 4, 8])) for k in range(10)]
    p = problem(c, *jobs)
    ledger = QuotaLedger(c)
    taken: list[str] = []
    for j in jobs:
        cfg = a_config(p, j.name)
        plan = running_plan(p, [*taken, j.name])
        fits_checker = violations(p, plan) == []
        assert ledger.fits(j, cfg) == fits_checker, (j.name, taken)
        if fits_checker:
            ledger.take(j, cfg)
            taken.append(j.name)
    for name in taken[::2]:
        j = next(x for x in jobs if x.name == name)
        ledger.release(j, a_config(p, name))
    left = [n for n in taken if n not in taken[::2]]
    for j in jobs:
        if j.name in left:
            continue
        plan = running_plan(p, [*left, j.name])
        assert ledger.fits(j, a_config(p, j.name)) == (violations(p, plan) == [])


# ---------------------------------------------------------------- plans out


def test_usage_and_borrowed_jobs_follow_admission_order() -> None:
    a = TenantQueue("a", cohort="c", quotas=gpu_quota(4))
    b = TenantQueue("b", cohort="c", quotas=gpu_quota(8))
    c = queues(cluster(node("n0"), node("n1")), a, b)
    p = problem(c, tenant_job("a0", "a", weight=2.0), tenant_job("a1", "a"), tenant_job("a2", "a"))
    plan = running_plan(p, ["a0", "a1"])
    assert borrowed_jobs(c, p.jobs, plan) == {"a1"}  # a0 first: the higher weight
    usage = queue_usage(c, p.jobs, plan)
    [gpus] = [u for u in usage["a"] if u.resource == "A100"]
    assert (gpus.used, gpus.nominal, gpus.borrowed) == (8.0, 4.0, 4.0)
    assert [u.used for u in usage["b"]] == [0.0]


@pytest.mark.parametrize("backend", [Backend.HEURISTIC, Backend.AUTO, Backend.CPSAT])
def test_every_backend_keeps_the_quotas(backend: Backend) -> None:
    """Three tenants want the whole cluster; their quotas (one borrowing in a cohort) bound
    what each gets, and the plan is checked."""
    a = TenantQueue("a", quotas=gpu_quota(8))
    b = TenantQueue("b", cohort="c", quotas=gpu_quota(4, borrowing=4))
    d = TenantQueue("d", cohort="c", quotas=gpu_quota(4))
    c = queues(cluster(*(node(f"n{k}") for k in range(3))), a, b, d)
    jobs = [
        tenant_job(f"{t}{k}", t, 4, sps)
        for t, sps in (("a", 300.0), ("b", 200.0), ("d", 100.0))
        for k in range(4)
    ]
    p = problem(c, *jobs, backend=backend, budget=5.0)
    r = solve(p)
    assert check_plan(p, r.plan.assignments) == []
    usage = {
        q: {u.resource: u.used for u in us}
        for q, us in queue_usage(c, p.jobs, r.plan.assignments).items()
    }
    assert usage["a"]["A100"] == 8
    assert usage["b"]["A100"] + usage["d"]["A100"] <= 8
    assert usage["b"]["A100"] == 8  # b's jobs are worth more: it borrows d's idle quota
    assert sum(u for q in usage.values() for r_, u in q.items() if r_ == "A100") == 16


def test_pairs_of_queues_in_a_cohort_never_exceed_it_under_search() -> None:
    """The heuristic's moves keep the cohort rule: many small jobs of two queues."""
    a = TenantQueue("a", cohort="c", quotas=gpu_quota(6, borrowing=10))
    b = TenantQueue("b", cohort="c", quotas=gpu_quota(6, lending=2))
    c = queues(cluster(*(node(f"n{k}") for k in range(3))), a, b)
    jobs = [
        tenant_job(f"{t}{g}-{k}", t, g, 50.0 * g)
        for t, g, k in itertools.product("ab", (1, 2), range(5))
    ]
    p = problem(c, *jobs, backend=Backend.HEURISTIC)
    r = solve(p)
    assert check_plan(p, r.plan.assignments) == []
    usage = {
        q: {u.resource: u.used for u in us}
        for q, us in queue_usage(c, p.jobs, r.plan.assignments).items()
    }
    assert usage["a"]["A100"] + max(usage["b"]["A100"], 4) <= 12


def test_a_decomposed_solve_keeps_the_quotas() -> None:
    """Parts get each quota in proportion to their share of its resource: the merged plan
    keeps the whole."""
    a = TenantQueue("a", cohort="c", quotas=gpu_quota(8, borrowing=4))
    b = TenantQueue("b", cohort="c", quotas=gpu_quota(8))
    nodes = [node(f"n{k}", rack=f"r{k % 4}") for k in range(8)]
    c = queues(cluster(*nodes), a, b)
    jobs = [
        tenant_job(f"{t}{k}", t, 2, sps)
        for t, sps in (("a", 300.0), ("b", 100.0))
        for k in range(12)
    ]
    p = problem(c, *jobs, backend=Backend.DECOMPOSED, budget=10.0)
    r = solve(p)
    assert check_plan(p, r.plan.assignments) == []
    usage = {
        q: {u.resource: u.used for u in us}
        for q, us in queue_usage(c, p.jobs, r.plan.assignments).items()
    }
    assert 0 < usage["a"]["A100"] <= 12
    assert usage["a"]["A100"] + usage["b"]["A100"] <= 16


@pytest.mark.parametrize("seed", range(20))
def test_the_residual_quotas_judge_the_rest_as_the_whole_does(seed: int) -> None:
    """An LNS neighbourhood's queues (residual_queues): the free jobs keep them exactly when
    the whole plan keeps the snapshot's."""
    rng = random.Random(seed)
    qs = []
    for name in ("a", "b", "c"):
        cohort = rng.choice(["", "x", "x"])
        quota = gpu_quota(
            rng.choice([0, 4, 8, 12]),
            rng.choice([None, 0, 4]) if cohort else None,
            rng.choice([None, 0, 4]) if cohort else None,
        )
        qs.append(TenantQueue(name, cohort, quotas=quota))
    c = queues(cluster(*(node(f"n{k}") for k in range(12))), *qs)
    jobs = [tenant_job(f"j{k}", rng.choice("abc"), rng.choice([2, 4, 8])) for k in range(10)]
    p = problem(c, *jobs)
    running = [j.name for j in jobs if rng.random() < 0.6]
    fixed = [n for n in running if rng.random() < 0.5]
    rest = [n for n in running if n not in fixed]
    whole_ok = violations(p, running_plan(p, running)) == []
    by_name = {j.name: j for j in jobs}
    left = residual_queues(c, [(by_name[n], a_config(p, n)) for n in fixed])
    sub = problem(queues(c, *left), *jobs)
    assert (violations(sub, running_plan(sub, rest)) == []) == whole_ok


def test_a_job_waiting_for_its_queues_quota_says_so() -> None:
    """Three 8-GPU A100 nodes; queue a may use 8 GPUs: of its two 8-GPU jobs one runs, the
    other waits for the quota though a node is free (said so); b's job, unlimited, runs. With
    a's quota at 16 all three run."""
    c = queues(cluster(node("n0"), node("n1"), node("n2")), TenantQueue("a", quotas=gpu_quota(8)))
    jobs = [tenant_job(f"a{k}", "a", gpus=8) for k in (1, 2)]
    p = problem(c, *jobs, tenant_job("b1", "", gpus=8))
    plan = solve(p).plan.assignments
    waiting = [a for a in plan if a.state is JobState.QUEUED]
    assert [a.job for a in waiting] in (["a1"], ["a2"])
    assert waiting[0].queue_detail == QUOTA_BOUND
    roomy = queues(c, TenantQueue("a", quotas=gpu_quota(16)))
    states = {a.job: a.state for a in solve(dataclasses.replace(p, cluster=roomy)).plan.assignments}
    assert set(states.values()) == {JobState.RUNNING}
