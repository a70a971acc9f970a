"""The themis baseline on hand-made rounds: finish-time fairness estimates, the worst rho
first, the partial allocation that leaves running jobs their lease outside the auction."""

from __future__ import annotations

import pytest

from solver.simulate.policies.common import RoundView
from solver.simulate.policies.themis import ThemisPolicy
from tests.simulate_tenant_helpers import gpus_held, round_input, tenant_cluster, waiting


def test_jobs_are_offered_the_gpus_worst_finish_time_fairness_first() -> None:
    jobs = [waiting("j1", "t", 90), waiting("j2", "t", 0), waiting("j3", "t", 50)]
    r = round_input(tenant_cluster(1), jobs, now=100.0)
    view = RoundView.of(r)
    policy = ThemisPolicy()
    # equal share: 2 GPUs over 3 jobs, 2/3 of the time on 1 GPU, 6.67 samples/s: 1000 samples
    # alone take 150 s; started now at 10 samples/s they finish 100 s after age 10, 100, 50.
    rho = {j.name: policy.rho(view, j) for j in view.problem.jobs}
    assert rho == pytest.approx({"j1": 110 / 150, "j2": 200 / 150, "j3": 150 / 150})
    ordered, auction = policy.order(view)
    assert [j.name for j in ordered] == ["j2", "j3", "j1"] and auction == 1
    assert gpus_held(policy.decide(r)) == {"j2": 1, "j3": 1}


def test_the_attained_normalized_service_counts_in_the_isolated_time() -> None:
    jobs = [waiting("a", "t", 0), waiting("b", "t", 0)]
    r = round_input(tenant_cluster(1), jobs, now=100.0, attained={"a": 100.0})
    view = RoundView.of(r)
    # equal share: 1 GPU each all the time, 10 samples/s. a has had 100 s of it: alone it
    # would finish at 100 + 100 s; b at 100 s. Both finish at 100 + 100 s if started now.
    rho = {j.name: ThemisPolicy().rho(view, j) for j in view.problem.jobs}
    assert rho == pytest.approx({"a": 1.0, "b": 2.0})


def test_outside_the_auction_running_jobs_keep_their_lease() -> None:
    jobs = [
        waiting("r1", "t", 90), waiting("w1", "t", 0), waiting("w2", "t", 20),
        waiting("w3", "t", 40), waiting("w4", "t", 60),
    ]  # fmt: skip
    r = round_input(tenant_cluster(1), jobs, {"r1": ("n0", [0])}, now=100.0)
    # f = 0.8: only w1, the worst, is in the auction; r1 keeps its GPU before w2.
    assert gpus_held(ThemisPolicy().decide(r)) == {"w1": 1, "r1": 1}
    # f = 0: everyone is in the auction, worst first: r1, the best off, is preempted.
    assert gpus_held(ThemisPolicy(fairness_knob=0.0).decide(r)) == {"w1": 1, "w2": 1}
