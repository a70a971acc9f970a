"""Joining a Ray cluster (solver.runtime.ray): a real head node with token authentication on
(the default of current Ray); what a service without the token, with a wrong one, with the right
one, and at an address where nothing listens is told."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from solver.runtime.ray import RayConnectionError, explain, probe, token

TOKEN = "d5fr0" * 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    """A Ray head on loopback with RAY_AUTH_MODE=token, stopped after the module."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert ray is not None, "the ray extra is installed with the tests"
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}
    start = [
        ray,
        "start",
        "--head",
        f"--port={port}",
        "--num-cpus=1",
        "--node-ip-address=127.0.0.1",
    ]
    start += ["--include-dashboard=false", "--disable-usage-stats"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_without_the_token_the_address_the_cause_and_the_fix_are_named(head: str) -> None:
    with pytest.raises(RayConnectionError) as info:
        probe(head, environ={})
    message = str(info.value)
    assert head in message
    assert "requires token authentication" in message
    assert "RAY_AUTH_MODE=token" in message and "RAY_AUTH_TOKEN" in message


def test_a_wrong_token_is_named_as_refused(head: str) -> None:
    with pytest.raises(RayConnectionError, match="refused this service's token"):
        probe(head, environ={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "wrong"})


def test_the_right_token_passes_from_the_variable_or_a_file(head: str, tmp_path: Path) -> None:
    probe(head, environ={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN})
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(path)}
    assert token(env) == TOKEN
    probe(head, environ=env)


def test_nothing_listening_is_named_with_the_way_to_start_a_head() -> None:
    address = f"127.0.0.1:{_free_port()}"
    with pytest.raises(RayConnectionError) as info:
        probe(address, environ={})
    assert address in str(info.value) and "ray start --head" in str(info.value)


def test_an_unreadable_token_file_is_named() -> None:
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/nonexistent/token"}
    with pytest.raises(RayConnectionError, match="/nonexistent/token"):
        token(env)


def test_addresses_that_are_no_host_and_port_are_not_probed() -> None:
    probe("auto", environ={})
    probe("ray://10.0.0.1:10001", environ={})
    assert "UNKNOWN" in explain("h:1", "UNKNOWN", token_given=False)


def _executor_run(head: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """RayExecutor(head) mapping a function, in a fresh process with `env` (Ray reads its
    token settings when it is imported: a service sets them in its environment)."""
    code = (
        "import sys\n"
        "from solver.runtime.ray import RayExecutor, RayConnectionError\n"
        "try:\n"
        f"    ex = RayExecutor({head!r})\n"
        "except RayConnectionError as e:\n"
        "    print('refused:', e); sys.exit(3)\n"
        "def square(x):\n"
        "    return x * x\n"
        "def collector_on(x):\n"
        "    import gc\n"
        "    return gc.isenabled()\n"
        "print(ex.map(collector_on, [0]))\n"
        "print(ex.map(square, [-1, -2, 3]))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )


def test_the_executor_runs_on_the_cluster_with_the_token(head: str) -> None:
    done = _executor_run(head, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN})
    assert done.returncode == 0, done.stdout + done.stderr
    # a task runs as a solve does: the cyclic collector off (solver.runtime.collector)
    assert done.stdout.strip().splitlines()[-2:] == ["[False]", "[1, 4, 9]"]


def test_the_executor_without_the_token_says_what_to_set_at_once(head: str) -> None:
    done = _executor_run(head, {})
    assert done.returncode == 3, done.stdout + done.stderr
    assert head in done.stdout and "RAY_AUTH_TOKEN" in done.stdout


def test_a_decomposed_solve_that_cannot_join_its_cluster_falls_back_and_says_why() -> None:
    """No Ray cluster at the address: the solve answers with the heuristic's checked plan as a
    FALLBACK whose detail names the address and how to start a head, not an internal error."""
    import dataclasses

    from solver.app import pipeline
    from solver.app.convert import load_request_json
    from solver.app.limits import Limits
    from solver.core.solver import Solver
    from solver.domain import Backend, Termination
    from solver.scoring.checker import check_plan

    root = Path(__file__).resolve().parent.parent
    p = pipeline.to_problem(load_request_json(root / "instances" / "medium.json"), Limits())
    options = dataclasses.replace(p.options, backend=Backend.DECOMPOSED, time_budget_seconds=5)
    p = dataclasses.replace(p, options=options)
    address = f"127.0.0.1:{_free_port()}"
    solver = Solver(ray_address=address)
    try:
        result = solver.solve(p)
    finally:
        solver.close()
    assert result.stats.termination is Termination.FALLBACK
    assert f"no Ray cluster answers at {address}" in result.stats.detail
    assert "ray start --head" in result.stats.detail
    assert check_plan(p, result.plan.assignments) == []
    assert sum(a.config is not None for a in result.plan.assignments) > 0


def _control_service_pid(port: int) -> int:
    """The pid of the GCS of the head started on `port` (Linux /proc)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            argv
            and argv[0].endswith(b"gcs_server")
            and f"--gcs_server_port={port}".encode() in argv
        ):
            return int(proc.name)
    raise AssertionError(f"no gcs_server for port {port}")


@pytest.fixture
def own_head() -> Iterator[tuple[str, str]]:
    """A head of this test's own (the module's stays up) on a free port, token auth on, with
    its own temporary folder (where Ray notes the "current cluster" that ray.init() joins by
    default); its address and folder."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert ray is not None
    port = _free_port()
    folder = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths live under it
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN, "RAY_TMPDIR": folder}
    start = [ray, "start", "--head", f"--port={port}", "--num-cpus=1"]
    start += ["--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    yield f"127.0.0.1:{port}", folder
    # what the test left of it: its raylet and agents end once their control service is gone
    with contextlib.suppress(AssertionError, ProcessLookupError):
        os.kill(_control_service_pid(port), signal.SIGKILL)
    shutil.rmtree(folder, ignore_errors=True)


def test_a_cluster_that_goes_away_is_named_and_the_solve_falls_back_at_once(
    own_head: tuple[str, str],
) -> None:
    """A joined process whose cluster's control service dies: a new executor and the next map
    raise RayConnectionError naming the address (before, the one waited for the cluster until
    Ray ended the process, the other until the caller's stop), and a decomposed solve answers
    with the heuristic's checked plan and says why."""
    address, folder = own_head
    port = int(address.rsplit(":", 1)[1])
    code = (
        "import dataclasses, os, signal, sys, time\n"
        "from pathlib import Path\n"
        "from solver.app import pipeline\n"
        "from solver.app.convert import load_request_json\n"
        "from solver.app.limits import Limits\n"
        "from solver.core.solver import Solver\n"
        "from solver.domain import Backend\n"
        "from solver.runtime.ray import RayConnectionError, RayExecutor\n"
        "from solver.scoring.checker import check_plan\n"
        f"ex = RayExecutor({address!r})\n"
        "def square(x):\n"
        "    return x * x\n"
        "print('before', ex.map(square, [3]), flush=True)\n"
        f"os.kill({{gcs}}, signal.SIGKILL)\n"
        "time.sleep(0.5)\n"
        "try:\n"  # another executor of this process, as a service's next call makes
        f"    RayExecutor({address!r})\n"
        "    print('fresh joined')\n"
        "except RayConnectionError as e:\n"
        "    print('fresh', e, flush=True)\n"
        "start = time.monotonic()\n"
        "try:\n"
        "    ex.map(square, [4], stop=lambda: time.monotonic() - start > 60)\n"
        "    print('answered')\n"
        "except RayConnectionError as e:\n"
        "    print('lost', e, flush=True)\n"
        "p = pipeline.to_problem(load_request_json(Path('instances/medium.json')), Limits())\n"
        "o = dataclasses.replace(p.options, backend=Backend.DECOMPOSED, time_budget_seconds=5)\n"
        "p = dataclasses.replace(p, options=o)\n"
        "solver = Solver(ray_address=None)\n"
        "solver._given = ex\n"
        "r = solver.solve(p)\n"
        "print('solve', r.stats.termination.name, check_plan(p, r.plan.assignments) == [],\n"
        "      sum(a.config is not None for a in r.plan.assignments), flush=True)\n"
        "print('detail', r.stats.detail, flush=True)\n"
        "os._exit(0)\n"
    ).replace("{gcs}", str(_control_service_pid(port)))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN, "RAY_TMPDIR": folder},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    lines = {line.split(" ", 1)[0]: line for line in done.stdout.splitlines()}
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert lines["before"] == "before [9]"
    assert lines["fresh"].startswith(
        f"fresh lost the Ray cluster: no Ray cluster answers at {address}"
    )
    assert lines["lost"].startswith(
        f"lost lost the Ray cluster: no Ray cluster answers at {address}"
    )
    termination, checked, placed = lines["solve"].split()[1:]
    assert (termination, checked) == ("FALLBACK", "True") and int(placed) > 0
    # the heuristic's plan, not the quick plan of a solve stopped at its deadline
    assert address in lines["detail"] and "stopped on request" not in lines["detail"]
