"""The one pipeline: every door gives the same plan for the same request and seed, and the
pipeline's own steps (profile, overrides, validation, conversion) behave as documented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app import pipeline
from solver.app.convert import load_request_json, message_to_json
from solver.app.limits import Limits
from solver.app.profile import profile_from_dict
from solver.cli.main import main
from solver.domain import Backend
from solver.offline.sweep.run import prepare as sweep_prepare
from solver.offline.sweep.run import run_sweep
from solver.runtime.pools import InlineExecutor
from tests.factories import make_request

ROOT = Path(__file__).resolve().parent.parent


def _shape(a: pb.JobAssignment) -> str:
    return f"{a.data_parallel}x{a.tensor_parallel}x{a.pipeline_parallel}"


def test_service_cli_batch_and_sweep_give_the_same_plan(
    stub: scheduler_pb2_grpc.SchedulerServiceStub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    request = load_request_json(ROOT / "instances" / "small.json")
    request.options.seed = 3
    request.options.threads = 1
    request.options.time_budget.FromSeconds(20)  # HiGHS proves small optimal well within it
    path = tmp_path / "small.json"
    path.write_text(message_to_json(request))

    service: pb.SolveResponse = stub.Solve(request, timeout=60)
    plan = service.plan
    assert service.stats.termination == pb.TERMINATION_OPTIMAL
    running = [a for a in plan.assignments if a.state == pb.JOB_STATE_RUNNING]
    assert running and len(running) < len(plan.assignments) + 1

    # CLI
    assert main(["solve", str(path), "--json"]) == 0
    cli = json_format.Parse(capsys.readouterr().out, pb.SolveResponse())
    assert cli.plan == plan

    # batch (in this process: --workers 1)
    results = tmp_path / "results.jsonl"
    assert main(["batch", str(path), "--out", str(results), "--workers", "1"]) == 0
    capsys.readouterr()
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert record["ok"] and record["seed"] == 3
    assert record["objective"]["total"] == plan.objective.total
    assert record["jobs_running"] == len(running)
    assert record["gpus_used"] == sum(a.num_gpus for a in running)
    assert record["power_w"] == pytest.approx(sum(a.watts for a in running), rel=1e-12)

    # sweep: one grid point at the request's own energy weight
    energy = pipeline.to_problem(request, Limits()).weights.energy
    outcome = run_sweep(
        sweep_prepare(str(path), threads=None), [("energy", [energy])], executor=InlineExecutor()
    )
    (point,) = outcome.points
    assert point.error is None
    assert point.objective == plan.objective.total
    by_job = {j.job: j for j in point.jobs}
    for a in plan.assignments:
        choice = by_job[a.job]
        if a.state == pb.JOB_STATE_RUNNING:
            assert (choice.state, choice.gpu_type, choice.shape, choice.clock_mhz) == (
                "RUNNING",
                a.gpu_type,
                _shape(a),
                a.sm_clock_mhz,
            )
            assert choice.gpus == a.num_gpus
        else:
            assert choice.state == "QUEUED"


def test_prepare_applies_the_profile_then_the_overrides_without_touching_the_request() -> None:
    request = make_request()
    request.weights.energy = 0.3  # the request's own field beats the profile
    profile = profile_from_dict(
        {"weights": {"energy": 0.9, "migration": 0.7}, "solver": {"seed": 5, "backend": "cpsat"}}
    )
    overrides = pipeline.Overrides(backend=Backend.HIGHS, time_budget_seconds=1.5, threads=2)
    out = pipeline.prepare(request, profile, overrides)
    assert out.weights.energy == 0.3
    assert out.weights.migration == 0.7
    assert request.options.seed == 7 and out.options.seed == 7  # the request's own seed wins
    assert out.options.backend == pb.BACKEND_HIGHS  # the override beats the profile
    assert out.options.time_budget.ToNanoseconds() == 1_500_000_000
    assert out.options.threads == 2
    assert not request.weights.HasField("migration")
    assert request.options.backend != pb.BACKEND_HIGHS and request.options.threads != 2


def test_the_energy_flags_beat_the_profile_and_the_request() -> None:
    """`dsfro solve --energy-weight W --energy-basis waste` as overrides: they win over the
    request's own weights and the profile's basis."""
    from solver.domain import EnergyBasis

    request = make_request()
    request.weights.energy = 0.3
    profile = profile_from_dict({"weights": {"energy_basis": "draw"}})
    overrides = pipeline.Overrides(weights={"energy": 10.0}, energy_basis=EnergyBasis.WASTE)
    out = pipeline.prepare(request, profile, overrides)
    assert out.weights.energy == 10.0 and out.weights.energy_basis == pb.ENERGY_BASIS_WASTE
    assert request.weights.energy_basis == pb.ENERGY_BASIS_UNSPECIFIED  # the request untouched


def test_solve_takes_the_energy_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same request at energy weight 10: the WASTE basis charges at most the draw."""
    path = tmp_path / "req.json"
    path.write_text(message_to_json(make_request()))
    energy = {}
    for basis in ("draw", "waste"):
        argv = ["solve", str(path), "--energy-weight", "10", "--energy-basis", basis, "--json"]
        assert main([*argv, "--backend", "heuristic", "--time-budget", "2s"]) == 0
        energy[basis] = json.loads(capsys.readouterr().out)["plan"]["objective"]["energy"]
    assert 0.0 <= energy["waste"] < energy["draw"]


def test_to_problem_names_every_bad_field() -> None:
    request = make_request()
    request.jobs[0].max_gpus = 0
    request.options.threads = 10_000
    with pytest.raises(pipeline.InvalidRequest) as e:
        pipeline.to_problem(request, Limits())
    fields = {v.field for v in e.value.violations}
    assert {"jobs[0].max_gpus", "options.threads"} <= fields


def test_validate_snapshot_reports_violations_or_configurations() -> None:
    good = pipeline.validate_snapshot(make_request(), Limits())
    assert good.valid and good.jobs
    assert all(j.num_configurations > 0 and j.best_samples_per_second > 0 for j in good.jobs)
    bad_request = make_request()
    bad_request.cluster.nodes[0].gpu_type = "nope"
    bad = pipeline.validate_snapshot(bad_request, Limits())
    assert not bad.valid and not bad.jobs
    assert any(v.field == "cluster.nodes[0].gpu_type" for v in bad.violations)
