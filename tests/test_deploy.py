"""The deployment files as data: deploy/kubernetes/*.yaml, Dockerfile and .dockerignore.

Every DSFRO_* variable they set must be one the server reads (solver/service/config.py, its
source and what it imports), the ConfigMap's settings must make a valid ServerConfig, probes
must be the kubelet's gRPC probes on the plaintext health port, and the pod and the image must
run as a non-root user on a read-only root filesystem. No cluster and no Docker are needed.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from solver.cli import main as cli
from solver.service import config as server_config
from solver.service import server
from solver.service.config import ServerConfig, add_server_arguments, config_from_args
from solver.service.servicer import SERVICE_NAME
from tests.tls_certs import make_pki

ROOT = Path(__file__).resolve().parent.parent
KUBE = ROOT / "deploy" / "kubernetes"
DOCKERFILE = ROOT / "Dockerfile"

MIB_PER_SOLVE = 1024
"""docs/operations.md, "Sizing": memory limit per concurrent solve for snapshots up to the xl
family (the idle server included; about 3x the measured peak of two xl solves at once)."""

_DSFRO_NAME = re.compile(r"DSFRO_[A-Z0-9_]+")


# ---------------------------------------------------------------- what the server reads


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k in value:
            yield from _strings(k)
    elif isinstance(value, (tuple, list, set, frozenset)):
        for v in value:
            yield from _strings(v)


SERVER_MODULES = (server_config, server)
"""Where `dsfro serve` reads its environment: the settings, and the log format (read before
the settings so that their errors are logged in it)."""


def server_env_names() -> frozenset[str]:
    """The DSFRO_* variables the server reads: the string literals of its modules' source, and
    the names they hold (RAY_ADDRESS_ENV is imported from the executor)."""
    names: set[str] = set()
    for module in SERVER_MODULES:
        names.update(
            node.value
            for node in ast.walk(ast.parse(inspect.getsource(module)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        )
        names.update(s for value in vars(module).values() for s in _strings(value))
    return frozenset(s for s in names if _DSFRO_NAME.fullmatch(s))


def unknown_env_names(names: Iterable[str]) -> list[str]:
    """The DSFRO_* names among ``names`` that the server does not read."""
    known = server_env_names()
    return sorted(n for n in names if n.startswith("DSFRO_") and n not in known)


# ---------------------------------------------------------------- the manifests


def _documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(KUBE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                assert isinstance(doc, dict), path
                docs.append(doc)
    return docs


def _one(kind: str) -> dict[str, Any]:
    found = [d for d in _documents() if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind} in {KUBE}, found {len(found)}"
    return found[0]


def _pod() -> dict[str, Any]:
    spec: dict[str, Any] = _one("Deployment")["spec"]["template"]["spec"]
    return spec


def _container() -> dict[str, Any]:
    containers = _pod()["containers"]
    assert len(containers) == 1
    c: dict[str, Any] = containers[0]
    return c


def _settings() -> dict[str, str]:
    """The container's environment: the ConfigMap it takes whole, then its own env."""
    c = _container()
    names = [ref["configMapRef"]["name"] for ref in c.get("envFrom", []) if "configMapRef" in ref]
    maps = {d["metadata"]["name"]: d for d in _documents() if d.get("kind") == "ConfigMap"}
    env: dict[str, str] = {}
    for name in names:
        assert name in maps, f"envFrom names ConfigMap {name!r}, which is not in {KUBE}"
        env.update({str(k): str(v) for k, v in maps[name]["data"].items()})
    for e in c.get("env", []):
        env[e["name"]] = str(e.get("value", ""))
    return env


def _container_ports() -> dict[str, int]:
    return {p["name"]: int(p["containerPort"]) for p in _container()["ports"]}


def _quantity(text: str) -> float:
    """A Kubernetes quantity: CPU in cores, memory in MiB."""
    units = {"m": 1e-3, "Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0, "M": 1e6 / 2**20, "G": 1e9 / 2**20}
    for suffix, factor in units.items():
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * factor
    return float(text)


def _server_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args([str(a) for a in _container().get("args", [])])


# ---------------------------------------------------------------- the Dockerfile


@dataclass(frozen=True)
class Instruction:
    keyword: str
    rest: str


def dockerfile(text: str) -> list[list[Instruction]]:
    """The Dockerfile's instructions (continuations joined, comments dropped), per stage."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or (line.startswith("#") and not pending):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    stages: list[list[Instruction]] = [[]]
    for line in lines:
        keyword, _, rest = line.partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        stages[-1].append(Instruction(keyword.upper(), rest.strip()))
    return stages


def _env_pairs(rest: str) -> dict[str, str]:
    pairs = {}
    for token in shlex.split(rest):
        name, sep, value = token.partition("=")
        assert sep, f"ENV without '=' (legacy form): {rest!r}"
        pairs[name] = value
    return pairs


def _resolve(text: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], m[0]), text)


# ---------------------------------------------------------------- tests


def test_every_manifest_parses_and_is_listed_in_the_kustomization() -> None:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    files = {p.name for p in KUBE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == files
    kinds = {d["kind"] for d in _documents()}
    assert {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget"} <= kinds


def test_a_misspelled_variable_is_caught() -> None:
    assert "DSFRO_PORT" in server_env_names()
    assert "DSFRO_RAY_ADDRESS" in server_env_names()  # imported, not a literal of the module
    assert unknown_env_names(["DSFRO_PORT", "DSFRO_METRIC_PORT", "PATH"]) == ["DSFRO_METRIC_PORT"]


def test_the_manifests_set_only_variables_the_server_reads() -> None:
    env = _settings()
    assert all(name.startswith("DSFRO_") for name in env), sorted(env)
    assert unknown_env_names(env) == []


def test_the_dockerfile_sets_only_variables_the_server_reads() -> None:
    names = {
        name
        for stage in dockerfile(DOCKERFILE.read_text())
        for i in stage
        if i.keyword == "ENV"
        for name in _env_pairs(i.rest)
    }
    assert {"DSFRO_HOST", "DSFRO_PORT", "DSFRO_HEALTH_PORT"} <= names
    assert unknown_env_names(names) == []


def test_the_configmap_makes_a_valid_server_config(tmp_path: Path) -> None:
    """The settings as the pod sees them, with the Secret's files (made here) at their paths."""
    env = _settings()
    pki = make_pki(tmp_path / "pki")
    files = {
        "DSFRO_TLS_CERT": pki.server.cert,
        "DSFRO_TLS_KEY": pki.server.key,
        "DSFRO_TLS_CLIENT_CA": pki.ca,
    }
    tokens = tmp_path / "tokens"
    tokens.write_text("a-token-of-at-least-thirty-two-characters-0123456789\n")
    for name, path in files.items():
        if name in env:
            env[name] = str(path)
    if "DSFRO_TOKEN_FILE" in env:
        env["DSFRO_TOKEN_FILE"] = str(tokens)
    config = config_from_args(_server_args(), env)
    ports = _container_ports()
    assert config.host == "0.0.0.0"
    assert config.port == ports["grpc"]
    assert config.metrics_port == ports["metrics"]
    assert config.reflection is False
    if hasattr(config, "health_port"):
        assert config.health_port == ports["health"]


def test_probes_are_grpc_probes_on_the_health_port() -> None:
    c = _container()
    health = _container_ports()["health"]
    assert _settings()["DSFRO_HEALTH_PORT"] == str(health)
    assert health not in (_container_ports()["grpc"], _container_ports()["metrics"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert probe in c, probe
        handlers = set(c[probe]) & {"grpc", "httpGet", "tcpSocket", "exec"}
        assert handlers == {"grpc"}, (probe, handlers)
        assert c[probe]["grpc"]["port"] == health, probe
    # Readiness follows the API's status (NOT_SERVING while a solve is stuck or workers crash
    # in a loop); liveness the whole server's, SERVING while the process answers.
    assert c["readinessProbe"]["grpc"]["service"] == SERVICE_NAME
    assert c["livenessProbe"]["grpc"].get("service", "") == ""


def test_resources_hold_the_concurrent_solves() -> None:
    resources = _container()["resources"]
    solves = int(_settings().get("DSFRO_MAX_CONCURRENT_SOLVES", ServerConfig.max_concurrent_solves))
    for side in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(resources[side]), side
    requests = {k: _quantity(str(v)) for k, v in resources["requests"].items()}
    limits = {k: _quantity(str(v)) for k, v in resources["limits"].items()}
    assert limits["memory"] >= requests["memory"]
    assert limits["cpu"] >= requests["cpu"]
    assert requests["cpu"] >= solves, "one core per concurrent solve"
    assert limits["memory"] >= MIB_PER_SOLVE * solves


def test_the_pod_runs_non_root_read_only_without_capabilities() -> None:
    pod = _pod()
    c = _container()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod.get("automountServiceAccountToken") is False
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc.get("runAsUser", pod["securityContext"]["runAsUser"]) != 0
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc.get("privileged", False) is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert not sc["capabilities"].get("add")
    volumes = {v["name"]: v for v in pod["volumes"]}
    tmp = [m for m in c["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert len(tmp) == 1 and "emptyDir" in volumes[tmp[0]["name"]]


def test_tls_and_token_files_come_from_secrets_mounted_for_rotation() -> None:
    env = _settings()
    pod = _pod()
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = _container()["volumeMounts"]
    for name in ("DSFRO_TLS_CERT", "DSFRO_TLS_KEY", "DSFRO_TLS_CLIENT_CA", "DSFRO_TOKEN_FILE"):
        path = env[name]
        under = [m for m in mounts if path.startswith(m["mountPath"].rstrip("/") + "/")]
        assert len(under) == 1, (name, path)
        mount = under[0]
        assert "secret" in volumes[mount["name"]], (name, mount)
        # A subPath mount is never updated when the Secret rotates.
        assert "subPath" not in mount and "subPathExpr" not in mount, name
        assert mount.get("readOnly") is True, name


def test_service_ports_are_container_ports_and_metrics_are_scraped() -> None:
    service = _one("Service")
    ports = _container_ports()
    selector = service["spec"]["selector"]
    labels = _one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    by_name = {p["name"]: p for p in service["spec"]["ports"]}
    assert {"grpc", "metrics"} <= set(by_name)
    for p in service["spec"]["ports"]:
        target = p.get("targetPort", p["port"])
        number = ports[target] if isinstance(target, str) else target
        assert number in ports.values(), p
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == ports["metrics"]
    assert annotations.get("prometheus.io/path", "/metrics") == "/metrics"
    pdb = _one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_termination_grace_covers_the_servers_grace_period() -> None:
    config = config_from_args(_server_args(), {})
    pre_stop = _container().get("lifecycle", {}).get("preStop", {})
    sleep = 0.0
    if "exec" in pre_stop:
        command = pre_stop["exec"]["command"]
        assert command[0] == "sleep"
        sleep = float(command[1])
    elif "sleep" in pre_stop:
        sleep = float(pre_stop["sleep"]["seconds"])
    assert _pod()["terminationGracePeriodSeconds"] > sleep + config.grace_period_seconds + 5


def test_dockerfile_is_multi_stage_non_root_with_a_healthcheck() -> None:
    stages = dockerfile(DOCKERFILE.read_text())
    global_args = {
        k: v for i in stages[0] if i.keyword == "ARG" for k, _, v in [i.rest.partition("=")]
    }
    froms = [s[0].rest for s in stages[1:]]
    assert len(froms) >= 2, "a build stage and a runtime stage"
    for image in froms:
        ref = _resolve(image.split()[0], global_args)
        name, _, tag = ref.rpartition(":")
        assert name and tag and tag != "latest" and "/" not in tag, f"unpinned base image {ref}"
    runtime = stages[-1]
    args = dict(global_args)
    args.update(
        {k: v for i in runtime if i.keyword == "ARG" for k, _, v in [i.rest.partition("=")]}
    )
    users = [_resolve(i.rest, args) for i in runtime if i.keyword == "USER"]
    assert users, "the runtime stage sets USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, f"USER {users[-1]}: numeric and non-root"
    assert "pip wheel" in " ".join(i.rest for i in stages[1] if i.keyword == "RUN")
    exposed = {
        int(p.split("/")[0]) for i in runtime if i.keyword == "EXPOSE" for p in i.rest.split()
    }
    assert set(_container_ports().values()) <= exposed
    entrypoint = [i.rest for i in runtime if i.keyword == "ENTRYPOINT"]
    assert [yaml.safe_load(e) for e in entrypoint] == [["dsfro", "serve"]]
    checks = [i.rest for i in runtime if i.keyword == "HEALTHCHECK"]
    assert len(checks) == 1
    command = checks[0].partition("CMD")[2]
    assert "dsfro health --server" in command
    assert "DSFRO_HEALTH_PORT" in command, "the plaintext health port, whatever the main port"


@pytest.mark.parametrize("command", ["serve", "health"])
def test_the_image_runs_dsfro_commands_that_exist(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """ENTRYPOINT runs `dsfro serve`, HEALTHCHECK `dsfro health` (an unknown command: 2)."""
    assert cli.main([command, "--help"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize(
    "needed", ["pyproject.toml", "README.md", "LICENSE", "solver/", "models/", "data/"]
)
def test_dockerignore_keeps_what_the_wheel_needs(needed: str) -> None:
    lines = [
        s.strip()
        for s in (ROOT / ".dockerignore").read_text().splitlines()
        if s.strip() and not s.startswith("#")
    ]
    assert lines[0] == "*", "an allow-list"
    assert f"!{needed}" in lines
    assert (ROOT / needed).exists()
