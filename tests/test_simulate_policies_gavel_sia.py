"""The heterogeneity-aware baselines on hand-made rounds: Gavel's LP shares and priorities
(solver.simulate.policies.gavel) and Sia's utility and restart factor (sia), each rule by
value, and every decision through the independent checker."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import Config
from solver.simulate.core import JobHistory, RoundInput
from solver.simulate.policies.common import Planner, RoundView
from solver.simulate.policies.gavel import (
    NEVER_RUN_PRIORITY,
    GavelMaxMinPolicy,
    GavelPolicy,
    priority,
)
from solver.simulate.policies.gavel_lp import max_min_fairness, proportional_throughput
from solver.simulate.policies.pop import PopMaxMinPolicy, pop_partitions, pop_solve
from solver.simulate.policies.sia import SiaPolicy, restart_factor, sia_counts, utility
from tests.simulate_policy_helpers import (
    FAST,
    SLOW,
    cluster,
    gpus_of,
    past,
    placed,
    profiled,
    round_of,
    running,
    violations,
)

# ---------------------------------------------------------------- Gavel


def gavel_shares(
    req: pb.SolveRequest, history: dict[str, JobHistory], **kw: bool
) -> dict[tuple[str, str], float]:
    view = RoundView.of(round_of(req, history))
    return dict(GavelPolicy(**kw).allocation(view, view.problem.jobs, Planner(view)).share)


def test_gavel_lp_normalised_gives_the_fast_type_to_the_job_it_speeds_up_most() -> None:
    # A is 2x faster on FAST, B 4x. Normalised: B on FAST and A on SLOW sum to 1 + 1/2 = 1.5,
    # the other way round 1 + 1/4 = 1.25.
    req = cluster(("f0", FAST, 1), ("s0", SLOW, 1))
    profiled(req, "A", {(FAST, 1): 20.0, (SLOW, 1): 10.0}, max_gpus=1)
    profiled(req, "B", {(FAST, 1): 40.0, (SLOW, 1): 10.0}, max_gpus=1)
    history = {"A": past(0, 1), "B": past(0, 1)}
    x = gavel_shares(req, history, normalize=True)
    expected = {("A", FAST): 0.0, ("A", SLOW): 1.0, ("B", FAST): 1.0, ("B", SLOW): 0.0}
    assert x == pytest.approx(expected, abs=1e-6)
    d = GavelPolicy(normalize=True).decide(round_of(req, history))
    assert placed(d) == {"A": (SLOW, 1), "B": (FAST, 1)}
    assert violations(req, d) == []


def test_gavel_default_is_the_raw_throughput_sum_of_max_sum_throughput_perf() -> None:
    # Raw samples/s: A on FAST + B on SLOW = 105 beats 20 + 60 = 80; normalised, B's 4x wins.
    req = cluster(("f0", FAST, 1), ("s0", SLOW, 1))
    profiled(req, "A", {(FAST, 1): 100.0, (SLOW, 1): 60.0}, max_gpus=1)
    profiled(req, "B", {(FAST, 1): 20.0, (SLOW, 1): 5.0}, max_gpus=1)
    history = {"A": past(0, 1), "B": past(0, 1)}
    assert gavel_shares(req, history)[("A", FAST)] == pytest.approx(1.0, abs=1e-6)
    assert gavel_shares(req, history, normalize=True)[("B", FAST)] == pytest.approx(1.0, abs=1e-6)


def test_gavel_priorities_count_time_since_the_reset_with_a_half_round_credit() -> None:
    # Two equal jobs on one GPU: X = 1/2 each. Rounds of 60 s: a credit of 30 s per job.
    req = cluster(("f0", FAST, 1))
    profiled(req, "a", {(FAST, 1): 10.0}, max_gpus=1)
    profiled(req, "b", {(FAST, 1): 10.0}, max_gpus=1)
    gavel = GavelPolicy(round_s=60.0)  # Gavel's round: the test's 60 s
    d = gavel.decide(round_of(req, {"a": past(0, 1), "b": past(0, 1)}, now=100.0))
    assert gavel.resets == 1 and gavel.last_reset_s == 100.0
    assert gavel.shares == {"a": pytest.approx({FAST: 0.5}), "b": pytest.approx({FAST: 0.5})}
    assert placed(d) == {"a": (FAST, 1)}  # equal priorities, deficits and X: arrival order
    # a ran 60 s: its time 30 + 60 = 90 of the type's 30 + 30 + 60 = 120 (fraction 3/4, b's
    # 1/4): priority 0.5 / 0.75 against 0.5 / 0.25, so b runs.
    d = gavel.decide(round_of(req, {"a": past(0, 1, by_type={FAST: 60.0}), "b": past(0, 1)},
                              now=160.0))  # fmt: skip
    assert gavel.job_time["a"][FAST] == 90.0 and gavel.worker_time[FAST] == 120.0
    assert priority(0.5, 90.0, 120.0) == pytest.approx(2 / 3)
    assert priority(0.5, 30.0, 120.0) == pytest.approx(2.0)
    assert priority(0.5, 30.0, 0.0) == pytest.approx(0.5 * NEVER_RUN_PRIORITY)
    assert priority(0.0, 30.0, 120.0) == 0.0
    assert placed(d) == {"b": (FAST, 1)}
    assert gavel.resets == 1  # the same jobs: no reset


def test_gavel_recomputes_only_on_a_job_change_at_least_1920_s_after_the_last_reset() -> None:
    req = cluster(("f0", FAST, 2))
    profiled(req, "a", {(FAST, 1): 10.0}, max_gpus=1)
    profiled(req, "b", {(FAST, 1): 10.0}, max_gpus=1)
    gavel = GavelPolicy(round_s=60.0)  # Gavel's round: the test's 60 s
    gavel.decide(round_of(req, {"a": past(0, 1), "b": past(0, 1)}, now=100.0))
    assert gavel.resets == 1
    # a has finished and c arrives 360 s later: the allocation is not recomputed, c is not in
    # it and does not run although a GPU is free.
    req = cluster(("f0", FAST, 2))
    profiled(req, "b", {(FAST, 1): 10.0}, max_gpus=1)
    profiled(req, "c", {(FAST, 1): 10.0}, max_gpus=1)
    history = {"b": past(0, 1, by_type={FAST: 360.0}), "c": past(460, 1)}
    d = gavel.decide(round_of(req, history, now=460.0))
    assert gavel.resets == 1 and "c" not in gavel.shares and gavel.need_update
    assert placed(d) == {"b": (FAST, 1)}
    # 2,000 s after the reset the pending change recomputes it. b's deficit: X = 1 for 1,920 s
    # less the 1,920 s it ran since the reset (its time since then, without the credit).
    history = {"b": past(0, 1, by_type={FAST: 1920.0}), "c": past(460, 1)}
    d = gavel.decide(round_of(req, history, now=2020.0))
    assert gavel.resets == 2 and gavel.last_reset_s == 2020.0
    assert gavel.deficit[FAST]["b"] == pytest.approx(1.0 * 1920.0 - 1920.0, abs=1e-6)
    assert gavel.deficit[FAST]["c"] == 0.0 and gavel.job_time["b"][FAST] == 30.0
    assert placed(d) == {"b": (FAST, 1), "c": (FAST, 1)}


def test_gavel_renews_leases_mid_round_and_decides_again_at_its_next_round() -> None:
    # Two equal jobs on one GPU (X = 1/2 each); rounds of 60 s.
    gavel = GavelPolicy(round_s=60.0)  # Gavel's round: the test's 60 s
    d = gavel.decide(round_of(one_gpu(), {"a": past(0, 1), "b": past(0, 1)}, now=100.0))
    assert placed(d) == {"a": (FAST, 1)} and d.next_round_s == 160.0  # the engine calls then
    # 30 s later (the engine's call at an arrival or a completion elsewhere) b's priority is
    # the higher (a's time 30 + 30 of the type's 90), but it is mid-round for Gavel: a's lease
    # runs on.
    ran = {"a": past(0, 1, by_type={FAST: 30.0}), "b": past(0, 1)}
    mid = one_gpu(current_a=running(FAST, "f0", [0]))
    d = gavel.decide(round_of(mid, ran, now=130.0))
    assert placed(d) == {"a": (FAST, 1)} and "mid-round: leases renewed" in d.detail
    assert d.next_round_s == 160.0  # the round's end has not moved
    assert violations(mid, d) == []
    # A round after the last one Gavel decides again, and b takes the GPU.
    ran = {"a": past(0, 1, by_type={FAST: 60.0}), "b": past(0, 1)}
    d = gavel.decide(round_of(mid, ran, now=160.0))
    assert placed(d) == {"b": (FAST, 1)} and "mid-round" not in d.detail
    assert violations(mid, d) == []


def test_gavels_round_is_its_own_six_minutes_or_the_engines_interval_when_longer() -> None:
    gavel = GavelPolicy()
    short = round_of(one_gpu(), {"a": past(0, 1), "b": past(0, 1)})
    assert gavel.round_length(RoundView.of(short)) == 360.0  # the engine's 60 s are shorter
    assert gavel.begin_round_if_due(100.0, 360.0) and not gavel.begin_round_if_due(459.0, 360.0)
    assert gavel.begin_round_if_due(460.0, 360.0) and gavel.last_round_s == 460.0
    long = dataclasses.replace(short, round_length_s=1800.0)
    assert GavelPolicy().round_length(RoundView.of(long)) == 1800.0


def test_gavel_fills_idle_gpus_mid_round_in_its_queues_order() -> None:
    # Three equal jobs on two GPUs (X = 2/3 each): a and b run first, in arrival order.
    req = cluster(("f0", FAST, 2))
    for name in "abc":
        profiled(req, name, {(FAST, 1): 10.0}, max_gpus=1)
    gavel = GavelPolicy(round_s=60.0)  # Gavel's round: the test's 60 s
    d = gavel.decide(round_of(req, {n: past(0, 1) for n in "abc"}, now=100.0))
    assert placed(d) == {"a": (FAST, 1), "b": (FAST, 1)}
    # b finished mid-round: a runs on where it is, c takes the idle GPU now.
    mid = cluster(("f0", FAST, 2))
    profiled(
        mid,
        "a",
        {(FAST, 1): 10.0},
        max_gpus=1,
        current=running(FAST, "f0", [gpus_of(d, "a")[0][1]]),
    )
    profiled(mid, "c", {(FAST, 1): 10.0}, max_gpus=1)
    history = {"a": past(0, 1, by_type={FAST: 30.0}), "c": past(0, 1)}
    after = gavel.decide(round_of(mid, history, now=130.0))
    assert placed(after) == {"a": (FAST, 1), "c": (FAST, 1)}
    assert gpus_of(after, "a") == gpus_of(d, "a") and violations(mid, after) == []


def one_gpu(current_a: pb.Allocation | None = None) -> pb.SolveRequest:
    """One FAST GPU; jobs a and b, equal."""
    req = cluster(("f0", FAST, 1))
    profiled(req, "a", {(FAST, 1): 10.0}, max_gpus=1, current=current_a)
    profiled(req, "b", {(FAST, 1): 10.0}, max_gpus=1)
    return req


def two_types(*jobs: tuple[str, float, float]) -> tuple[RoundView, dict[tuple[str, str], Config]]:
    """One FAST and one SLOW GPU; jobs (name, samples/s on FAST, on SLOW) on one GPU."""
    req = cluster(("f0", FAST, 1), ("s0", SLOW, 1))
    for name, fast, slow in jobs:
        profiled(req, name, {(FAST, 1): fast, (SLOW, 1): slow}, max_gpus=1)
    view = RoundView.of(round_of(req, {name: past(0, 1) for name, _, _ in jobs}))
    return view, GavelPolicy().configs(view, view.problem.jobs)


def normalised(
    view: RoundView, configs: dict[tuple[str, str], Config], x: dict[tuple[str, str], float]
) -> list[float]:
    cap = {FAST: 1.0, SLOW: 1.0}
    return [
        sum(configs[(j.name, t)].samples_per_second * x[(j.name, t)] for t in (FAST, SLOW))
        / proportional_throughput(j, [FAST, SLOW], configs, cap)
        for j in view.problem.jobs
    ]


def test_gavel_maxmin_gives_equal_shares_of_the_proportional_throughput() -> None:
    # Gavel's ProportionalPolicy: time on each type by its GPU count, 1/2 each: (30 + 10) / 2.
    view, configs = two_types(("A", 30.0, 10.0), ("B", 30.0, 10.0))
    cap = {FAST: 1.0, SLOW: 1.0}
    assert proportional_throughput(view.problem.jobs[0], [FAST, SLOW], configs, cap) == 20.0
    x = max_min_fairness(view.problem.jobs, [FAST, SLOW], configs, cap)
    # The whole cluster (40 samples/s) split equally: each job gets its proportional share.
    assert normalised(view, configs, x) == pytest.approx([1.0, 1.0], abs=1e-6)
    # Heterogeneity-aware: C gains 4x on FAST, D nothing: C takes FAST, D SLOW, and D's
    # normalised throughput 10 / 10 = 1 is the most it can get; C's is 40 / 25 = 1.6.
    view, configs = two_types(("C", 40.0, 10.0), ("D", 10.0, 10.0))
    x = max_min_fairness(view.problem.jobs, [FAST, SLOW], configs, cap)
    assert min(normalised(view, configs, x)) == pytest.approx(1.0, abs=1e-6)
    d = GavelMaxMinPolicy().decide(round_of_view(view))
    assert len(d.allocations) == 2


def round_of_view(view: RoundView) -> RoundInput:
    return RoundInput(pb.SolveRequest(), view.problem, view.now_s, 1, dict(view.history), 60.0)


def test_pop_with_one_part_is_the_full_lp_and_with_k_parts_splits_the_gpus() -> None:
    view, configs = two_types(*((f"j{i}", 10.0 + 7 * i, 5.0 + i) for i in range(6)))
    jobs, types, cap = view.problem.jobs, [FAST, SLOW], {FAST: 1.0, SLOW: 1.0}
    full = max_min_fairness(jobs, types, configs, cap)
    rng = np.random.default_rng(0)
    assert pop_solve(max_min_fairness, jobs, types, configs, cap, 1, rng) == full
    parts = pop_partitions(jobs, 2, np.random.default_rng(0))
    assert sorted(len(p) for p in parts) == [3, 3]
    assert sorted(j.name for p in parts for j in p) == sorted(j.name for j in jobs)
    x = pop_solve(max_min_fairness, jobs, types, configs, cap, 2, np.random.default_rng(0))
    for part in parts:  # each part within half of each type
        for t in types:
            assert sum(x[(j.name, t)] for j in part) <= 0.5 + 1e-6
    assert PopMaxMinPolicy(k=1).decide(round_of_view(view)).allocations


# ---------------------------------------------------------------- Sia


def sia_case(current_b: pb.Allocation | None = None) -> pb.SolveRequest:
    req = cluster(("f0", FAST, 2), ("s0", SLOW, 2))
    profiled(req, "A", {(FAST, 1): 40.0, (FAST, 2): 80.0, (SLOW, 1): 10.0, (SLOW, 2): 20.0},
             max_gpus=2)  # fmt: skip
    profiled(req, "B", {(FAST, 1): 10.0, (FAST, 2): 20.0, (SLOW, 1): 10.0, (SLOW, 2): 20.0},
             max_gpus=2, current=current_b)  # fmt: skip
    return req


def test_sia_utility_and_restart_factor() -> None:
    assert sia_counts(8, 32) == [1, 2, 4, 8, 16, 24, 32]
    assert sia_counts(4, 6) == [1, 2, 4]
    assert [utility(g, -0.5) for g in (1.0, 2.0, 4.0, 8.0)] == [1.0, 0.71, 0.5, 0.35]
    assert restart_factor(20.0, 0, 30.0) == 1.0
    assert restart_factor(100.0, 3, 30.0) == pytest.approx(10 / 130)


def test_sia_gives_each_job_the_type_and_count_of_least_summed_utility() -> None:
    # Goodput / smallest goodput: A FAST 4, 8, SLOW 1, 2; B 1, 2 on both types.
    # (goodput)^-0.5: A FAST2 0.35 + B SLOW2 0.71 = 1.06, the least of the feasible pairs
    # (A FAST1 + B FAST1 1.5, A SLOW2 + B FAST2 1.42, A FAST2 + B SLOW1 1.35).
    req = sia_case()
    d = SiaPolicy().decide(round_of(req, {"A": past(0, 1), "B": past(0, 1)}))
    assert placed(d) == {"A": (FAST, 2), "B": (SLOW, 2)}
    assert violations(req, d) == []


def test_sia_restart_factor_keeps_a_job_that_restarted_often() -> None:
    # B runs on FAST x 2, 100 s old, 3 restarts: r = 10/130, so its other configurations drop
    # to (2r)^-0.5 = 2.55 (SLOW2) or worse; keeping B (0.71) with A on SLOW2 (0.71) = 1.42
    # beats moving it (0.35 + 2.55) and leaving it out (0.35 + 1.1 = 1.45).
    req = sia_case(current_b=running(FAST, "f0", [0, 1]))
    sia = SiaPolicy()
    sia.restarts["B"] = 3
    d = sia.decide(round_of(req, {"A": past(0, 1), "B": past(0, 1)}, now=100.0))
    assert placed(d) == {"A": (SLOW, 2), "B": (FAST, 2)}
    assert gpus_of(d, "B") == [("f0", 0), ("f0", 1)]
    assert sia.restarts["B"] == 3  # B stayed: no restart counted
