"""The heterogeneity-aware baselines on hand-made rounds: Gavel's LP shares and priorities
(solver.simulate.policies.gavel) and Sia's utility and restart factor (sia), each rule by
value, and every decision through the independent checker."""

from __future__ import annotations

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.simulate.core import JobHistory
from solver.simulate.policies.common import Planner, RoundView
from solver.simulate.policies.gavel import NEVER_RUN_PRIORITY, GavelPolicy, priority
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


def test_gavel_lp_gives_the_fast_type_to_the_job_it_speeds_up_most() -> None:
    # A is 2x faster on FAST, B 4x. Normalised: B on FAST and A on SLOW sum to 1 + 1/2 = 1.5,
    # the other way round 1 + 1/4 = 1.25.
    req = cluster(("f0", FAST, 1), ("s0", SLOW, 1))
    profiled(req, "A", {(FAST, 1): 20.0, (SLOW, 1): 10.0}, max_gpus=1)
    profiled(req, "B", {(FAST, 1): 40.0, (SLOW, 1): 10.0}, max_gpus=1)
    history = {"A": past(0, 1), "B": past(0, 1)}
    x = gavel_shares(req, history)
    expected = {("A", FAST): 0.0, ("A", SLOW): 1.0, ("B", FAST): 1.0, ("B", SLOW): 0.0}
    assert x == pytest.approx(expected, abs=1e-6)
    d = GavelPolicy().decide(round_of(req, history))
    assert placed(d) == {"A": (SLOW, 1), "B": (FAST, 1)}
    assert violations(req, d) == []


def test_gavel_raw_throughput_sum_is_the_repository_objective() -> None:
    # Raw samples/s: A on FAST + B on SLOW = 105 beats 20 + 60 = 80; normalised, B's 4x wins.
    req = cluster(("f0", FAST, 1), ("s0", SLOW, 1))
    profiled(req, "A", {(FAST, 1): 100.0, (SLOW, 1): 60.0}, max_gpus=1)
    profiled(req, "B", {(FAST, 1): 20.0, (SLOW, 1): 5.0}, max_gpus=1)
    history = {"A": past(0, 1), "B": past(0, 1)}
    assert gavel_shares(req, history, normalize=False)[("A", FAST)] == pytest.approx(1.0, abs=1e-6)
    assert gavel_shares(req, history)[("B", FAST)] == pytest.approx(1.0, abs=1e-6)


def test_gavel_time_shares_a_type_by_priority() -> None:
    # Two equal jobs on one GPU: X = 1/2 each. The one that already had its half waits.
    req = cluster(("f0", FAST, 1))
    profiled(req, "a", {(FAST, 1): 10.0}, max_gpus=1)
    profiled(req, "b", {(FAST, 1): 10.0}, max_gpus=1)
    history = {"a": past(0, 1, by_type={FAST: 100.0}), "b": past(0, 1)}
    x = gavel_shares(req, history)
    assert x == pytest.approx({("a", FAST): 0.5, ("b", FAST): 0.5}, abs=1e-6)
    assert priority(0.5, 100.0, 100.0) == pytest.approx(0.5)
    assert priority(0.5, 0.0, 100.0) == pytest.approx(0.5 * NEVER_RUN_PRIORITY)
    assert priority(0.0, 0.0, 100.0) == 0.0
    assert placed(GavelPolicy().decide(round_of(req, history))) == {"b": (FAST, 1)}
    history = {"a": past(0, 1, by_type={FAST: 40.0}), "b": past(0, 1, by_type={FAST: 60.0})}
    assert placed(GavelPolicy().decide(round_of(req, history))) == {"a": (FAST, 1)}


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
