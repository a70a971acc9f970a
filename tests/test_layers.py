"""Limits that regress quietly when the next feature lands: the size of every module, and the
direction of every import between the package's layers (no upward arrow, no cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 450
"""The longest a module may be, tests and scripts included (a bigger program is a package)."""

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "solver.fairness",
        "solver.queues",
        "solver.power_states",
        "solver.grid",
        "solver.weights",
        "solver.preferences",
        "solver.memos",
    ),
    ("solver.mig",),
    ("solver", "solver.domain", "solver.extras", "solver.files", "solver.resources", "solver.wire"),
    ("solver.client", "solver.runtime"),
    ("solver.perfmodel",),
    ("solver.scoring",),
    ("solver.exact",),
    ("solver.search",),
    ("solver.core",),
    ("solver.app",),
    ("solver.offline",),
    ("solver.simulate",),
    ("solver.service",),
    ("solver.cli",),
    ("solver.slurm",),
)
"""The package's layers, lowest first: a module imports only from its own group and from
groups of lower layers (lazily inside a function too: a lazy import is still a dependency)."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "solver").rglob("*.py"):
        if "_proto" in path.parts or "_bundled" in path.parts:
            continue
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _group(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _rank(group: str) -> int:
    for rank, groups in enumerate(LAYERS):
        if group in groups:
            return rank
    raise AssertionError(f"{group} is in no layer of tests/test_layers.py: add it")


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            targets = [module, *(f"{module}.{a.name}" for a in node.names)]
        found |= {t for t in targets if t in known and t != name}
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_no_module_is_over_the_limit() -> None:
    files = [
        *(ROOT / "solver").rglob("*.py"),
        *(ROOT / "scripts").rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        ROOT / "server.py",
    ]
    long = {
        str(p.relative_to(ROOT)): n
        for p in files
        if "_proto" not in p.parts and (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_every_import_points_down_the_layers(graph: dict[str, set[str]]) -> None:
    upward = sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if _group(a) != _group(b) and _rank(_group(b)) >= _rank(_group(a))
    )
    assert upward == []


def test_the_client_and_the_wire_need_nothing_of_the_solver(graph: dict[str, set[str]]) -> None:
    """A scheduler installs the client alone: it may import the wire types only."""
    for name, targets in graph.items():
        if _group(name) in ("solver.client", "solver.wire"):
            assert {_group(t) for t in targets} <= {"solver.client", "solver.wire"}, name


def test_the_slurm_adapter_needs_only_the_client(graph: dict[str, set[str]]) -> None:
    """dsfro-slurm runs beside Slurm with the client install: the client, the wire types, the
    package root and its atomic files (standard library only), nothing of the solver."""
    for name, targets in graph.items():
        if _group(name) == "solver.slurm":
            allowed = {"solver", "solver.client", "solver.files", "solver.wire", "solver.slurm"}
            assert {_group(t) for t in targets} <= allowed, name


def test_no_import_cycle_between_modules(graph: dict[str, set[str]]) -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_checker_derives_power_on_its_own(graph: dict[str, set[str]]) -> None:
    """The power-budget arithmetic is one function the solver paths share
    (solver.perfmodel.budgets); the checker re-derives it on purpose, to catch its errors."""
    assert "solver.perfmodel.budgets" not in graph["solver.scoring.checker"]
    users = {a for a, targets in graph.items() if "solver.perfmodel.budgets" in targets}
    assert {"solver.search.bound", "solver.exact.budgets", "solver.search.state"} <= users


def test_a_violation_is_seen(tmp_path: Path) -> None:
    """The scan itself: an upward import and a relative one are found."""
    (tmp_path / "a.py").write_text("from solver.cli import main\nfrom . import b\n")
    known = {"solver.domain": tmp_path / "a.py", "solver.cli": Path(), "solver.b": Path()}
    assert _imports("solver.domain", tmp_path / "a.py", known) == {"solver.cli", "solver.b"}
    assert _rank(_group("solver.cli")) > _rank(_group("solver.domain"))
    with pytest.raises(AssertionError, match="in no layer"):
        _rank("solver.newpackage")
