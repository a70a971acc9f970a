"""The wheel on its own, as a user installs it: built from the source tree, installed into new
virtual environments (not editable, no inherited site-packages; dependencies from the package
index), the server install (``dsfro[server]``) and the client install (``dsfro``: gRPC and
protobuf only), and run from a directory outside the clone with a clean environment (no
PYTHONPATH, no DSFRO_* settings).

Slow (tens of seconds: a venv and its dependencies); the fixtures build and install once for
the module. The server started from the install is killed whatever happens.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

import solver
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
CLIENT_DISTRIBUTIONS = (
    "protobuf",
    "grpcio",
    "grpcio-health-checking",
    "grpcio-status",
    "googleapis-common-protos",
)
"""What the client install requires: gRPC and protobuf, and their own health and status
protos."""
INSTALL_TIMEOUT = 900.0
"""Building the wheel, making the venv, installing the dependencies (cold cache: downloads)."""
TIMEOUT = 120.0
"""Any one command of the installed package, and the server's start."""
_TOP_SKIP = {".git", ".venv", "build", "dist", "results", ".hypothesis"}
_SKIP = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}


def _ignore(folder: str, names: list[str]) -> set[str]:
    skip = {n for n in names if n in _SKIP or n.endswith(".egg-info")}
    if Path(folder) == ROOT:
        skip |= _TOP_SKIP & set(names)
    return skip


def _run(
    argv: list[str | Path], *, cwd: Path, env: dict[str, str], timeout: float = TIMEOUT
) -> str:
    """stdout of a command that must succeed; its output is shown if it does not."""
    proc = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _clean_env(venv: Path) -> dict[str, str]:
    """This environment without Python path settings, virtualenv or DSFRO_* variables; the new
    venv first on PATH, the clone nowhere on it."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("DSFRO_")}
    path = [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and not Path(p).resolve().is_relative_to(ROOT)
    ]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built by pip from a copy of the source tree (so nothing is written into the
    clone and no stale build/ of it can leak in); symlinks are copied as symlinks."""
    base = tmp_path_factory.mktemp("wheel")
    src, out = base / "src", base / "dist"
    shutil.copytree(ROOT, src, symlinks=True, ignore=_ignore)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    _run(
        [sys.executable, "-m", "pip", "wheel", src, "--no-deps", "--quiet", "-w", out],
        cwd=base,
        env=env,
        timeout=INSTALL_TIMEOUT,
    )
    [built] = out.glob("dsfro-*.whl")
    return built


def _pip(venv: Path) -> list[str | Path]:
    """This interpreter's pip acting on `venv` (``--python``): the venv needs no pip of its own."""
    return [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]


def _install(base: Path, target: str) -> Path:
    """A new venv with `target` installed and compiled, as pip does, but on every core
    (pip's own compilation of the dependencies' thousands of files took 30 of 40 s)."""
    venv = base / "venv"
    env = _clean_env(venv)
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=base, env=env)
    _run(
        [*_pip(venv), "install", "--quiet", "--no-compile", target],
        cwd=base,
        env=env,
        timeout=INSTALL_TIMEOUT,
    )
    python = venv / "bin" / "python"
    _run([python, "-m", "compileall", "-q", "-j", "0", venv / "lib"], cwd=base, env=env)
    return venv


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the server install (``dsfro[server]``, no other extra)."""
    return _install(tmp_path_factory.mktemp("venv"), f"{wheel}[server]")


@pytest.fixture(scope="module")
def client_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the client install (``dsfro``, no extra)."""
    return _install(tmp_path_factory.mktemp("client"), str(wheel))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the clone, with a copy of a benchmark instance."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    shutil.copy(ROOT / "instances" / "small.json", tmp_path / "small.json")
    return tmp_path


def test_the_wheel_ships_models_data_licence_and_version(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = z.read(metadata).decode()
    models = {f"solver/_bundled/models/{p.name}" for p in (ROOT / "models").glob("*.json")}
    data = {
        f"solver/_bundled/data/{p.relative_to(ROOT / 'data').as_posix()}"
        for p in (ROOT / "data").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert len(models) == 5 and len(data) > 20  # gpus, architectures, clock, calibration, MIG
    assert models <= names and data <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert f"\nVersion: {solver.__version__}\n" in meta
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist: ")]
    server = ("ortools", "numpy", "highspy", "pyomo", "pydantic-settings", "grpcio-reflection")
    extras = [("ray", "ray"), ("plot", "matplotlib"), *(("server", m) for m in server)]
    for extra, module in extras:
        [line] = [r for r in requires if r.startswith(f"Requires-Dist: {module}=")]
        assert f'extra == "{extra}"' in line  # an extra, not a dependency
    plain = {
        r.split()[1].split("=")[0].split("<")[0].split(">")[0]
        for r in requires
        if "extra ==" not in r
    }
    assert plain == set(CLIENT_DISTRIBUTIONS)


def test_the_installed_commands_work_outside_the_clone(venv: Path, outside: Path) -> None:
    env, bin_ = _clean_env(venv), venv / "bin"
    where = _run(
        [
            bin_ / "python",
            "-c",
            "import solver, importlib.util as u; print(solver.__file__); "
            "print(u.find_spec('ray') is None and u.find_spec('matplotlib') is None)",
        ],
        cwd=outside,
        env=env,
    ).split()
    assert Path(where[0]).is_relative_to(venv) and where[1] == "True"  # no extras: none needed

    assert _run([bin_ / "dsfro", "--version"], cwd=outside, env=env) == (
        f"dsfro {solver.__version__}\n"
    )

    out = _run(
        [bin_ / "dsfro", "solve", "small.json", "--time-budget", "5s", "--json"],
        cwd=outside,
        env=env,
    )
    response = json_format.Parse(out, pb.SolveResponse())
    request = json_format.Parse((outside / "small.json").read_text(), pb.SolveRequest())
    assert {a.job for a in response.plan.assignments} == {j.name for j in request.jobs}
    assert any(a.placement for a in response.plan.assignments)
    assert response.stats.objective == pytest.approx(response.plan.objective.total)
    table = _run(
        [bin_ / "dsfro", "solve", "small.json", "--time-budget", "5s"], cwd=outside, env=env
    )
    assert table.startswith("JOB") and "termination" in table

    # data/ in the wheel: an instance generated from the public extracts, and the calibration
    # refitted from the measurements (compared with the wheel's models/calibration.json)
    _run(
        [
            bin_ / "dsfro",
            "generate",
            "--nodes",
            "6",
            "--jobs",
            "8",
            "--seed",
            "3",
            "--out",
            "gen.json",
        ],
        cwd=outside,
        env=env,
    )
    generated = json.loads((outside / "gen.json").read_text())
    assert len(generated["jobs"]) == 8
    assert "up to date" in _run([bin_ / "dsfro", "calibrate", "--check"], cwd=outside, env=env)

    # The simulator's default scenario is built from the wheel's data/ (Philly window).
    summary = _run(
        [
            bin_ / "dsfro",
            "simulate",
            "--scenario",
            "philly-a",
            "--policy",
            "fifo",
            "--max-time",
            "2h",
            "--out",
            "sim",
        ],
        cwd=outside,
        env=env,
    )
    assert summary.startswith("philly-a / fifo / seed 1")
    assert (outside / "sim" / "philly-a-fifo-s1-summary.json").is_file()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_serving(channel: grpc.Channel, proc: subprocess.Popen[bytes], log: Path) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the server exited {proc.returncode}:\n{log.read_text()}"
        try:
            check = health.Check(health_pb2.HealthCheckRequest(), timeout=2.0)
            if check.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass  # not listening yet
        time.sleep(0.2)
    raise AssertionError(f"the server did not report SERVING:\n{log.read_text()}")


@pytest.fixture
def server(venv: Path, outside: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """``dsfro serve`` of the install on a free loopback port; killed whatever happens."""
    port, log = _free_port(), outside / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(venv / "bin" / "dsfro"), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=outside,
            env=_clean_env(venv),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        yield proc, port, log
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(TIMEOUT)


def test_the_installed_server_solves_and_evaluates(
    server: tuple[subprocess.Popen[bytes], int, Path], outside: Path
) -> None:
    proc, port, log = server
    request = json_format.Parse((outside / "small.json").read_text(), pb.SolveRequest())
    request.options.time_budget.FromSeconds(5)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        _wait_serving(channel, proc, log)
        stub = scheduler_pb2_grpc.SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
        info = stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=TIMEOUT)
        assert info.version == solver.__version__
        response = stub.Solve(request, timeout=TIMEOUT)
        assert {a.job for a in response.plan.assignments} == {j.name for j in request.jobs}
        evaluated = stub.EvaluatePlan(
            pb.EvaluatePlanRequest(request=request, plan=response.plan), timeout=TIMEOUT
        )
        assert evaluated.valid, list(evaluated.violations)
        assert evaluated.objective.total == pytest.approx(response.plan.objective.total)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(TIMEOUT) == 0, log.read_text()


CLIENT_SCRIPT = """
import json, sys
from pathlib import Path
from solver.client import Client
from solver.wire import SolveRequest, request_from_dict

port, path = sys.argv[1], Path(sys.argv[2])
text = path.read_text()
data = json.loads(text)
data["options"] = {"timeBudget": "2s"}
with Client(f"127.0.0.1:{port}") as c:
    as_dict = c.solve(data)
    as_text = c.solve(json.dumps(data))
    as_message = c.solve(request_from_dict(data))
    assert isinstance(request_from_dict(data), SolveRequest)
    checked = c.evaluate(data, as_dict.plan)
    try:
        c.solve({"jobs": [{"nam": "x"}]})
    except ValueError as e:
        bad = str(e)
    else:
        bad = ""
modules = [m for m in ("numpy", "ortools", "highspy", "pyomo") if m in sys.modules]
print(json.dumps({
    "jobs": [len(r.plan.assignments) for r in (as_dict, as_text, as_message)],
    "valid": checked.valid, "bad": bad, "loaded": modules,
}))
"""


def test_a_client_install_is_grpc_and_protobuf_and_calls_the_server(
    client_venv: Path, server: tuple[subprocess.Popen[bytes], int, Path], outside: Path
) -> None:
    """The client install: its distributions are gRPC's and protobuf's, the solver's are not
    importable; the client takes a snapshot as Python data, JSON text or a message; the
    CLI's remote commands work and the others say what to install."""
    env, bin_ = _clean_env(client_venv), client_venv / "bin"
    listed = json.loads(
        _run([*_pip(client_venv), "list", "--format", "json"], cwd=outside, env=env)
    )
    installed = {d["name"].lower().replace("_", "-") for d in listed}
    extra = installed - {"dsfro", "pip", "setuptools", "wheel", *CLIENT_DISTRIBUTIONS}
    assert extra <= {"typing-extensions"}, extra  # grpcio's own dependency
    proc, port, log = server
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        _wait_serving(channel, proc, log)

    got = json.loads(
        _run([bin_ / "python", "-c", CLIENT_SCRIPT, str(port), "small.json"], cwd=outside, env=env)
    )
    jobs = len(json.loads((outside / "small.json").read_text())["jobs"])
    assert got["jobs"] == [jobs] * 3 and got["valid"] is True and got["loaded"] == []
    assert "nam" in got["bad"]  # the unknown field is named, before any call

    server_flag = ["--server", f"127.0.0.1:{port}"]
    assert "SERVING" in _run([bin_ / "dsfro", "health", *server_flag], cwd=outside, env=env)
    out = _run(
        [bin_ / "dsfro", "solve", "small.json", *server_flag, "--time-budget", "2s", "--json"],
        cwd=outside,
        env=env,
    )
    assert len(json_format.Parse(out, pb.SolveResponse()).plan.assignments) == jobs
    assert _run(
        [bin_ / "dsfro", "validate", "small.json", *server_flag], cwd=outside, env=env
    ).startswith(f"OK: {jobs} jobs")

    for argv in (["solve", "small.json"], ["simulate", "--scenario", "philly-a"], ["serve"]):
        proc_ = subprocess.run(
            [str(bin_ / "dsfro"), *argv],
            cwd=outside,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert proc_.returncode == 2, proc_.stderr
        assert f"dsfro {argv[0]} needs the solver" in proc_.stderr
        assert "pip install 'dsfro[server]'" in proc_.stderr
