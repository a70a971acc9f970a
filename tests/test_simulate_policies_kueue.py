"""The kueue baseline on hand-made rounds: StrictFIFO within a queue's quota, borrowing from
the cohort, reclaiming by preemption in fair-sharing order, and a run within every quota."""

from __future__ import annotations

import pytest

from solver.simulate.metrics import summarize
from solver.simulate.policies.common import Planner, RoundView
from solver.simulate.policies.fifo import FifoPolicy
from solver.simulate.policies.kueue import KueuePolicy, Shares
from tests.simulate_tenant_helpers import (
    gpus_held,
    job,
    queue,
    round_input,
    simulate,
    starts,
    tenant_cluster,
    waiting,
)


def test_a_queue_admits_in_fifo_order_within_its_quota_and_its_head_blocks_it() -> None:
    cluster = tenant_cluster(2, queue("a", 2), queue("b", 1))
    jobs = [
        waiting("a1", "a", 0), waiting("a2", "a", 1, gpus=2), waiting("a3", "a", 2),
        waiting("b1", "b", 3),
    ]  # fmt: skip
    r = round_input(cluster, jobs)
    # a2 would take a to 3 GPUs of its 2: StrictFIFO keeps a3 behind it; b is not blocked.
    assert gpus_held(KueuePolicy().decide(r)) == {"a1": 1, "b1": 1}
    # fifo instead lets a3 pass the job its queue's quota keeps out
    assert gpus_held(FifoPolicy().decide(r)) == {"a1": 1, "a3": 1, "b1": 1}


def test_a_queue_borrows_its_cohorts_idle_quota_up_to_the_borrowing_limit() -> None:
    cohort = (queue("a", 1, cohort="c", borrowing=1), queue("b", 3, cohort="c"))
    r = round_input(tenant_cluster(2, *cohort), [waiting("a1", "a", 0, gpus=2)])
    assert gpus_held(KueuePolicy().decide(r)) == {"a1": 2}
    r = round_input(tenant_cluster(2, *cohort), [waiting("a1", "a", 0, gpus=4)])
    assert gpus_held(KueuePolicy().decide(r)) == {}  # 4 > nominal 1 + borrowing limit 1


def test_a_queue_under_its_nominal_quota_reclaims_from_the_borrower() -> None:
    cluster = tenant_cluster(2, queue("a", 2, cohort="c"), queue("b", 2, cohort="c"))
    jobs = [
        waiting("a1", "a", 0), waiting("a2", "a", 1), waiting("a3", "a", 2),
        waiting("b1", "b", 3, gpus=2),
    ]  # fmt: skip
    current = {"a1": ("n0", [0]), "a2": ("n0", [1]), "a3": ("n1", [0])}
    d = KueuePolicy().decide(round_input(cluster, jobs, current))
    # a borrows one GPU of b's quota; b1 (within b's nominal 2) preempts a's newest job.
    assert gpus_held(d) == {"a1": 1, "a2": 1, "b1": 2}
    assert "preempted to reclaim quota: a3" in d.detail


def test_preemption_takes_from_the_queue_with_the_highest_weighted_share() -> None:
    queues = (
        queue("a", 1, cohort="c", weight=1),
        queue("b", 1, cohort="c", weight=2),
        queue("c", 2, cohort="c"),
    )
    cluster = tenant_cluster(2, *queues)
    jobs = [
        waiting("a1", "a", 0), waiting("a2", "a", 1), waiting("b1", "b", 2),
        waiting("b2", "b", 3), waiting("c1", "c", 4),
    ]  # fmt: skip
    current = {"a1": ("n0", [0]), "a2": ("n0", [1]), "b1": ("n1", [0]), "b2": ("n1", [1])}
    r = round_input(cluster, jobs, current)
    view = RoundView.of(r)
    planner = Planner(view)
    for name in ("a1", "a2", "b1", "b2"):
        j = next(x for x in view.problem.jobs if x.name == name)
        assert j.current is not None
        cfg = view.config(j, j.current.shape, 1000)
        assert cfg is not None
        planner.quotas.take(j, cfg)
    shares = Shares(view)
    by = {q.name: q for q in view.cluster.queues}
    # each borrows 1 GPU of the 4 the cohort lends; b's weight 2 halves its share
    assert shares.share(planner.quotas, by["a"]) == pytest.approx(0.25)
    assert shares.share(planner.quotas, by["b"]) == pytest.approx(0.125)
    assert shares.share(planner.quotas, by["c"]) == 0.0
    d = KueuePolicy().decide(r)
    assert gpus_held(d) == {"a1": 1, "b1": 1, "b2": 1, "c1": 1}


def test_a_kueue_run_keeps_every_quota_and_reclaims_when_the_lender_needs_it() -> None:
    cluster = tenant_cluster(2, queue("a", 2, cohort="c"), queue("b", 2, cohort="c"))
    jobs = [job("a1", "a", 0, 300, gpus=4), job("b1", "b", 100, 100, gpus=2)]
    log = simulate(cluster, jobs, KueuePolicy())
    got = starts(log)
    # a1 borrows all of b's quota; b1 arrives at 100 and reclaims: a1 is preempted (it
    # cannot shrink) and starts again once b1 is done, paying the 30 s restart.
    assert got["b1"] == (100.0, 200.0)
    a1 = next(j for j in log.jobs if j.job_id == "a1")
    assert a1.preemptions == 1 and a1.finish_s is not None and a1.finish_s > 300.0


def test_per_tenant_outputs_of_a_tiny_kueue_run() -> None:
    cluster = tenant_cluster(2, queue("a", 2, cohort="c"), queue("b", 2, cohort="c"))
    jobs = [job("a1", "a", 0, 100, 2), job("a2", "a", 0, 100, 2), job("b1", "b", 50, 100, 2)]
    log = simulate(cluster, jobs, KueuePolicy())
    # a2 borrows b's idle quota at 0; b1 reclaims it at 50 (a2 has done half its 2,000
    # samples); a1 ends at 100, a2 starts again then, restarts for 30 s and ends at 180.
    assert starts(log) == {"a1": (0.0, 100.0), "a2": (0.0, 180.0), "b1": (50.0, 150.0)}
    tenants = summarize(log).tenants
    a, b = tenants["a"], tenants["b"]
    assert a.jct_mean_s == 140.0 and a.rho_max == pytest.approx(1.8)
    assert a.gpu_hours == pytest.approx(460 / 3600)  # a1 200, a2 50 x 2 + 80 x 2 GPU-s
    assert a.borrowed_gpu_hours == pytest.approx(100 / 3600)  # a2 over [0, 50)
    assert a.entitled_gpu_hours == pytest.approx(2 * 180 / 3600)
    assert a.entitlement_share == pytest.approx(460 / 360)
    # b1's equal share at 50 is 4 GPUs over 3 jobs (2/3 of the time on 2 GPUs): rate 1.5,
    # then 1 from 100 when two jobs remain.
    assert b.normalized_hours == pytest.approx((50 * 1.5 + 50 * 1.0) / 3600)
    assert b.gpu_hours == pytest.approx(200 / 3600) and b.borrowed_gpu_hours == 0.0
    assert b.entitlement_share == pytest.approx(1.0)
