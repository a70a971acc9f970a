"""Tenants in the simulation: the queues and attained service each round's request carries,
quota violations rejected, every baseline's admission within its queue's quota, the trace's
tenants checked against the cluster's queues."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.pipeline import to_problem
from solver.domain import Allocation, GpuSlice, Shape
from solver.simulate.core import Decision, SimulationError, TraceJob
from solver.simulate.policies import make_policy
from solver.simulate.policies.fifo import FifoPolicy
from solver.simulate.rounds import check_decision
from solver.simulate.scenario import load_scenario
from solver.simulate.scenarios import scenario_tenants
from solver.simulate.tenants_scenario import split
from solver.simulate.trace import check_trace_against, cluster_pools
from tests.simulate_tenant_helpers import (
    Recorder,
    job,
    queue,
    simulate,
    starts,
    tenant_cluster,
)

SIM = Path(__file__).resolve().parent.parent / "instances" / "sim"


def test_each_request_carries_the_queues_and_the_service_attained_so_far() -> None:
    cluster = tenant_cluster(2, queue("a", 2, cohort="c"), queue("b", 2, cohort="c"))
    jobs = [job("a1", "a", 0, 100), job("a2", "a", 0, 300), job("b1", "b", 200, 100)]
    recorder = Recorder(FifoPolicy())
    log = simulate(cluster, jobs, recorder)
    assert starts(log) == {"a1": (0.0, 100.0), "a2": (0.0, 300.0), "b1": (200.0, 300.0)}
    at = {r.now_s: r.request for r in recorder.rounds}
    assert sorted(at) == [0.0, 100.0, 200.0]
    first = at[0.0]
    assert [q.name for q in first.cluster.queues] == ["a", "b"]
    assert all(j.attained.gpu_seconds == 0 for j in first.jobs)
    later = at[200.0]
    (a2,) = [j for j in later.jobs if j.name == "a2"]
    assert a2.attained.gpu_seconds == pytest.approx(200.0)
    # 1 GPU at 10 samples/s; its equal share (4 GPUs over 2 jobs, at most all the time on one
    # GPU) is 1 GPU all the time: normalized rate 1, and 1 again when a2 is alone.
    assert a2.attained.normalized_seconds == pytest.approx(200.0)
    queues = {q.name: q.attained for q in later.cluster.queues}
    # a's attained service sums a2's 200 and the finished a1's 100; b has not run yet.
    assert queues["a"].gpu_seconds == pytest.approx(300.0)
    assert queues["a"].normalized_seconds == pytest.approx(300.0)
    assert queues["b"].gpu_seconds == 0.0
    records = {j.job_id: j for j in log.jobs}
    assert records["a2"].gpu_seconds == pytest.approx(300.0)
    assert records["a2"].normalized_s == pytest.approx(300.0)
    assert {q.name: q.nominal_gpus for q in log.queues} == {"a": 2.0, "b": 2.0}


def test_normalized_service_counts_the_rate_over_the_equal_share_rate() -> None:
    cluster = tenant_cluster(1, queue("a", 2))
    log = simulate(
        cluster, [job("x", "a", 0, 100, gpus=2), job("y", "a", 0, 100, gpus=2)], FifoPolicy()
    )
    records = {j.job_id: j for j in log.jobs}
    assert starts(log) == {"x": (0.0, 100.0), "y": (100.0, 200.0)}
    # x runs 20 samples/s on both GPUs while y waits: the equal share is 2 GPUs / 2 jobs, half
    # the time at 2 GPUs, 10 samples/s: normalized rate 2. y then alone: its share is the cluster.
    assert records["x"].normalized_s == pytest.approx(200.0)
    assert records["y"].normalized_s == pytest.approx(100.0)


def test_borrowed_gpu_seconds_come_from_the_plans_borrowed_jobs() -> None:
    cluster = tenant_cluster(2, queue("a", 1, cohort="c"), queue("b", 3, cohort="c"))
    log = simulate(cluster, [job("a1", "a", 0, 100), job("a2", "a", 0, 100)], FifoPolicy())
    records = {j.job_id: j for j in log.jobs}
    assert starts(log) == {"a1": (0.0, 100.0), "a2": (0.0, 100.0)}
    # a's second GPU is b's idle quota: one of its two jobs (by name) is on borrowed quota.
    assert records["a1"].borrowed_gpu_seconds == 0.0
    assert records["a2"].borrowed_gpu_seconds == pytest.approx(100.0)


def test_fifo_skips_a_job_its_queue_has_no_quota_for_without_blocking_the_others() -> None:
    cluster = tenant_cluster(2, queue("a", 1), queue("b", 3))
    jobs = [job("a1", "a", 0, 100), job("a2", "a", 1, 100), job("b1", "b", 2, 100, gpus=2)]
    log = simulate(cluster, jobs, FifoPolicy(), min_round_spacing_s=0.0)
    # a2 waits for a's one GPU (a has no cohort to borrow from); b1 starts behind it.
    assert starts(log) == {"a1": (0.0, 100.0), "a2": (100.0, 200.0), "b1": (2.0, 102.0)}


def test_a_plan_over_a_queue_quota_is_rejected_by_the_checker() -> None:
    req = pb.SolveRequest(cluster=tenant_cluster(1, queue("a", 1)))
    for name in ("j1", "j2"):
        j = req.jobs.add(name=name, tenant="a", min_gpus=1, max_gpus=1, remaining_samples=10)
        j.profile.points.add(
            gpu_type="G", num_gpus=1, tensor_parallel=1, pipeline_parallel=1, sm_clock_mhz=1000,
            samples_per_second=10, watts=100, memory_per_gpu_gib=10,
        )  # fmt: skip
    req.options.time_budget.FromSeconds(10)
    problem = to_problem(req, Limits())
    shape = Shape("G", 1, 1, 1)
    one = {"j1": Allocation(shape, 1000, (GpuSlice("n0", (0,)),))}
    assert check_decision(problem, Decision(one, 0.0), "p", 0.0).borrowed == frozenset()
    both = one | {"j2": Allocation(shape, 1000, (GpuSlice("n0", (1,)),))}
    with pytest.raises(SimulationError) as e:
        check_decision(problem, Decision(both, 0.0), "p", 0.0)
    assert "queue_quota" in str(e.value) and "queue a uses 2 of G over its limit 1" in str(e.value)


def test_a_trace_tenant_without_a_queue_is_a_problem_naming_its_row() -> None:
    jobs = [TraceJob("x", 0, "a", "w", 1, 10, row=2), TraceJob("y", 0, "z", "w", 1, 10, row=3)]
    with_queues = tenant_cluster(1, queue("a", 2))
    assert check_trace_against(jobs, "t.csv", with_queues, {"w"}) == [
        "t.csv:3:tenant: 'z' names no queue of the cluster (its queues: a)"
    ]
    assert check_trace_against(jobs, "t.csv", tenant_cluster(1), {"w"}) == []


def test_the_tenants_scenario_shares_each_type_by_weight_in_one_cohort() -> None:
    s = scenario_tenants(0)
    queues = {q.name: q for q in s.cluster.queues}
    assert list(queues) == [
        "vc-2869ce", "vc-b436b2", "vc-103959", "vc-6c71a0", "vc-6214e9", "vc-other",
    ]  # fmt: skip
    assert [q.weight for q in queues.values()] == [3, 2, 2, 1, 1, 1]
    assert {q.cohort for q in queues.values()} == {"philly"}
    for gpu_type, gpus in cluster_pools(s.cluster).items():
        nominal = [
            next(x.nominal for x in q.quotas if x.resource == gpu_type) for q in queues.values()
        ]
        assert nominal == [10, 7, 6, 3, 3, 3] and sum(nominal) == gpus == 32
    assert {j.tenant for j in s.jobs} == set(queues) and len(s.jobs) == 300
    assert split(32, [3, 2, 2, 1, 1, 1]) == [10, 7, 6, 3, 3, 3]
    files = load_scenario(SIM / "tenants-a.csv", SIM / "tenants-a-cluster.json")
    assert files.jobs == s.jobs and list(files.cluster.queues) == list(s.cluster.queues)


@pytest.mark.parametrize(
    "policy", ["fifo", "las", "gavel", "sia", "zeus", "kueue", "themis", "dsfro-heuristic"]
)
def test_every_policy_finishes_a_run_within_every_quota(policy: str) -> None:
    # The engine checks every plan, quotas included: a plan over one would stop the run.
    cluster = tenant_cluster(2, queue("a", 1, cohort="c", borrowing=1), queue("b", 3, cohort="c"))
    jobs = [
        job("a1", "a", 0, 100, 2), job("a2", "a", 0, 100), job("b1", "b", 50, 100, 2),
        job("b2", "b", 60, 50),
    ]  # fmt: skip
    log = simulate(cluster, jobs, make_policy(policy), solver_budget_s=1.0)
    assert all(j.finish_s is not None for j in log.jobs)


def test_dominant_shares_take_the_largest_resource_and_the_demand() -> None:
    from solver.simulate.tenants import dominant_shares

    out = dominant_shares(
        running=[
            ("a", "A100", 4, 1000.0, 8),
            ("a", "V100", 1, 200.0, 2),
            ("b", "V100", 2, 300.0, 4),
        ],
        waiting=[("b", 8, 16), ("c", 2, 2)],
        available={"A100": 8, "V100": 8},
        budget_watts=4000.0,
    )
    # 4 of 8 A100 beats 1200 of 4000 W; demand: the jobs' largest counts; requested: held + asked
    assert out["a"] == pytest.approx((0.5, 10 / 16, 5 / 16))
    assert out["b"] == pytest.approx((0.25, 1.0, 10 / 16))  # 20 of 16 GPUs: capped
    assert out["c"] == pytest.approx((0.0, 2 / 16, 2 / 16))


def test_fair_entitlements_fill_progressively_by_weight() -> None:
    from solver.fairness import fair_entitlements

    # c asks 0.1, less than its third: it gets it; a (weight 2) and b share the rest 2:1.
    out = fair_entitlements({"a": 0.9, "b": 0.9, "c": 0.1}, {"a": 2.0})
    assert out == pytest.approx({"a": 0.6, "b": 0.3, "c": 0.1})
    assert fair_entitlements({"a": 0.2, "b": 0.3}, {}) == pytest.approx({"a": 0.2, "b": 0.3})


def test_the_drf_test_counts_shortfalls_below_the_fair_entitlement_only() -> None:
    from solver.simulate.core import QueueRecord, RoundRecord, SimulationLog
    from solver.simulate.tenant_metrics import drf_deviations

    def round_at(t: float, shares: dict[str, tuple[float, float, float]]) -> RoundRecord:
        return RoundRecord(0, t, 0.1, 1.0, 0, 0, 0, 16, 0.0, None, 0, 0, 0, "", shares)

    rounds = (
        round_at(0.0, {"a": (0.5, 0.9, 0.9), "b": (0.5, 0.9, 0.9)}),  # both at their half
        round_at(100.0, {"a": (0.4, 0.9, 0.9), "b": (0.6, 0.9, 0.9)}),  # a 20 % short, b above
        round_at(200.0, {"a": (0.8, 0.9, 0.9), "b": (0.2, 0.2, 0.2)}),  # b asks 0.2: a's is 0.8
    )
    log = SimulationLog("p", 1, "s", (), rounds, (), 300.0, "", (QueueRecord("a", 1.0, 8.0),))
    out = drf_deviations(log)
    assert out["a"] == pytest.approx((0.2 * 100 / 300, 2 / 3))
    assert out["b"] == pytest.approx((0.0, 1.0))


def test_the_drf_test_takes_the_demand_the_policies_were_told_or_the_trace_requests() -> None:
    from solver.simulate.core import RoundRecord, SimulationLog
    from solver.simulate.tenant_metrics import drf_deviations

    # b's jobs can use 0.6 of the cluster but requested 0.3: with the jobs' ranges a and b are
    # due half each and a (0.4) is 20 % short; with the requests a is due 0.7 and 43 % short.
    shares = {"a": (0.4, 0.9, 0.9), "b": (0.6, 0.6, 0.3)}
    record = RoundRecord(0, 0.0, 0.1, 1.0, 0, 0, 0, 16, 0.0, None, 0, 0, 0, "", shares)
    log = SimulationLog("p", 1, "s", (), (record,), (), 100.0, "", ())
    assert drf_deviations(log)["a"] == pytest.approx((0.2, 0.0))
    assert drf_deviations(log, requested=True)["a"] == pytest.approx((0.3 / 0.7, 0.0))
    assert drf_deviations(log)["b"] == drf_deviations(log, requested=True)["b"] == (0.0, 1.0)
