"""The dsfro command: output, flag overrides, exit codes, and agreement with the gRPC service."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc
from solver.app.arguments import duration_arg
from solver.cli.main import main
from solver.cli.plan_text import compact_indices, format_plan, format_stats
from solver.core.solver import Solver
from solver.domain import (
    Backend,
)
from solver.service.security import TlsFiles
from solver.service.server import SchedulerServer
from tests.factories import make_request
from tests.factories import running_server as running
from tests.fakes import Broken, Canned, Recording, Remembering, records
from tests.tls_certs import Pki

WAIT = 60.0


def test_solve_on_a_running_server(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    server: SchedulerServer,
) -> None:
    req = make_request()
    address = f"127.0.0.1:{server.port}"
    code, out, err = run(
        capsys, "solve", write_request(tmp_path, req), "--json", "--server", address
    )
    assert code == 0, err
    remote = json_format.Parse(out, pb.SolveResponse())
    code, out, err = run(capsys, "solve", write_request(tmp_path, req), "--json")
    assert remote.plan == json_format.Parse(out, pb.SolveResponse()).plan

    req.jobs[0].max_gpus = 0
    code, out, err = run(capsys, "solve", write_request(tmp_path, req), "--server", address)
    assert code == 2
    assert "jobs[0].max_gpus: must be >= min_gpus (1)" in err
    assert "Traceback" not in err


def test_solve_on_an_unreachable_server_exits_1(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "solve", write_request(tmp_path), "--server", "127.0.0.1:1")
    assert code == 1
    assert "UNAVAILABLE" in err and "Traceback" not in err


def write_request(tmp_path: Path, req: pb.SolveRequest | None = None) -> str:
    path = tmp_path / "request.json"
    path.write_text(json_format.MessageToJson(req if req is not None else make_request()))
    return str(path)


def run(
    capsys: pytest.CaptureFixture[str], *argv: str, solver: Solver | None = None
) -> tuple[int, str, str]:
    code = main(list(argv), solver=solver)
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- solve


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


# ---------------------------------------------------------------- validate and bad input


def test_validate_a_good_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", write_request(tmp_path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "OK: 3 jobs, 3 nodes, 2 GPU types"
    assert [line.split()[0] for line in lines[1:]] == ["llm", "bert", "resnet"]
    assert all(" configurations, best " in line for line in lines[1:])


def test_validate_a_bad_file_exits_2_with_the_field_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = make_request()
    req.jobs[2].max_gpus = 1
    req.cluster.nodes[0].rack = ""
    code, out, err = run(capsys, "validate", write_request(tmp_path, req))
    assert code == 2
    assert out == ""
    assert err.splitlines()[:2] == [
        "cluster.nodes[0].rack: must not be empty",
        "jobs[2].max_gpus: must be >= min_gpus (2), got 1",
    ]
    assert "2 problem(s)" in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"cluster": {"nodes": [}', "malformed JSON"),
        ('{"cluster": {"colour": "red"}}', 'no field named "colour"'),
        ('{"jobs": [{"minGpus": "many"}]}', "not a valid SolveRequest"),
    ],
)
@pytest.mark.parametrize("command", ["solve", "validate"])
def test_unreadable_input_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    code, out, err = run(capsys, command, str(path))
    assert code == 2
    assert out == ""
    assert err.startswith(f"dsfro: error: {path}")
    assert message in err
    assert "Traceback" not in err


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", str(tmp_path / "none.json"))
    assert code == 2
    assert "cannot read" in err


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "solve", write_request(tmp_path), "--time-budget", "soon")
    assert code == 2
    assert "invalid duration 'soon'" in err
    assert run(capsys, "frobnicate")[0] == 2
    assert run(capsys, "--help")[0] == 0


def test_serve_with_a_bad_setting_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "serve", "--port", "abc")
    assert code == 2
    assert "--port must be an integer in [0, 65535], got 'abc'" in err


# ---------------------------------------------------------------- formatting


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5s", 5.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("3", 3.0),
        (".25s", 0.25),
    ],
)
def test_duration_arg(text: str, seconds: float) -> None:
    assert duration_arg(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "-1s", "5x", "1.5.2s", "5 s s", "0s"])
def test_duration_arg_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_arg(text)


def test_compact_indices() -> None:
    assert compact_indices([9, 0, 1, 2, 3, 6, 8]) == "0-3,6,8-9"
    assert compact_indices([5]) == "5"
    assert compact_indices([]) == ""


def test_format_plan_rows() -> None:
    plan = pb.Plan(
        assignments=[
            pb.JobAssignment(
                job="a",
                state=pb.JOB_STATE_RUNNING,
                gpu_type="A100-80GB",
                num_gpus=6,
                data_parallel=3,
                tensor_parallel=2,
                pipeline_parallel=1,
                sm_clock_mhz=1275,
                samples_per_second=1234.56,
                watts=2100.4,
                migrated=True,
                placement=[
                    pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3]),
                    pb.GpuSlice(node="a100-1", gpu_indices=[4, 5]),
                ],
            ),
            pb.JobAssignment(
                job="b",
                state=pb.JOB_STATE_QUEUED,
                queue_reason=pb.QUEUE_REASON_INSUFFICIENT_RESOURCES,
                queue_detail="GPUs went to a",
            ),
        ]
    )
    _, a, b = format_plan(plan).splitlines()
    assert a.split() == [
        "a",
        "RUNNING",
        "A100-80GB",
        "3x2x1",
        "1275",
        "MHz",
        "a100-0:0-3",
        "a100-1:4-5",
        "1234.6",
        "2100",
        "yes",
    ]
    assert b.split()[:9] == ["b", "QUEUED", "-", "-", "-", "-", "-", "-", "no"]
    assert b.endswith("INSUFFICIENT_RESOURCES: GPUs went to a")


def test_format_stats_shows_bound_and_gap_only_when_set() -> None:
    stats = pb.SolveStats(
        termination=pb.TERMINATION_FEASIBLE,
        backend_used=pb.BACKEND_CPSAT,
        objective=0.75,
        best_bound=0.8,
        relative_gap=0.0625,
        num_configurations=12,
        num_configurations_enumerated=40,
    )
    stats.wall_time.FromMilliseconds(1500)
    text = format_stats(stats, pb.ObjectiveBreakdown(total=0.75, throughput=1.0))
    assert "termination     FEASIBLE (backend CPSAT)" in text
    assert "best bound      0.8  (gap 6.25%)" in text
    assert "wall 1.500s" in text
    assert "configurations  12 (of 40 enumerated)" in text
    stats.ClearField("best_bound")
    stats.ClearField("relative_gap")
    assert "best bound" not in format_stats(stats, pb.ObjectiveBreakdown())


# ---------------------------------------------------------------- CLI and gRPC agree


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


# ---------------------------------------------------------------- exact backends and export


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


def test_export_writes_mps_next_to_where_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    request = write_request(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = run(capsys, "export", request)
    assert code == 0, err
    text = (work / "request.mps").read_text()
    assert "ROWS" in text and "COLUMNS" in text and "OBJSENSE" in text
    assert out.startswith("wrote request.mps: ")
    assert " variables, " in out and " rows, maximise" in out


def test_export_lp_to_a_given_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "model.lp"
    code, out, err = run(
        capsys, "export", write_request(tmp_path), "--format", "lp", "--out", str(target)
    )
    assert code == 0, err
    text = target.read_text()
    assert "max" in text and "gang_size(" in text
    assert out.startswith(f"wrote {target}: ")


def test_export_rejects_bad_input_and_unwritable_paths(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = make_request()
    req.jobs[0].max_gpus = 0
    code, _, err = run(capsys, "export", write_request(tmp_path, req))
    assert code == 2 and "jobs[0].max_gpus" in err
    code, _, err = run(capsys, "export", write_request(tmp_path), "--format", "xml")
    assert code == 2 and "invalid choice" in err
    code, _, err = run(
        capsys, "export", write_request(tmp_path), "--out", str(tmp_path / "missing" / "m.mps")
    )
    assert code == 2 and "cannot write" in err and "Traceback" not in err


# ---------------------------------------------------------------- health, TLS and tokens


TOKEN = "s3cr3t-token-for-cli-tests-01"


def test_health_of_a_running_server(
    server: SchedulerServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    address = f"127.0.0.1:{server.port}"
    assert run(capsys, "health", "--server", address) == (0, f"{address}: SERVING\n", "")
    # Beside the server (a container's HEALTHCHECK) the address comes from its settings.
    monkeypatch.delenv("DSFRO_HEALTH_PORT", raising=False)
    monkeypatch.setenv("DSFRO_PORT", str(server.port))
    assert run(capsys, "health") == (0, f"{address}: SERVING\n", "")
    monkeypatch.setenv("DSFRO_HEALTH_PORT", "1")
    code, _, err = run(capsys, "health")
    assert code == 1 and err.startswith("dsfro: 127.0.0.1:1: UNAVAILABLE: ")
    assert run(capsys, "health", "--server", address, "--service", "no.such.Service") == (
        1,
        "",
        f"dsfro: {address}: SERVICE_UNKNOWN\n",
    )
    server.health.enter_graceful_shutdown()
    assert run(capsys, "health", "--server", address) == (
        1,
        "",
        f"dsfro: {address}: NOT_SERVING\n",
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--server", "127.0.0.1:1"], "dsfro: 127.0.0.1:1: UNAVAILABLE: "),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--timeout", "soon"], "dsfro: error: --timeout: invalid duration 'soon'"),
        (["--tls-cert", "c.pem"], "dsfro: error: --tls-cert and --tls-key go together"),
        (["--tls-ca", "/no/such/ca.pem"], "dsfro: error: TLS CA file /no/such/ca.pem: "),
    ],
)
def test_health_fails_with_1_never_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    # Docker reserves exit code 2 of a HEALTHCHECK: every failure is 1.
    code, out, err = run(capsys, "health", "--timeout", "1s", *argv)
    assert (code, out) == (1, "")
    assert message in err and "Traceback" not in err


def test_health_is_fast_and_loads_no_solver() -> None:
    code = (
        "import json, sys, time\n"
        "start = time.monotonic()\n"
        "from solver.cli.main import main\n"
        "rc = main(['health', '--server', '127.0.0.1:1', '--timeout', '1s'])\n"
        "heavy = ('numpy', 'ortools', 'highspy', 'pyomo', 'solver.app.pipeline', "
        "'solver.service.server', 'solver.core', 'solver.offline', "
        "'solver.simulate')\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith(heavy))]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parent.parent,
        check=True,
    )
    assert json.loads(done.stdout) == [1, []]
    assert "UNAVAILABLE" in done.stderr


def test_solve_over_tls_with_a_token(
    pki: Pki,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = tmp_path / "seen.jsonl"
    request = write_request(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.delenv("DSFRO_TOKEN", raising=False)
    server_tls = TlsFiles(pki.server.cert, pki.server.key)
    with running(Recording(seen), tls=server_tls, token=TOKEN) as srv:
        address = f"localhost:{srv.port}"
        tls = ["--server", address, "--tls-ca", str(pki.ca)]
        code, out, err = run(
            capsys, "solve", request, "--json", *tls, "--token-file", str(token_file)
        )
        assert code == 0, err
        assert len(json_format.Parse(out, pb.SolveResponse()).plan.assignments) == 3
        code, _, err = run(capsys, "solve", request, *tls)
        # The last line: the in-process server may log above it.
        assert code == 1
        assert err.splitlines()[-1].startswith(
            f"dsfro: {address}: UNAUTHENTICATED: missing bearer token"
        )
        monkeypatch.setenv("DSFRO_TOKEN", TOKEN)
        code, _, err = run(capsys, "solve", request, *tls)
        assert code == 0, err
        # The server's certificate names localhost, not other.example; plaintext is no TLS.
        code, _, err = run(capsys, "solve", request, *tls, "--tls-server-name", "other.example")
        assert code == 1 and "UNAVAILABLE" in err
        assert run(capsys, "health", *tls) == (0, f"{address}: SERVING\n", "")
        code, _, err = run(capsys, "health", "--server", address)
        assert code == 1 and "UNAVAILABLE" in err
    assert len(records(seen)) == 2


def test_health_and_solve_with_a_client_certificate(
    pki: Pki,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca)
    with running(Canned(), tls=files, allowed_clients=frozenset({"scheduler"})) as srv:
        tls = ["--server", f"127.0.0.1:{srv.port}", "--tls-ca", str(pki.ca)]
        cert = ["--tls-cert", str(pki.scheduler.cert), "--tls-key", str(pki.scheduler.key)]
        assert run(capsys, "health", *tls, *cert)[0] == 0
        assert run(capsys, "health", *tls)[0] == 1  # no certificate: no handshake
        code, _, err = run(capsys, "solve", write_request(tmp_path), *tls, *cert)
        assert code == 0, err
        intruder = ["--tls-cert", str(pki.intruder.cert), "--tls-key", str(pki.intruder.key)]
        code, _, err = run(capsys, "solve", write_request(tmp_path), *tls, *intruder)
        assert code == 1 and "PERMISSION_DENIED" in err and "intruder" in err


def test_bad_connection_settings_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    request = write_request(tmp_path)
    code, _, err = run(capsys, "solve", request, "--tls", "--token-file", "t")
    assert (code, err) == (2, "dsfro: error: --tls, --token-file only apply with --server\n")
    monkeypatch.setenv("DSFRO_TOKEN", TOKEN)
    code, _, err = run(capsys, "solve", request, "--server", "10.0.0.7:50051")
    assert code == 2
    assert err.startswith("dsfro: error: refusing to send a bearer token in plaintext to 10.0.0.7")
    code, _, err = run(capsys, "solve", request, "--server", "127.0.0.1:1", "--tls-key", "k")
    assert (code, err) == (2, "dsfro: error: --tls-cert and --tls-key go together\n")
    missing = str(tmp_path / "missing")
    code, _, err = run(capsys, "solve", request, "--server", "127.0.0.1:1", "--token-file", missing)
    assert code == 2 and err.startswith(f"dsfro: error: token file {missing}: ")
