"""The backend-neutral formulation: its data, big-M rewriting, hints and extraction."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.domain import GpuType, ObjectiveWeights, Problem
from solver.exact import formulation
from solver.exact.backends.cpsat import rounding_slack
from solver.exact.milp import INF, Formulation
from solver.exact.milp_parts import Constraint, ObjectiveGroup, Variable
from solver.offline.generate import generate, spec_from_args
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.checker import check_plan
from solver.search.heuristic import Heuristic
from tests.factories import V100, cluster, job, node, point, problem, random_tiny, running
from tests.reference_model import RefFormulation, build_reference

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ["tiny-1node", "tiny-power", "tiny-migration", "small"]


def _load(name: str) -> Problem:
    return problem_from_proto(load_request_json(ROOT / "instances" / f"{name}.json"), Limits())


def _holds(f: Formulation, c: Constraint, values: Mapping[int, float]) -> bool:
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
    assert rounding_slack(f, scale) <= (worst + rest * 2 * 8) / scale + 1e-12
    assert rounding_slack(f, scale) >= worst / scale


@pytest.mark.parametrize("name", INSTANCES)
def test_estimate_size_is_close_to_the_real_size(name: str) -> None:
    p = _load(name)
    configs = build_config_set(p)
    f = formulation.build(p, configs)
    estimate = formulation.estimate_size(p, configs)
    assert 0.5 * f.num_variables <= estimate <= 2 * f.num_variables
    assert math.isfinite(f.offset)


@pytest.mark.parametrize("mix", ["hybrid", "hetero-power"])
def test_estimate_size_is_from_above_with_rack_budgets(mix: str) -> None:
    """One variable per configuration and budgeted rack: without them the estimate was 0.66x
    what was built, and a model too big to presolve within its limit was solved in process."""
    args = ["--nodes", "24", "--jobs", "48", "--seed", "5", "--mix", mix, "--running-share", "0.5"]
    request = generate(spec_from_args([*args, "--rack-power-budget-fraction", "0.8"]))
    p = problem_from_proto(request, Limits())
    assert p.cluster.rack_power_budgets_watts
    configs = build_config_set(p)
    built = formulation.build(p, configs).num_variables
    assert built <= formulation.estimate_size(p, configs) <= 1.35 * built


# ---------------------------------------------------------------- the same model as the reference


Canonical = dict[str, object]


def canonical(
    variables: Sequence[Variable],
    constraints: Sequence[Constraint],
    linear: Iterable[tuple[str, Sequence[tuple[int, int]], float, float]],
    objective: Iterable[tuple[int, float]],
    offset: float,
    groups: Iterable[ObjectiveGroup],
) -> Canonical:
    """A model by names only: variables' bounds and integrality, rows as (family, name, lo, hi,
    sorted terms, indicator), big-M rows, objective, offset and groups; order left out."""
    names = [v.name for v in variables]

    def terms(ts: Sequence[tuple[int, int]]) -> tuple[tuple[str, int], ...]:
        return tuple(sorted((names[v], k) for v, k in ts))

    coefficients: dict[str, float] = {}
    for v, c in objective:
        coefficients[names[v]] = coefficients.get(names[v], 0.0) + c
    return {
        "variables": {v.name: (v.lb, v.ub, v.integer) for v in variables},
        "rows": sorted(
            (
                c.family,
                c.name,
                c.lo,
                c.hi,
                terms(c.terms),
                None if c.enforce is None else names[c.enforce],
            )
            for c in constraints
        ),
        "linear": sorted((name, lo, hi, terms(ts)) for name, ts, lo, hi in linear),
        "objective": coefficients,
        "offset": offset,
        "groups": sorted(
            (tuple(sorted(names[v] for v in g.variables)), g.max_active) for g in groups
        ),
    }


def _new(f: Formulation) -> Canonical:
    linear = ((name, ts, lo, hi) for _, name, ts, lo, hi in f.linear_rows())
    return canonical(f.variables, f.constraints, linear, f.objective, f.offset, f.objective_groups)


def _reference(f: RefFormulation) -> Canonical:
    linear = ((name, ts, lo, hi) for _, name, ts, lo, hi in f.linear_rows())
    return canonical(f.variables, f.constraints, linear, f.objective, f.offset, f.objective_groups)


def _same_model(p: Problem, configs: ConfigSet, leave_out: str | None = None) -> None:
    families = [fam for fam in formulation.CONSTRAINT_FAMILIES if fam.__name__ != leave_out]
    f = formulation.build(p, configs, families)
    ref = build_reference(p, configs, [fam.__name__ for fam in families])
    new, old = _new(f), _reference(ref)
    for key in old:
        assert new[key] == old[key], key
    # Also in the same order: the solvers see the model they saw before.
    assert [v.name for v in f.variables] == [v.name for v in ref.variables]
    assert [c.name for c in f.constraints] == [c.name for c in ref.constraints]
    assert [c.terms for c in f.constraints] == [c.terms for c in ref.constraints]
    assert [name for _, name, _, _, _ in f.linear_rows()] == [
        name for _, name, _, _, _ in ref.linear_rows()
    ]
    assert rounding_slack(f, 1e6) == pytest.approx(ref.rounding_slack(1e6), rel=1e-12, abs=1e-18)


def _with_rack_budgets(p: Problem, share: float) -> Problem:
    """`p` with a budget on every other rack (share of its GPUs' TDP), a budget on a rack without
    nodes, and a locality weight."""
    c = p.cluster
    racks = sorted({n.rack for n in c.nodes})
    tdp = {
        r: sum(n.gpu_count * c.gpu_types[n.gpu_type].tdp_watts for n in c.nodes if n.rack == r)
        for r in racks
    }
    budgets = {r: share * tdp[r] for r in racks[::2]} | {"empty-rack": 100.0}
    cluster_ = dataclasses.replace(c, rack_power_budgets_watts=budgets)
    weights = dataclasses.replace(p.weights, locality=max(p.weights.locality, 0.013))
    return dataclasses.replace(p, cluster=cluster_, weights=weights)


@pytest.mark.parametrize("name", [*INSTANCES, "modern-power", "pai"])
def test_the_model_is_the_reference_model_on_the_bundled_instances(name: str) -> None:
    p = _load(name)
    _same_model(p, build_config_set(p))


@pytest.mark.parametrize("name", ["small", "tiny-migration", "modern-power"])
def test_the_model_is_the_reference_model_with_rack_budgets(name: str) -> None:
    p = _with_rack_budgets(_load(name), 0.6)
    _same_model(p, build_config_set(p))


@pytest.mark.parametrize("seed", range(12))
def test_the_model_is_the_reference_model_on_random_tiny_instances(seed: int) -> None:
    p = random_tiny(seed)
    configs = build_config_set(p)
    _same_model(p, configs)
    for family in formulation.CONSTRAINT_FAMILIES:
        if family is not formulation.add_placement_vars:  # the others need its variables
            _same_model(p, configs, leave_out=family.__name__)


def test_the_model_is_the_reference_model_on_edge_cases() -> None:
    c = cluster(node("n0"), node("n1", rack="r1"), node("v0", V100, rack="r1"))
    stuck = job("s", point(4, 400), current=running("A100", {"n0": (0, 1)}), preemptible=False)
    moved = job("m", point(2, 200), current=running("A100", {"gone": (0, 1)}))
    wide = job("w", point(8, 800, tp=4), point(4, 500, tp=2), point(2, 300, gpu=V100))
    queued = job("none", point(4, 100, gpu=GpuType("H100", 80, 900, 3000, 900, 700, 60, (1980,))))
    p = problem(c, stuck, moved, wide, queued, weights=ObjectiveWeights(1, 0.3, 0.2, 0.05, 0.1))
    base = build_config_set(p)
    kept = tuple(cfg._replace(kept_only=True) for cfg in base.by_job["m"])
    configs = ConfigSet({**base.by_job, "m": kept}, base.best_samples_per_second, 0)
    _same_model(p, configs)
    # An empty rack power row that can't hold: a contradiction, in both.
    tight = dataclasses.replace(
        c, rack_power_budgets_watts={"nowhere": -5.0}, power_budget_watts=1.0
    )
    _same_model(dataclasses.replace(p, cluster=tight), configs)
