"""The simulation loop on small hand-made scenarios: exact JCTs and energy, restart costs,
invariants, determinism, and the same results in-process and over gRPC."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import Allocation, GpuSlice, ProfilePoint, Shape, ThroughputProfile
from solver.perfmodel.catalog import load_architectures
from solver.service.server import SchedulerServer
from solver.simulate.core import (
    Decision,
    Policy,
    PowerSchedule,
    PowerStep,
    RoundInput,
    SimJob,
    SimulationError,
    SimulationLog,
    TraceJob,
)
from solver.simulate.engine import STALL_ROUNDS, Simulation
from solver.simulate.metrics import summarize
from solver.simulate.policies import make_policy
from solver.simulate.settings import EngineSettings, RestartCost
from solver.simulate.truth import TruthSettings

EXACT = TruthSettings(throughput_sigma=0.0, power_sigma=0.0, round_sigma=0.0)
IDLE_W = 50.0


def two_gpu_cluster(budget: float | None = None, nodes: int = 1) -> pb.ClusterSnapshot:
    c = pb.ClusterSnapshot(
        gpu_types=[
            pb.GpuType(
                name="G",
                memory_gib=80,
                peak_tflops=100,
                memory_bandwidth_gbps=1000,
                intra_node_bandwidth_gbps=300,
                tdp_watts=300,
                idle_watts=IDLE_W,
                sm_clocks_mhz=[1000],
            )
        ],
        nodes=[
            pb.Node(name=f"n{i}", gpu_type="G", gpu_count=2, rack="r0", network_bandwidth_gbps=100)
            for i in range(nodes)
        ],
    )
    if budget is not None:
        c.power_budget_watts = budget
    return c


def measured_job(name: str, submit: float, duration: float, *, gpus: int = 1) -> SimJob:
    """A job measured at 10 samples/s and 100 W per GPU (its truth with EXACT settings)."""
    points = tuple(ProfilePoint("G", n, 1, 1, 1000, 10.0 * n, 100.0 * n, 10.0) for n in range(1, 3))
    trace = TraceJob(name, submit, "t", "measured", gpus, duration)
    return SimJob(trace, ThroughputProfile(points), "measured", gpus, gpus, measured=True)


class FirstFit:
    """Runs every waiting job on the lowest free GPUs, keeps running jobs where they are."""

    name = "first-fit"

    def decide(self, r: RoundInput) -> Decision:
        taken: set[tuple[str, int]] = set()
        out: dict[str, Allocation] = {}
        for job in r.request.jobs:
            if job.HasField("current_allocation"):
                a = job.current_allocation
                slices = tuple(GpuSlice(s.node, tuple(s.gpu_indices)) for s in a.placement)
                out[job.name] = Allocation(Shape(a.gpu_type, a.data_parallel, 1, 1), 1000, slices)
                taken |= {(s.node, i) for s in slices for i in s.gpu_indices}
        for job in sorted(r.request.jobs, key=lambda j: r.history[j.name].submit_time_s):
            if job.name in out:
                continue
            n = r.history[job.name].requested_gpus
            free = [
                (node.name, i)
                for node in r.request.cluster.nodes
                for i in range(node.gpu_count)
                if (node.name, i) not in taken and i not in node.unavailable_gpu_indices
            ]
            mine = [g for g in free if g[0] == free[0][0]][:n] if free else []
            if len(mine) < n:
                continue
            taken |= set(mine)
            out[job.name] = Allocation(
                Shape("G", n, 1, 1), 1000, (GpuSlice(mine[0][0], tuple(i for _, i in mine)),)
            )
        return Decision(out, 0.0)

    def close(self) -> None:
        pass


def run(
    jobs: list[SimJob],
    policy: Policy,
    cluster: pb.ClusterSnapshot | None = None,
    **settings: Any,
) -> SimulationLog:
    s = dataclasses.replace(EngineSettings(truth=EXACT, reference_gpu_type="G"), **settings)
    sim = Simulation(cluster or two_gpu_cluster(), jobs, policy, settings=s, seed=1)
    return sim.run()


def by_job(log: SimulationLog) -> Mapping[str, tuple[float | None, float | None]]:
    return {j.job_id: (j.first_start_s, j.finish_s) for j in log.jobs}


def test_two_jobs_side_by_side_give_hand_computed_jcts_and_energy() -> None:
    log = run([measured_job("a", 0, 100), measured_job("b", 50, 100)], FirstFit())
    assert by_job(log) == {"a": (0.0, 100.0), "b": (50.0, 150.0)}
    # [0,50): a 100 W + one idle GPU 50 W; [50,100): 200 W; [100,150): b 100 W + 50 W idle.
    energy = sum((p.end_s - p.start_s) * p.true_watts for p in log.power)
    assert energy == pytest.approx(150 * 50 + 200 * 50 + 150 * 50)
    a, b = log.jobs
    assert a.samples == pytest.approx(1000) and b.samples == pytest.approx(1000)
    assert a.energy_j == pytest.approx(100 * 100)
    assert [r.time_s for r in log.rounds] == [0.0, 50.0, 100.0]


def test_a_job_that_does_not_fit_waits_for_the_gpus() -> None:
    jobs = [measured_job("a", 0, 100, gpus=2), measured_job("b", 10, 100, gpus=2)]
    log = run(jobs, FirstFit(), min_round_spacing_s=30.0)
    # b arrives at 10, waits; a finishes at 100 and the next round (100 >= 10 + 30) starts b.
    assert by_job(log) == {"a": (0.0, 100.0), "b": (100.0, 200.0)}


class MoveEveryRound(FirstFit):
    """Moves the one job between the two nodes at every round."""

    name = "mover"

    def decide(self, r: RoundInput) -> Decision:
        node = f"n{r.round_index % 2}"
        return Decision({"a": Allocation(Shape("G", 1, 1, 1), 1000, (GpuSlice(node, (0,)),))}, 0)


def test_a_move_costs_the_restart_delay_without_progress() -> None:
    job = dataclasses.replace(measured_job("a", 0, 600), parameters=1e9)
    cost = RestartCost(overhead_s=20.0, bandwidth_bytes_per_s=14e9)  # 20 + 2 * 14e9 / 14e9 = 22 s
    log = run(
        [job],
        MoveEveryRound(),
        two_gpu_cluster(nodes=2),
        restart=cost,
        round_interval_s=300,
        quiet_interval_s=300,
    )
    # Rounds at 0 (start), 300 (move: 22 s idle), 600 (move: 22 s) ... 6,000 samples at 10/s.
    (rec,) = log.jobs
    assert rec.migrations == 2
    assert rec.finish_s == pytest.approx(600 + 44)
    restarting = [p for p in log.power if p.gpus_busy == 1 and p.gpus_computing == 0]
    assert sum(p.end_s - p.start_s for p in restarting) == pytest.approx(44)
    assert all(p.true_watts == pytest.approx(4 * IDLE_W) for p in restarting)
    assert rec.restarts == 2 and rec.restart_gpu_seconds == pytest.approx(44)
    s = summarize(log)
    assert s.restarts_per_job == 2.0
    assert s.restart_gpu_share == pytest.approx(44 / 644)


class DoubleBooker(FirstFit):
    name = "double"

    def decide(self, r: RoundInput) -> Decision:
        same = (GpuSlice("n0", (0,)),)
        shape = Shape("G", 1, 1, 1)
        return Decision({j.name: Allocation(shape, 1000, same) for j in r.request.jobs}, 0)


def test_a_plan_the_checker_rejects_stops_the_run() -> None:
    with pytest.raises(SimulationError, match="gpu_capacity"):
        run([measured_job("a", 0, 100), measured_job("b", 0, 100)], DoubleBooker())


def test_a_budget_drop_replans_at_once_and_the_plan_keeps_within_it() -> None:
    # Two 1-GPU jobs: 2 x 100 W = 200 W. From t = 40 the budget is 170 W: only one may run
    # (and it has 20 W for its power margin: its limit comes down to fit, solver.perfmodel.guard).
    schedule = PowerSchedule((PowerStep(0.0, 1000.0), PowerStep(40.0, 170.0)), period_s=1e9)
    jobs = [measured_job("a", 0, 100), measured_job("b", 0, 100)]
    log = Simulation(
        two_gpu_cluster(),
        jobs,
        make_policy("dsfro-heuristic"),
        schedule=schedule,
        settings=EngineSettings(truth=EXACT, reference_gpu_type="G"),
        seed=1,
    ).run()
    assert [r.time_s for r in log.rounds][:2] == [0.0, 40.0]
    for r in log.rounds:
        assert r.budget_watts is not None and r.predicted_watts <= r.budget_watts + 1e-6
    assert all(j.finish_s is not None for j in log.jobs)


def _model_jobs(count: int) -> list[SimJob]:
    archs = load_architectures()
    jobs = []
    for i in range(count):
        name = ("bert-large", "gpt3-1.3b")[i % 2]
        n = (1, 2)[i % 2]
        trace = TraceJob(f"m{i}", 40.0 * i, f"t{i % 2}", name, n, 600.0 + 60 * i)
        spec = archs[name]
        jobs.append(SimJob(trace, spec, name, 1, 2 * n, parameters=spec.parameters))
    return jobs


def _comparable(log: SimulationLog) -> tuple[object, ...]:
    rounds = [dataclasses.replace(r, solver_seconds=0.0) for r in log.rounds]
    return (log.jobs, tuple(rounds), log.power)


def test_model_jobs_finish_with_their_samples_and_the_same_seed_repeats() -> None:
    cluster = two_gpu_cluster(nodes=3)
    cluster.gpu_types[0].sm_clocks_mhz.extend([800, 600])
    settings = EngineSettings(reference_gpu_type="G", solver_budget_s=1.0)
    logs = [
        Simulation(
            cluster, _model_jobs(6), make_policy("dsfro-heuristic"), settings=settings, seed=4
        ).run()
        for _ in range(2)
    ]
    assert _comparable(logs[0]) == _comparable(logs[1])
    for j in logs[0].jobs:
        assert j.finish_s is not None and j.first_start_s is not None
        assert j.samples > 0
    other = Simulation(
        cluster, _model_jobs(6), make_policy("dsfro-heuristic"), settings=settings, seed=5
    ).run()
    assert _comparable(other) != _comparable(logs[0])


def test_over_grpc_the_results_are_those_in_process(server: SchedulerServer) -> None:
    cluster = two_gpu_cluster(nodes=3)
    settings = EngineSettings(reference_gpu_type="G", solver_budget_s=1.0)
    here = Simulation(
        cluster, _model_jobs(5), make_policy("dsfro-heuristic"), settings=settings, seed=2
    ).run()
    remote_policy = make_policy("dsfro-heuristic", server=f"127.0.0.1:{server.port}")
    remote = Simulation(cluster, _model_jobs(5), remote_policy, settings=settings, seed=2).run()
    assert _comparable(here) == _comparable(remote)


def test_while_no_job_waits_rounds_come_on_events_or_after_the_quiet_interval() -> None:
    # One job alone runs 7,000 s: rounds at 0 and then every quiet interval (3,000 s), not every
    # 300 s; the arrival at 4,000 s and the completion at 4,100 s bring rounds at once.
    jobs = [measured_job("a", 0, 7000), measured_job("b", 4000, 100)]
    log = run(jobs, FirstFit(), round_interval_s=300, quiet_interval_s=3000)
    assert [r.time_s for r in log.rounds] == [0.0, 3000.0, 4000.0, 4100.0]  # none after the last


class OwnRounds(FirstFit):
    """Asks for its own round every 360 s (as Gavel's leases end), counted from each call."""

    def decide(self, r: RoundInput) -> Decision:
        return dataclasses.replace(super().decide(r), next_round_s=r.now_s + 360.0)


def test_a_policy_is_also_called_when_its_own_round_ends() -> None:
    # a runs 1,000 s, b arrives at 500 and runs 100 s: the engine's rounds (at 0, then the
    # quiet interval) and events (b's arrival and completion; none after the last job), and
    # the policy's own 360 s after each call.
    jobs = [measured_job("a", 0, 1000), measured_job("b", 500, 100)]
    log = run(jobs, OwnRounds(), round_interval_s=300, quiet_interval_s=3000)
    assert [r.time_s for r in log.rounds] == [0.0, 360.0, 500.0, 600.0, 960.0]
    plain = run(jobs, FirstFit(), round_interval_s=300, quiet_interval_s=3000)
    assert [r.time_s for r in plain.rounds] == [0.0, 500.0, 600.0]
    assert by_job(log) == by_job(plain) == {"a": (0.0, 1000.0), "b": (500.0, 600.0)}


def test_fixed_rounds_make_arrivals_and_completions_wait_for_the_next_round() -> None:
    # Gavel's rule: rounds every 300 s; b (arrives at 50) waits for the round at 300; a's
    # completion at 400 does not bring a round while b still runs (to 700, round at 600); once
    # the only running job is done, the round ends at its completion.
    jobs = [measured_job("a", 0, 400), measured_job("b", 50, 400), measured_job("c", 650, 100)]
    log = run(jobs, FirstFit(), round_interval_s=300, quiet_interval_s=3000, fixed_rounds=True)
    assert by_job(log) == {"a": (0.0, 400.0), "b": (300.0, 700.0), "c": (700.0, 800.0)}
    assert [r.time_s for r in log.rounds] == [0.0, 300.0, 600.0, 700.0]


@pytest.mark.parametrize(
    "policy",
    [
        "fifo",
        "las",
        "gavel",
        "gavel-maxmin",
        "pop-maxmin",
        "sia",
        "zeus",
        "kueue",
        "themis",
        "dsfro-heuristic",
    ],
)
def test_every_policy_keeps_the_invariants_every_round(policy: str) -> None:
    # Model jobs on 3 two-GPU nodes under a budget that binds (idle 300 W + 2 jobs or so).
    cluster = two_gpu_cluster(budget=900.0, nodes=3)
    cluster.gpu_types[0].sm_clocks_mhz.extend([800, 600])
    settings = EngineSettings(reference_gpu_type="G", solver_budget_s=1.0, power_headroom=0.05)
    log = Simulation(cluster, _model_jobs(8), make_policy(policy), settings=settings, seed=3).run()
    # The engine checked every plan (GPUs once, whole gangs, limits, predicted power within the
    # budget it announced); the log shows the same from outside.
    for r in log.rounds:
        assert r.budget_watts == 900.0
        assert r.predicted_watts <= 900.0 * 0.95 + 1e-6
        assert r.gpus_busy <= r.gpus_available
    for p in log.power:
        assert p.gpus_computing <= p.gpus_busy <= p.gpus_available
    truth = Simulation(cluster, _model_jobs(8), make_policy(policy), settings=settings, seed=3)
    for j in log.jobs:
        assert j.finish_s is not None, j.job_id
        assert j.samples == pytest.approx(truth.samples_to_train(j.job_id), rel=1e-9)


class Idle(FirstFit):
    name = "idle"

    def decide(self, r: RoundInput) -> Decision:
        return Decision({}, 0.0)


def test_a_policy_that_never_runs_a_waiting_job_stops_the_run_with_a_reason() -> None:
    log = run([measured_job("a", 0, 100)], Idle())
    assert log.jobs[0].finish_s is None
    assert "ran nothing" in log.stopped
    assert len(log.rounds) == STALL_ROUNDS + 1  # every round ran nothing


def test_a_checkpoint_moves_in_parallel_shards_one_per_node() -> None:
    from solver.simulate.settings import RestartCost

    cost = RestartCost(overhead_s=30.0, bandwidth_bytes_per_s=2e9)
    size = 14 * 70e9  # bytes of a 70B-parameter job's checkpoint
    assert cost.seconds(70e9) == pytest.approx(30 + 2 * size / 2e9)
    assert cost.seconds(70e9, 64, 64) == pytest.approx(30 + 2 * size / (64 * 2e9))
    assert cost.seconds(70e9, 64, 1) == pytest.approx(30 + size / (64 * 2e9) + size / 2e9)


def test_an_evaluation_job_restarts_by_loading_its_weights_only() -> None:
    """No optimizer state to save or load: its 16-bit weights (2 bytes a parameter), loaded by
    its nodes in parallel; the nodes it ran on do not matter."""
    from solver.simulate.settings import RestartCost

    cost = RestartCost(overhead_s=30.0, bandwidth_bytes_per_s=2e9)
    weights = 2 * 70e9
    assert cost.seconds(70e9, 1, 1, evaluation=True) == pytest.approx(30 + weights / 2e9)
    assert cost.seconds(70e9, 8, 2, evaluation=True) == pytest.approx(30 + weights / (2 * 2e9))
    assert cost.seconds(70e9, evaluation=True) < cost.seconds(70e9) / 7


def test_the_trace_evaluation_column_round_trips_and_is_checked(tmp_path: Path) -> None:
    from solver.simulate.trace import parse_trace, trace_text

    plain = [TraceJob("a", 0.0, "t", "bert-large", 1, 60.0)]
    assert "evaluation" not in trace_text(plain)  # nine columns, as before
    text = trace_text([*plain, TraceJob("b", 1.0, "t", "bert-large", 8, 9.0, evaluation=True)])
    assert text.splitlines()[0].endswith(",evaluation")
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert [j.evaluation for j in parse_trace(path).jobs] == [False, True]
    path.write_text(text.replace("true\n", "maybe\n"))
    assert any("t.csv:3:evaluation" in p for p in parse_trace(path).problems)


def test_settings_with_weights_pickle_for_the_compare_workers() -> None:
    """--compare --profile sends the settings to worker processes: they must pickle."""
    import pickle

    from solver.simulate.settings import EngineSettings

    settings = EngineSettings(weights={"fairness": 20.0, "energy": 0.5})
    assert pickle.loads(pickle.dumps(settings)) == settings
