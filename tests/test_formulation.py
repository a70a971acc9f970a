"""The backend-neutral formulation: its data, big-M rewriting, hints and extraction."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from solver.api.convert import load_request_json, problem_from_proto
from solver.api.settings import Limits
from solver.domain import Problem
from solver.exact import formulation
from solver.exact.model import INF, Constraint, Formulation
from solver.model.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.search.heuristic import Heuristic
from tests.factories import cluster, job, node, point, problem, random_tiny, running

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ["tiny-1node", "tiny-power", "tiny-migration", "small"]


def _load(name: str) -> Problem:
    return problem_from_proto(load_request_json(ROOT / "instances" / f"{name}.json"), Limits())


def _holds(f: Formulation, c: Constraint, values: dict[int, float]) -> bool:
    if c.enforce is not None and values.get(c.enforce, 0.0) < 0.5:
        return True
    activity = sum(k * values.get(v, 0.0) for v, k in c.terms)
    return c.lo - 1e-9 <= activity <= c.hi + 1e-9


@pytest.mark.parametrize("name", INSTANCES)
def test_rows_have_integer_coefficients_and_bounds(name: str) -> None:
    p = _load(name)
    f = formulation.build(p, build_config_set(p))
    assert f.constraints
    for c in f.constraints:
        assert all(isinstance(k, int) and k != 0 for _, k in c.terms), c.name
        for bound in (c.lo, c.hi):
            assert bound in (-INF, INF) or bound == int(bound), c.name
        assert c.enforce is None or f.variables[c.enforce].binary


@pytest.mark.parametrize("name", INSTANCES)
def test_names_are_unique(name: str) -> None:
    p = _load(name)
    f = formulation.build(p, build_config_set(p))
    names = [v.name for v in f.variables]
    assert len(set(names)) == len(names)
    rows = [c.name for c in f.constraints]
    assert len(set(rows)) == len(rows)
    kinds = {n.partition("[")[0] for n in names}
    row_kinds = {n.partition("[")[0] for n in rows}
    assert not kinds & row_kinds  # one namespace in Pyomo and in written files
    assert {"y", "x", "z", "r"} <= kinds
    assert {"one_config", "gang_size", "type_match", "node_used"} <= row_kinds


@pytest.mark.parametrize("name", [*INSTANCES, "modern-power"])
def test_the_hint_of_a_checked_plan_satisfies_every_row(name: str) -> None:
    # modern-power: a cluster budget the heuristic fills to within watts of its limit.
    p = _load(name)
    configs = build_config_set(p)
    plan = Heuristic(p, configs).run(0.0)
    assert not check_plan(p, plan.assignments)
    f = formulation.build(p, configs)
    values = formulation.hint(f, plan)
    assert set(values) == set(range(f.num_variables))  # a complete start
    for v, value in values.items():
        var = f.variables[v]
        assert var.lb <= value <= var.ub, var.name
    broken = [c.name for c in f.constraints if not _holds(f, c, values)]
    assert broken == []
    objective = f.offset + sum(k * values[v] for v, k in f.objective)
    assert objective == pytest.approx(plan.objective.total, abs=1e-9)
    back = formulation.extract(f, [values[i] for i in range(f.num_variables)])
    assert back.objective == plan.objective  # the same decisions (GPU indices may differ)
    for a, b in zip(back.assignments, plan.assignments, strict=True):
        assert (a.config, a.gpus_per_node(), a.migrated) == (
            b.config,
            b.gpus_per_node(),
            b.migrated,
        )


@pytest.mark.parametrize("seed", range(6))
def test_big_m_rows_hold_exactly_when_the_indicator_does(seed: int) -> None:
    """Every assignment within the bounds: the rewritten rows hold iff b = 0 or the row does."""
    p = random_tiny(seed)
    f = formulation.build(p, build_config_set(p))
    by_constraint: dict[str, list[tuple[tuple[tuple[int, int], ...], float, float]]] = {}
    for c, _, terms, lo, hi in f.linear_rows():
        by_constraint.setdefault(c.name, []).append((terms, lo, hi))
    checked = 0
    for c in f.constraints:
        if c.enforce is None:
            assert by_constraint[c.name] == [(c.terms, c.lo, c.hi)]
            continue
        rows = by_constraint.get(c.name, [])
        variables = sorted({v for v, _ in c.terms} | {c.enforce})
        ranges = [range(int(f.variables[v].lb), int(f.variables[v].ub) + 1) for v in variables]
        for point_ in itertools.product(*ranges):
            values = dict(zip(variables, map(float, point_), strict=True))
            linear = all(lo <= sum(k * values[v] for v, k in terms) <= hi for terms, lo, hi in rows)
            assert linear == _holds(f, c, values), (c.name, values)
            checked += 1
    assert checked > 0


def test_big_m_is_the_tightest_the_bounds_allow() -> None:
    p = problem(cluster(node("n0")), job("a", point(8, 800, tp=4), point(4, 500, tp=2)))
    f = formulation.build(p, build_config_set(p))
    rows = {name: (terms, lo, hi) for _, name, terms, lo, hi in f.linear_rows()}
    # x - 4 q = 0 when tp = 4, with x in [0, 8], q in [0, 4]: range [-16, 8].
    terms, lo, hi = rows["tp_groups[a,n0,4,ub]"]
    assert (lo, hi) == (-INF, 8) and dict(terms)[f.tp["a", 4]] == 8
    terms, lo, hi = rows["tp_groups[a,n0,4,lb]"]
    assert (lo, hi) == (-16, INF) and dict(terms)[f.tp["a", 4]] == -16


def test_an_unkeepable_non_preemptible_job_is_a_contradiction() -> None:
    c = cluster(node("n0"))
    a = job("a", point(4, 400), current=running("A100", {"n0": (0, 1)}), preemptible=False)
    p = problem(c, a)
    f = formulation.build(p, build_config_set(p))
    [marker] = [v for v in f.variables if v.name.startswith("infeasible[")]
    assert (marker.lb, marker.ub) == (1, 1)
    [row] = [c for c in f.constraints if c.name.startswith("contradiction[")]
    assert row.family == "migration" and row.hi == 0


def test_a_non_preemptible_job_that_can_stay_must_keep() -> None:
    c = cluster(node("n0"))
    a = job("a", point(4, 400), current=running("A100", {"n0": (0, 1, 2, 3)}), preemptible=False)
    p = problem(c, a)
    f = formulation.build(p, build_config_set(p))
    keep = f.variables[f.keep["a"]]
    assert (keep.lb, keep.ub) == (1, 1)


def test_row_bounds_must_be_integers() -> None:
    p = problem(cluster(node("n0")), job("a", point(4, 400)))
    f = formulation.build(p, build_config_set(p))
    with pytest.raises(ValueError, match="integers"):
        f.add_row("test", "bad[0]", [(0, 1)], hi=0.5)


def test_rounding_slack_counts_each_group_once() -> None:
    p = problem(cluster(node("n0")), job("a", point(4, 400), point(2, 250)))
    f = formulation.build(p, build_config_set(p))
    scale = 1000.0
    ys = [f.y["a", i] for i in range(len(f.configs.by_job["a"]))]
    errors = {v: abs(round(c * scale) - c * scale) for v, c in f.objective}
    worst = max(errors[v] for v in ys)
    rest = sum(e for v, e in errors.items() if v not in ys)
    assert f.rounding_slack(scale) <= (worst + rest * 2 * 8) / scale + 1e-12
    assert f.rounding_slack(scale) >= worst / scale


@pytest.mark.parametrize("name", INSTANCES)
def test_estimate_size_is_close_to_the_real_size(name: str) -> None:
    p = _load(name)
    configs = build_config_set(p)
    f = formulation.build(p, configs)
    estimate = formulation.estimate_size(p, configs)
    assert 0.5 * f.num_variables <= estimate <= 2 * f.num_variables
    assert math.isfinite(f.offset)
