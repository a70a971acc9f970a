"""Models written by the Pyomo backend (solver.exact.backends.pyomo_backend.export_model): MPS
with the formulation's columns and rows, which HiGHS reads to the same optimum, a readable
LP, every format the CLI offers, and unknown formats refused."""

from __future__ import annotations

import re
from pathlib import Path

import highspy
import pytest

from solver.app.limits import EXPORT_FORMATS
from solver.domain import Backend
from solver.exact import formulation
from solver.exact.backends.highs import new_highs
from solver.exact.backends.pyomo_backend import export_model
from tests.backend_helpers import _instance
from tests.bruteforce import solve_exact


def _mps_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if not line.strip() or line.startswith("*"):
            continue
        if not line[0].isspace():
            current = line.split()[0]
            sections.setdefault(current, [])
        else:
            sections.setdefault(current, []).append(line)
    return sections


@pytest.mark.parametrize("name", ["tiny-migration", "tiny-power"])
def test_export_mps_has_the_formulation_s_columns_and_rows(name: str, tmp_path: Path) -> None:
    p, configs = _instance(name)
    f = formulation.build(p, configs)
    path = export_model(f, tmp_path / f"{name}.mps", "mps")
    sections = _mps_sections(path.read_text())
    rows = [line.split() for line in sections["ROWS"]]
    constraint_rows = [r for r in rows if r[0] != "N" and r[1] != "c_e_ONE_VAR_CONSTANT"]
    columns = {line.split()[0] for line in sections["COLUMNS"]} - {"ONE_VAR_CONSTANT"}
    assert len(constraint_rows) == sum(1 for _ in f.linear_rows())
    assert len(columns) == f.num_variables
    assert any(c.startswith("y(") for c in columns) and any(c.startswith("x(") for c in columns)
    assert any("gang_size" in r[1] for r in constraint_rows)


@pytest.mark.parametrize("name", ["tiny-1node", "tiny-power", "tiny-migration"])
def test_highs_reading_the_exported_mps_finds_the_same_optimum(name: str, tmp_path: Path) -> None:
    p, configs = _instance(name)
    f = formulation.build(p, configs)
    direct = solve_exact(Backend.HIGHS, f)
    assert direct.plan is not None
    path = export_model(f, tmp_path / f"{name}.mps", "mps")
    h = new_highs()
    assert h.readModel(str(path)) == highspy.HighsStatus.kOk
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(
        direct.plan.objective.total, rel=1e-6, abs=1e-9
    )


def test_export_lp_is_readable_and_names_the_variables(tmp_path: Path) -> None:
    p, configs = _instance("tiny-1node")
    f = formulation.build(p, configs)
    text = export_model(f, tmp_path / "model.lp", "lp").read_text()
    assert text.lstrip("\\* ").startswith("Source Pyomo model")
    assert re.search(r"^max\b", text, re.M)
    assert "gang_size(" in text and "y(" in text
    h = new_highs()
    assert h.readModel(str(tmp_path / "model.lp")) == highspy.HighsStatus.kOk
    assert h.getNumCol() >= f.num_variables


def test_export_rejects_an_unknown_format(tmp_path: Path) -> None:
    p, configs = _instance("tiny-1node")
    with pytest.raises(ValueError, match="unknown format"):
        export_model(formulation.build(p, configs), tmp_path / "m.nl", "nl")


def test_every_export_format_the_cli_offers_is_written(tmp_path: Path) -> None:
    p, configs = _instance("tiny-1node")
    f = formulation.build(p, configs)
    for fmt in EXPORT_FORMATS:
        out = export_model(f, tmp_path / f"m.{fmt}", fmt)
        assert out.stat().st_size > 0
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        export_model(f, tmp_path / "m.xml", "xml")
