"""``dsfro solve`` here (solver.cli.main): the plan table and --json, flags over the file's
options, exit codes of bad flags and internal errors, the exact backends and --pyomo-solver,
clean JSON with HiGHS in a fresh process, and the same plan as the gRPC service."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.domain import Backend
from tests.cli_helpers import run, write_request
from tests.factories import make_request
from tests.fakes import Broken, Remembering

WAIT = 60.0


def test_solve_prints_a_plan_table_and_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "solve", write_request(tmp_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "JOB",
        "STATE",
        "GPU",
        "DPxTPxPP",
        "CLOCK",
        "GPUS",
        "SAMPLES/S",
        "WATTS",
        "MIGRATED",
        "NOTE",
    ]
    assert sorted(line.split()[0] for line in lines[1:4]) == ["bert", "llm", "resnet"]
    assert any(line.startswith("termination ") for line in lines)
    assert any(line.startswith("objective ") and "(throughput " in line for line in lines)
    assert any(line.startswith("configurations ") for line in lines)


def test_solve_json_prints_the_solve_response(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "solve", write_request(tmp_path), "--json")
    assert code == 0, err
    resp = json_format.Parse(out, pb.SolveResponse())
    assert sorted(a.job for a in resp.plan.assignments) == ["bert", "llm", "resnet"]
    assert resp.stats.termination != pb.TERMINATION_UNSPECIFIED


def test_flags_override_the_file_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Remembering()
    code, _, err = run(
        capsys,
        "solve",
        write_request(tmp_path),
        "--time-budget",
        "1500ms",
        "--backend",
        "cpsat",
        "--seed",
        "42",
        "--threads",
        "3",
        solver=fake,
    )
    assert code == 0, err
    [problem] = fake.seen
    o = problem.options
    assert (o.time_budget_seconds, o.backend, o.seed, o.threads) == (1.5, Backend.CPSAT, 42, 3)


def test_flags_are_validated_like_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "solve", write_request(tmp_path), "--time-budget", "10m")
    assert code == 2
    assert "options.time_budget: must be <= 300s" in err
    assert out == ""


def test_an_internal_error_exits_1_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "solve", write_request(tmp_path), solver=Broken())
    assert code == 1
    assert err.strip() == "dsfro: internal error: RuntimeError: secret detail"


def test_cli_and_grpc_give_the_same_plan_for_the_same_seed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stub: scheduler_pb2_grpc.SchedulerServiceStub,
) -> None:
    req = make_request()
    req.options.seed = 11
    code, out, err = run(capsys, "solve", write_request(tmp_path, req), "--json")
    assert code == 0, err
    via_cli = json_format.Parse(out, pb.SolveResponse())
    via_grpc = stub.Solve(req, timeout=WAIT)
    assert via_cli.plan == via_grpc.plan
    assert json.loads(out)["plan"]["assignments"]


def test_backend_and_pyomo_solver_flags_reach_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = Remembering()
    code, _, err = run(
        capsys,
        "solve",
        write_request(tmp_path),
        "--backend",
        "pyomo",
        "--pyomo-solver",
        "appsi_highs",
        solver=fake,
    )
    assert code == 0, err
    code, _, err = run(capsys, "solve", write_request(tmp_path), "--backend", "highs", solver=fake)
    assert code == 0, err
    assert [(p.options.backend, p.options.pyomo_solver) for p in fake.seen] == [
        (Backend.PYOMO, "appsi_highs"),
        (Backend.HIGHS, ""),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--pyomo-solver", "appsi_highs"],
            "options.pyomo_solver: is only used with BACKEND_PYOMO, got BACKEND_UNSPECIFIED",
        ),
        (
            ["--backend", "pyomo", "--pyomo-solver", "no-such-solver"],
            'options.pyomo_solver: solver "no-such-solver" is not available here; available: '
            "appsi_highs",
        ),
    ],
)
def test_a_bad_pyomo_solver_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, "solve", write_request(tmp_path), *argv)
    assert code == 2 and out == ""
    assert message in err


@pytest.mark.parametrize("backend", ["highs", "pyomo"])
def test_solve_with_a_milp_backend(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    # small: the aggregated bound alone doesn't close the gap, so the full model runs.
    small = str(Path(__file__).resolve().parent.parent / "instances" / "small.json")
    code, out, err = run(
        capsys, "solve", small, "--json", "--backend", backend, "--time-budget", "20s"
    )
    assert code == 0, err
    resp = json_format.Parse(out, pb.SolveResponse())
    assert resp.stats.termination == pb.TERMINATION_OPTIMAL
    assert ("HiGHS OPTIMAL" if backend == "highs" else "Pyomo/appsi_highs OPTIMAL") in (
        resp.stats.detail
    )


def test_json_output_stays_clean_with_highs_in_a_fresh_process(tmp_path: Path) -> None:
    # HiGHS prints a banner on file descriptor 1 the first time a process creates a solver;
    # capsys can't see it, a fresh process can.
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "solver.cli.main",
            "solve",
            write_request(tmp_path),
            "--json",
            "--backend",
            "highs",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stats"]["termination"] == "TERMINATION_OPTIMAL"
