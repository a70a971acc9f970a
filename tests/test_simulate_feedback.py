"""The simulator's feedback (docs/simulation.md, "Feedback"): once a job has run, the
scheduler sends it as a measured profile of what it showed."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.cli.main import main
from solver.domain import Allocation, GpuSlice, Shape
from solver.perfmodel.catalog import load_architectures
from solver.simulate.core import Decision, RoundInput, SimJob, TraceJob
from solver.simulate.engine import Simulation
from solver.simulate.settings import EngineSettings
from solver.simulate.truth import TruthSettings
from tests.test_simulate_engine import FirstFit, two_gpu_cluster


class Recorder(FirstFit):
    """FirstFit that keeps every request it was sent."""

    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[pb.SolveRequest] = []

    def decide(self, r: RoundInput) -> Decision:
        self.requests.append(r.request)
        return super().decide(r)


def test_feedback_sends_a_job_that_has_run_as_its_observed_profile() -> None:
    archs = load_architectures()
    spec = archs["bert-large"]
    jobs = [
        SimJob(TraceJob("m", 0.0, "t", "bert-large", 1, 3000.0), spec, "bert-large", 1, 1),
        SimJob(TraceJob("late", 1000.0, "t", "bert-large", 1, 600.0), spec, "bert-large", 1, 1),
    ]
    truth = TruthSettings(throughput_sigma=0.3, power_sigma=0.3, round_sigma=0.0)
    settings = EngineSettings(reference_gpu_type="G", truth=truth, feedback=True)
    recorder = Recorder()
    sim = Simulation(two_gpu_cluster(), jobs, recorder, settings=settings, seed=7)
    sim.run()
    first, later = recorder.requests[0], recorder.requests[1]
    assert first.jobs[0].WhichOneof("workload") == "model"
    job = next(j for j in later.jobs if j.name == "m")
    assert job.WhichOneof("workload") == "profile"
    shape = Shape("G", 1, 1, 1)
    true = sim.truth.base_rate("m", shape, 1000)
    (point,) = [p for p in job.profile.points if p.num_gpus == 1 and p.sm_clock_mhz == 1000]
    assert point.samples_per_second == pytest.approx(true.samples_per_second, rel=1e-9)
    assert point.watts == pytest.approx(true.watts, rel=1e-9)
    late = next(j for j in later.jobs if j.name == "late")
    assert late.WhichOneof("workload") == "model"  # it has not run yet


class PipelinedPair(Recorder):
    """Runs job "m" as one replica over a two-stage pipeline (dp 1, tp 1, pp 2), where the
    performance model's best split of two GPUs is two replicas: a shape the model's
    enumeration does not keep (its best pipeline degree per GPU count and tensor degree)."""

    name = "pipelined-pair"

    def decide(self, r: RoundInput) -> Decision:
        self.requests.append(r.request)
        out = {
            j.name: Allocation(Shape("G", 1, 1, 1), 1000, (GpuSlice("n1", (i,)),))
            for i, j in enumerate(x for x in r.request.jobs if x.name != "m")
        }
        if any(j.name == "m" for j in r.request.jobs):
            out["m"] = Allocation(Shape("G", 1, 1, 2), 1000, (GpuSlice("n0", (0, 1)),))
        return Decision(out, 0.0)


def test_feedback_offers_the_shape_a_job_runs_in_even_where_it_is_not_the_best_split() -> None:
    # A rigid baseline runs a job in the trace's split; the profile from what the job showed
    # must still hold that shape, or a non-preemptible job could not keep it (the run stopped
    # with "its profile has no point for G with 2 GPUs (tp 1, pp 2)").
    spec = load_architectures()["bert-large"]
    trace = TraceJob("m", 0.0, "t", "bert-large", 2, 3000.0, preemptible=False)
    truth = TruthSettings(throughput_sigma=0.3, power_sigma=0.3, round_sigma=0.0)
    settings = EngineSettings(reference_gpu_type="G", truth=truth, feedback=True)
    policy = PipelinedPair()
    late = TraceJob("late", 1000.0, "t", "bert-large", 1, 600.0)
    jobs = [SimJob(trace, spec, "bert-large", 2, 2), SimJob(late, spec, "bert-large", 1, 1)]
    log = Simulation(two_gpu_cluster(nodes=2), jobs, policy, settings=settings, seed=7).run()
    assert all(j.finish_s is not None and j.migrations == 0 for j in log.jobs)
    later = next(j for j in policy.requests[1].jobs if j.name == "m")
    assert later.WhichOneof("workload") == "profile"
    shapes = {(q.num_gpus, q.tensor_parallel, q.pipeline_parallel) for q in later.profile.points}
    assert (2, 1, 2) in shapes and (2, 1, 1) in shapes


def test_a_baseline_restarting_a_job_in_the_shape_it_ran_in_passes_the_checker(
    tmp_path: Path,
) -> None:
    """A job ran in a shape whose fastest micro-batch the memory model rules out but a smaller
    one fits; its measured profile offered that shape at the fastest size's memory (215.8 GiB a
    GPU on a 141 GiB H200), and LAS, restarting it there, made a plan the checker refused: the
    run stopped (found by sim_unseen --seed 23, case 10). A shape known to run now keeps the
    micro-batch that fits (solver.perfmodel.throughput.estimate)."""
    case = Path(__file__).resolve().parent / "data" / "simulate" / "unseen-23-case10"
    argv = ["simulate", "--compare", "--trace", str(case / "trace.csv")]
    argv += ["--cluster", str(case / "cluster.json"), "--out", str(tmp_path), "--policies"]
    argv += ["las", "--workers", "1", "--max-time", "5h", "--seeds", "7", "--budget", "0.2s"]
    argv += ["--feedback", "--no-restart-cost", "--interval", "60s"]
    assert main(argv) == 0
    assert (tmp_path / "trace-comparison.csv").exists()
