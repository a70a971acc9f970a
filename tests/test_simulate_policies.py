"""Baseline policies on hand-made rounds: each rule by value, and every decision through the
independent checker (power budget included)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.pipeline import to_problem
from solver.domain import Config, JobAssignment, JobState, Problem, Shape
from solver.perfmodel.configs import resolve_config
from solver.scoring.checker import PlanViolation, check_plan
from solver.simulate.core import Decision, JobHistory, Policy, RoundInput
from solver.simulate.policies.common import Planner, RoundView
from solver.simulate.policies.fifo import FifoPolicy
from solver.simulate.policies.gavel import NEVER_RUN_PRIORITY, GavelPolicy, priority
from solver.simulate.policies.las import LasPolicy
from solver.simulate.policies.sia import SiaPolicy, restart_factor, sia_counts, utility
from solver.simulate.policies.zeus import ZeusPolicy, zeus_cost_per_sample

FAST, SLOW = "FAST", "SLOW"
TOP = {FAST: 1410, SLOW: 1380}
IDLE = {FAST: 50.0, SLOW: 40.0}
LLM = pb.ModelSpec(
    parameters=1.3e9, layers=24, hidden_size=2048, attention_heads=16, sequence_length=2048,
    global_batch_size=64,
)  # fmt: skip
BIG = pb.ModelSpec(
    parameters=6.7e9, layers=32, hidden_size=4096, attention_heads=32, sequence_length=2048,
    global_batch_size=64,
)  # fmt: skip


# ---------------------------------------------------------------- building rounds


def cluster(*nodes: tuple[str, str, int], budget: float | None = None) -> pb.SolveRequest:
    """Nodes (name, type, GPUs) of two GPU types: FAST (80 GiB) and SLOW (32 GiB)."""
    req = pb.SolveRequest()
    c = req.cluster
    c.gpu_types.add(
        name=FAST, memory_gib=80, peak_tflops=312, memory_bandwidth_gbps=2039,
        intra_node_bandwidth_gbps=600, tdp_watts=400, idle_watts=IDLE[FAST],
        sm_clocks_mhz=[1410, 1275, 1110, 960],
    )  # fmt: skip
    c.gpu_types.add(
        name=SLOW, memory_gib=32, peak_tflops=125, memory_bandwidth_gbps=900,
        intra_node_bandwidth_gbps=300, tdp_watts=300, idle_watts=IDLE[SLOW],
        sm_clocks_mhz=[1380, 1245],
    )  # fmt: skip
    for name, gpu_type, count in nodes:
        c.nodes.add(
            name=name, gpu_type=gpu_type, gpu_count=count, rack="r0", network_bandwidth_gbps=100
        )
    if budget is not None:
        c.power_budget_watts = budget
    req.options.time_budget.FromSeconds(10)
    return req


def running(
    gpu_type: str, node: str, gpus: Sequence[int], clock: int | None = None
) -> pb.Allocation:
    return pb.Allocation(
        gpu_type=gpu_type, data_parallel=len(gpus), tensor_parallel=1, pipeline_parallel=1,
        sm_clock_mhz=clock or TOP[gpu_type], placement=[pb.GpuSlice(node=node, gpu_indices=gpus)],
    )  # fmt: skip


def profiled(
    req: pb.SolveRequest,
    name: str,
    rates: dict[tuple[str, int], float],
    *,
    watts_per_gpu: float = 300.0,
    min_gpus: int = 1,
    max_gpus: int = 4,
    current: pb.Allocation | None = None,
    preemptible: bool = True,
) -> None:
    """A job measured at the top clock: samples/s per (GPU type, GPU count), data parallel."""
    j = req.jobs.add(name=name, tenant="t", min_gpus=min_gpus, max_gpus=max_gpus)
    j.preemptible = preemptible
    for (gpu_type, n), sps in rates.items():
        j.profile.points.add(
            gpu_type=gpu_type, num_gpus=n, tensor_parallel=1, pipeline_parallel=1,
            sm_clock_mhz=TOP[gpu_type], samples_per_second=sps, watts=watts_per_gpu * n,
            memory_per_gpu_gib=10,
        )  # fmt: skip
    if current is not None:
        j.current_allocation.CopyFrom(current)


def modeled(req: pb.SolveRequest, name: str, spec: pb.ModelSpec, max_gpus: int = 8) -> None:
    j = req.jobs.add(name=name, tenant="t", min_gpus=1, max_gpus=max_gpus)
    j.model.CopyFrom(spec)


def past(
    submit: float, gpus: int, attained: float = 0.0, by_type: dict[str, float] | None = None
) -> JobHistory:
    return JobHistory(submit, gpus, attained, by_type or {})


def round_of(
    req: pb.SolveRequest, history: dict[str, JobHistory], now: float = 100.0
) -> RoundInput:
    return RoundInput(req, problem(req), now, 1, history, 60.0)


def problem(req: pb.SolveRequest) -> Problem:
    return to_problem(req, Limits())


def assignments(req: pb.SolveRequest, d: Decision) -> list[JobAssignment]:
    """The decision as the checker reads it: configurations from resolve_config."""
    p = problem(req)
    out = []
    for j in p.jobs:
        a = d.allocations.get(j.name)
        if a is None:
            out.append(JobAssignment(j.name, JobState.QUEUED))
        else:
            c = resolve_config(p, j, a.shape, a.sm_clock_mhz)
            out.append(JobAssignment(j.name, JobState.RUNNING, c, a.placement))
    return out


def violations(req: pb.SolveRequest, d: Decision) -> list[PlanViolation]:
    return check_plan(problem(req), assignments(req, d))


def draw(req: pb.SolveRequest, d: Decision) -> float:
    """Predicted watts of the plan: running jobs plus every other GPU idle."""
    p = problem(req)
    total = sum(n.gpu_count * IDLE[n.gpu_type] for n in p.cluster.nodes)
    for a in assignments(req, d):
        if a.config is not None:
            total += a.config.watts - a.config.num_gpus * IDLE[a.config.gpu_type]
    return total


def placed(d: Decision) -> dict[str, tuple[str, int]]:
    """Job -> (GPU type, GPUs) of each running job."""
    return {k: (a.shape.gpu_type, a.shape.num_gpus) for k, a in d.allocations.items()}


def gpus_of(d: Decision, job: str) -> list[tuple[str, int]]:
    return sorted((s.node, i) for s in d.allocations[job].placement for i in s.gpu_indices)


def config(req: pb.SolveRequest, job: str, shape: Shape, clock: int) -> Config:
    p = problem(req)
    c = resolve_config(p, next(j for j in p.jobs if j.name == job), shape, clock)
    assert c is not None
    return c


# ---------------------------------------------------------------- FIFO


def test_fifo_starts_in_submission_order_and_blocks_the_head_of_the_line() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "x", {(FAST, 1): 10.0})
    profiled(req, "y", {(FAST, 3): 30.0})
    profiled(req, "z", {(FAST, 2): 20.0})
    history = {"x": past(5, 1), "y": past(3, 3), "z": past(4, 2)}
    d = FifoPolicy().decide(round_of(req, history))
    # y (first submitted) takes 3 GPUs; z needs 2 of the 1 left and blocks x, which would fit.
    assert placed(d) == {"y": (FAST, 3)}
    assert "head of line: z" in d.detail
    assert violations(req, d) == []


def test_fifo_never_preempts_a_running_job() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "old", {(FAST, 4): 40.0}, current=running(FAST, "f0", [0, 1, 2, 3]))
    profiled(req, "new", {(FAST, 1): 10.0})
    history = {"old": past(0, 4, attained=1e6), "new": past(50, 1)}
    d = FifoPolicy().decide(round_of(req, history))
    assert placed(d) == {"old": (FAST, 4)}
    assert gpus_of(d, "old") == [("f0", 0), ("f0", 1), ("f0", 2), ("f0", 3)]


def test_fifo_skips_a_job_that_could_never_run() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "huge", {(FAST, 8): 80.0}, min_gpus=8, max_gpus=8)
    profiled(req, "small", {(FAST, 1): 10.0})
    d = FifoPolicy().decide(round_of(req, {"huge": past(0, 8), "small": past(1, 1)}))
    assert placed(d) == {"small": (FAST, 1)}


def test_fifo_splits_a_model_only_when_it_does_not_fit_one_gpu() -> None:
    req = cluster(("f0", FAST, 8))
    modeled(req, "small", LLM)
    modeled(req, "big", BIG)
    d = FifoPolicy().decide(round_of(req, {"small": past(0, 2), "big": past(1, 2)}))
    assert d.allocations["small"].shape == Shape(FAST, 2, 1, 1)
    # 6.7e9 parameters do not fit one 80 GiB GPU per replica: the smallest split that fits.
    p = problem(req)
    big = next(j for j in p.jobs if j.name == "big")
    assert resolve_config(p, big, Shape(FAST, 2, 1, 1), TOP[FAST]) is None
    assert d.allocations["big"].shape == Shape(FAST, 1, 2, 1)
    assert violations(req, d) == []


def test_fifo_takes_the_fastest_type_with_room() -> None:
    req = cluster(("f0", FAST, 1), ("s0", SLOW, 1))
    for name in ("a", "b"):
        profiled(req, name, {(FAST, 1): 20.0, (SLOW, 1): 10.0})
    d = FifoPolicy().decide(round_of(req, {"a": past(0, 1), "b": past(1, 1)}))
    assert placed(d) == {"a": (FAST, 1), "b": (SLOW, 1)}


def test_fifo_admits_within_the_power_budget_and_blocks_behind() -> None:
    # Idle 4 x 50 W; a 2-GPU job adds 2 x (300 - 50) = 500 W: one fits 900 W, two do not.
    req = cluster(("f0", FAST, 4), budget=900.0)
    profiled(req, "a", {(FAST, 2): 20.0})
    profiled(req, "b", {(FAST, 2): 20.0})
    profiled(req, "c", {(FAST, 1): 10.0})
    d = FifoPolicy().decide(round_of(req, {"a": past(0, 2), "b": past(1, 2), "c": past(2, 1)}))
    assert placed(d) == {"a": (FAST, 2)}
    assert draw(req, d) == pytest.approx(700.0)
    assert violations(req, d) == []


def test_fifo_stops_the_latest_started_job_when_the_budget_drops() -> None:
    req = cluster(("f0", FAST, 4), budget=900.0)
    profiled(req, "first", {(FAST, 2): 20.0}, current=running(FAST, "f0", [0, 1]))
    profiled(req, "second", {(FAST, 2): 20.0}, current=running(FAST, "f0", [2, 3]))
    d = FifoPolicy().decide(round_of(req, {"first": past(0, 2), "second": past(1, 2)}))
    assert placed(d) == {"first": (FAST, 2)}
    assert "stopped by the power budget: second" in d.detail
    assert violations(req, d) == []


def test_a_non_preemptible_job_is_slowed_not_stopped_when_the_budget_drops() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "pinned", {(FAST, 2): 20.0}, current=running(FAST, "f0", [0, 1]),
             preemptible=False)  # fmt: skip
    at_1110 = config(req, "pinned", Shape(FAST, 2, 1, 1), 1110)
    at_1275 = config(req, "pinned", Shape(FAST, 2, 1, 1), 1275)
    budget = 2 * IDLE[FAST] + at_1110.watts + 1.0  # 1110 MHz fits, 1275 MHz does not
    assert 2 * IDLE[FAST] + at_1275.watts > budget
    req.cluster.power_budget_watts = budget
    for policy in (FifoPolicy(), LasPolicy(), GavelPolicy(), SiaPolicy(), ZeusPolicy()):
        d = policy.decide(round_of(req, {"pinned": past(0, 2)}))
        assert d.allocations["pinned"].sm_clock_mhz == 1110, policy.name
        assert gpus_of(d, "pinned") == [("f0", 0), ("f0", 1)]
        assert violations(req, d) == []


# ---------------------------------------------------------------- LAS


def test_las_queues_follow_tiresias_thresholds() -> None:
    las = LasPolicy()
    assert [las.queue(s) for s in (0.0, 3249.9, 3250.0, 7199.0, 7200.0, 1e9)] == [0, 0, 1, 1, 2, 2]


def test_las_preempts_the_job_with_more_attained_service() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "old", {(FAST, 4): 40.0}, current=running(FAST, "f0", [0, 1, 2, 3]))
    profiled(req, "new", {(FAST, 4): 40.0})
    history = {"old": past(0, 4, attained=5000.0), "new": past(50, 4)}
    d = LasPolicy().decide(round_of(req, history))
    assert placed(d) == {"new": (FAST, 4)}
    assert violations(req, d) == []


def test_las_serves_running_jobs_first_in_a_queue_and_skips_what_does_not_fit() -> None:
    req = cluster(("f0", FAST, 4))
    profiled(req, "wide", {(FAST, 3): 30.0})
    profiled(req, "run", {(FAST, 2): 20.0}, current=running(FAST, "f0", [2, 3]))
    profiled(req, "narrow", {(FAST, 1): 10.0})
    history = {"wide": past(1, 3), "run": past(5, 2, attained=100.0), "narrow": past(2, 1)}
    d = LasPolicy().decide(round_of(req, history))
    # Queue 0 holds all three: run (running) first, then wide (3 of 2 free GPUs: skipped),
    # then narrow.
    assert placed(d) == {"run": (FAST, 2), "narrow": (FAST, 1)}
    assert gpus_of(d, "run") == [("f0", 2), ("f0", 3)]


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


# ---------------------------------------------------------------- Zeus


@pytest.mark.parametrize("eta", [0.5, 1.0, 0.0])
def test_zeus_runs_each_job_at_its_least_cost_clock(eta: float) -> None:
    req = cluster(("f0", FAST, 8))
    modeled(req, "llm", LLM)
    d = ZeusPolicy(eta_knob=eta).decide(round_of(req, {"llm": past(0, 2)}))
    shape = Shape(FAST, 2, 1, 1)
    configs = [config(req, "llm", shape, c) for c in (1410, 1275, 1110, 960)]
    best = min(configs, key=lambda c: zeus_cost_per_sample(c, eta, 400.0 * 2))
    assert d.allocations["llm"].shape == shape
    assert d.allocations["llm"].sm_clock_mhz == best.sm_clock_mhz
    if eta == 0.0:  # time only: the fastest clock
        assert best.sm_clock_mhz == 1410


def test_zeus_lower_clocks_fit_more_jobs_in_a_power_budget() -> None:
    req = cluster(("f0", FAST, 8))
    modeled(req, "a", LLM)
    modeled(req, "b", LLM)
    low = config(req, "a", Shape(FAST, 2, 1, 1), 960)
    assert (
        ZeusPolicy(eta_knob=1.0).best_config(
            RoundView.of(round_of(req, {})), problem(req).jobs[0], low.shape
        )
        == low
    )  # energy only: the lowest clock
    req.cluster.power_budget_watts = 8 * IDLE[FAST] + 2 * (low.watts - 2 * IDLE[FAST]) + 1.0
    history = {"a": past(0, 2), "b": past(1, 2)}
    zeus = ZeusPolicy(eta_knob=1.0).decide(round_of(req, history))
    fifo = FifoPolicy().decide(round_of(req, history))
    assert placed(zeus) == {"a": (FAST, 2), "b": (FAST, 2)}
    assert len(fifo.allocations) < 2
    assert violations(req, zeus) == [] and violations(req, fifo) == []


# ---------------------------------------------------------------- every policy, checked


POLICIES: list[Callable[[], Policy]] = [FifoPolicy, LasPolicy, GavelPolicy, SiaPolicy, ZeusPolicy]


def mixed(budget: float | None) -> tuple[pb.SolveRequest, dict[str, JobHistory]]:
    req = cluster(("f0", FAST, 4), ("f1", FAST, 4), ("s0", SLOW, 2), budget=budget)
    profiled(req, "p1", {(FAST, 2): 30.0, (FAST, 4): 55.0, (SLOW, 2): 12.0},
             current=running(FAST, "f0", [0, 1]))  # fmt: skip
    profiled(req, "p2", {(FAST, 1): 10.0, (FAST, 2): 19.0, (SLOW, 1): 6.0, (SLOW, 2): 11.0})
    profiled(req, "p3", {(FAST, 4): 50.0, (FAST, 2): 27.0}, watts_per_gpu=350.0)
    modeled(req, "llm", LLM, max_gpus=4)
    history = {
        "p1": past(0, 2, attained=4000.0, by_type={FAST: 90.0}),
        "p2": past(10, 2),
        "p3": past(20, 4),
        "llm": past(30, 2),
    }
    return req, history


@pytest.mark.parametrize("make", POLICIES, ids=lambda p: p.__name__)
def test_every_decision_passes_the_checker_when_the_budget_binds(
    make: Callable[[], Policy],
) -> None:
    free_req, history = mixed(None)
    free = make().decide(round_of(free_req, history))
    assert violations(free_req, free) == []
    budget = draw(free_req, free) - 300.0  # below what the policy would draw without one
    req, _ = mixed(budget)
    d = make().decide(round_of(req, history))
    assert violations(req, d) == []
    assert draw(req, d) <= budget
    assert d.solver_seconds >= 0.0


@pytest.mark.parametrize("make", POLICIES, ids=lambda p: p.__name__)
def test_every_policy_handles_a_budget_below_the_running_jobs(make: Callable[[], Policy]) -> None:
    req = cluster(("f0", FAST, 4), ("s0", SLOW, 2))
    profiled(req, "a", {(FAST, 2): 20.0}, current=running(FAST, "f0", [0, 1]))
    profiled(req, "b", {(FAST, 2): 20.0}, current=running(FAST, "f0", [2, 3]))
    profiled(req, "c", {(SLOW, 2): 8.0}, current=running(SLOW, "s0", [0, 1]), preemptible=False)
    req.cluster.power_budget_watts = 1200.0  # idle 280 W; running 1800 W
    policy = make()
    d = policy.decide(round_of(req, {"a": past(0, 2), "b": past(1, 2), "c": past(2, 2)}))
    assert "c" in d.allocations
    assert len(d.allocations) < 3
    assert violations(req, d) == []
    policy.close()
