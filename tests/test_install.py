"""What an install needs: the bundled models/ and data/, one version, optional extras, and a
server that does not report SERVING before its models have loaded."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2

import solver
from solver import extras, resources
from solver.cli import main as cli
from solver.extras import MissingExtraError
from solver.offline.calibration import cli as calibrate_cli
from solver.perfmodel import load_all
from solver.perfmodel.catalog import MODELS_DIR_ENV, CatalogError
from solver.runtime.ray import RayExecutor
from solver.service.config import (
    ConfigError,
    ServerConfig,
    add_server_arguments,
    config_from_args,
)
from solver.service.server import build_server
from solver.service.servicer import SERVICE_NAME

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60.0


# ---------------------------------------------------------------- bundled files


def test_bundled_folders_are_the_repository_ones() -> None:
    # solver/_bundled/{models,data} are symlinks to the top-level folders (one source of truth).
    for name in ("models", "data"):
        link = ROOT / "solver" / "_bundled" / name
        assert link.is_symlink() and os.readlink(link) == f"../../{name}"
    assert resources.models_dir() == ROOT / "models"
    assert resources.data_dir() == ROOT / "data"
    assert resources.source_checkout() == ROOT


def test_pyproject_ships_the_bundled_files_and_reads_the_version_from_the_package() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data = meta["tool"]["setuptools"]["package-data"]["solver"]
    assert {"_bundled/models/*.json", "_bundled/data/**/*"} <= set(data)
    assert meta["project"]["dynamic"] == ["version"] and "version" not in meta["project"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "solver.__version__"}
    assert set(meta["project"]["optional-dependencies"]) >= {"ray", "plot"}
    assert not any(d.startswith(("ray", "matplotlib")) for d in meta["project"]["dependencies"]), (
        "ray and matplotlib are extras"
    )


def test_load_all_names_a_missing_or_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_all()  # the repository's files
    folder = tmp_path / "models"
    shutil.copytree(ROOT / "models", folder)
    monkeypatch.setenv(MODELS_DIR_ENV, str(folder))
    (folder / "clock_model.json").unlink()
    with pytest.raises(CatalogError, match=r"clock_model\.json: file not found"):
        load_all()
    shutil.copy(ROOT / "models" / "clock_model.json", folder)
    (folder / "architectures.json").write_text("{")
    with pytest.raises(CatalogError, match=r"architectures\.json: invalid JSON"):
        load_all()


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"dsfro {solver.__version__}\n"


def test_calibrate_outside_a_checkout_asks_where_to_write(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An installed package has no checkout: writing needs the outputs named, never site-packages.
    monkeypatch.setattr(calibrate_cli, "CHECKOUT", None)
    monkeypatch.delenv(MODELS_DIR_ENV, raising=False)
    parser = argparse.ArgumentParser()
    calibrate_cli.add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["calibrate", "--doc", "x.md", "--img", "img"])
    assert calibrate_cli.cmd_calibrate(args) == 2
    assert "--models-out" in capsys.readouterr().err


# ---------------------------------------------------------------- startup after the models


def test_the_server_is_not_serving_until_the_models_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "models"
    shutil.copytree(ROOT / "models", folder)
    (folder / "calibration.json").unlink()
    monkeypatch.setenv(MODELS_DIR_ENV, str(folder))
    server = build_server(ServerConfig(host="127.0.0.1", port=0))
    try:
        with pytest.raises(CatalogError, match=r"calibration\.json: file not found"):
            server.start()
        for name in ("", SERVICE_NAME):
            check = server.health.Check(health_pb2.HealthCheckRequest(service=name), None)
            assert check.status == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        server.stop(None)


def test_server_py_exits_2_with_one_line_naming_the_bad_file(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    shutil.copytree(ROOT / "models", folder)
    doc = json.loads((folder / "gpus.json").read_text())
    doc["gpus"][0]["idle_watts"] = -5
    (folder / "gpus.json").write_text(json.dumps(doc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSFRO_")}
    env[MODELS_DIR_ENV] = str(folder)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "server.py"), "--port", "0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith("dsfro: error: ") and f"{folder / 'gpus.json'}: entry 0" in line
    assert "idle_watts" in line


# ---------------------------------------------------------------- optional extras


def test_service_and_cli_import_neither_ray_nor_matplotlib() -> None:
    code = (
        "import sys, solver.service.servicer, solver.cli.main\n"
        "print(sorted(m for m in ('ray', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_ray_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'dsfro\[ray\]'"):
        RayExecutor("local")
    monkeypatch.setattr(extras, "available", lambda extra: extra != "ray")
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    with pytest.raises(ConfigError, match=r"--ray-address needs ray.*dsfro\[ray\]"):
        config_from_args(parser.parse_args(["--ray-address", "auto"]), {})
    # dsfro solve: a usage error before any work, not an internal error.
    small = str(ROOT / "instances" / "small.json")
    assert cli.main(["solve", small, "--ray-address", "auto"]) == 2
    assert "dsfro[ray]" in capsys.readouterr().err


def test_matplotlib_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(MissingExtraError, match=r"pip install 'dsfro\[plot\]'"):
        extras.new_figure(4, 3)


# ---------------------------------------------------------------- the client install


def test_server_modules_are_the_server_extra() -> None:
    """extras.SERVER_MODULES (how a missing one is recognised) names the import of every
    distribution of the ``server`` extra, and the plain dependencies are gRPC and protobuf."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    imports = {
        "ortools": "ortools", "numpy": "numpy", "highspy": "highspy", "pyomo": "pyomo",
        "tqdm": "tqdm", "prometheus-client": "prometheus_client",
        "python-json-logger": "pythonjsonlogger", "pydantic-settings": "pydantic_settings",
        "grpcio-reflection": "grpc_reflection",
    }  # fmt: skip
    server = {d.split("=")[0] for d in project["optional-dependencies"]["server"]}
    assert server == set(imports)
    assert {imports[d] for d in server} | {"pydantic"} == extras.SERVER_MODULES
    plain = {d.split("=")[0].split(">")[0].split("<")[0] for d in project["dependencies"]}
    assert {d.split("-")[0] for d in plain} <= {"protobuf", "grpcio", "googleapis"}


def test_the_server_commands_are_listed_for_the_client_install() -> None:
    """cli.SERVER_COMMANDS is every command but the remote ones: the client install lists
    them by name and says what to install."""
    parser = cli.build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) - {"solve", "validate", "health"} == set(cli.SERVER_COMMANDS)


BLOCK_SERVER = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
from solver.cli.main import main
import solver.client, solver.wire
code = main(sys.argv[1:])
print("loaded:", sorted(m for m in {blocked!r} if m in sys.modules))
sys.exit(code)
"""


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--help"], 0, "health"),
        (["solve", "--help"], 0, "--server HOST:PORT"),
        (["solve", "instances/small.json"], 2, "or send the request to a running service"),
        (["validate", "instances/small.json"], 2, "pip install 'dsfro[server]'"),
        (["report", "--help"], 2, "dsfro report needs the solver"),
        (["generate"], 2, "dsfro generate needs the solver"),
        (
            ["solve", "instances/small.json", "--server", "x:1", "--profile", "p.toml"],
            2,
            "a profile needs the solver",
        ),
    ],
)
def test_without_the_server_modules_the_cli_says_what_to_install(
    argv: list[str], code: int, says: str
) -> None:
    """As the client install runs it (the server's modules unimportable): the remote
    commands parse, the others exit 2 naming the extra; no solver module is loaded."""
    script = BLOCK_SERVER.format(blocked=sorted(extras.SERVER_MODULES))
    out = subprocess.run(
        [sys.executable, "-c", script, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert out.returncode == code, out.stderr
    assert says in out.stdout + out.stderr
    assert "loaded: []" in out.stdout
