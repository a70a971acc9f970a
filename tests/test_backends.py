"""The exact backends on one formulation: every constraint family on its own, on every installed
backend; the same optimum everywhere; honest bounds; warm starts; exported models.

A family test builds an instance on which the family binds: the model without it breaks the
rule (shown by the checker on the solver's values, read as literally as possible), and the full
model's plan passes the checker.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import highspy
import pytest

from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import EXPORT_FORMATS, Limits
from solver.domain import (
    Backend,
    GpuSlice,
    JobAssignment,
    JobState,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    Problem,
)
from solver.exact import formulation
from solver.exact.backends import (
    ExactOptions,
    ExactOutcome,
    SolverStatus,
    exact_backends,
    get_backend,
    outcome,
    register_backend,
)
from solver.exact.backends.highs import new_highs
from solver.exact.backends.pyomo_backend import KNOWN_SOLVERS, available_solvers, export_model
from solver.exact.milp import Formulation
from solver.exact.solve import ExactResult, plan_of, solve_full
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.heuristic import Heuristic
from tests.bruteforce import EXACT_BACKENDS, enumerated, solve_exact
from tests.factories import V100, cluster, job, node, only_throughput, point, problem, running

ROOT = Path(__file__).resolve().parent.parent
Family = Callable[[Formulation], None]
by_backend = pytest.mark.parametrize("backend", EXACT_BACKENDS, ids=lambda b: b.value)


def solve(p: Problem, backend: Backend, leave_out: Family | None = None) -> Plan:
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not leave_out]
    outcome = solve_exact(backend, formulation.build(p, build_config_set(p), families))
    assert outcome.status is SolverStatus.OPTIMAL, outcome.detail
    assert outcome.plan is not None
    return outcome.plan


def broken(p: Problem, plan: Plan) -> set[str]:
    return {v.constraint for v in check_plan(p, plan.assignments)}


def unchecked(p: Problem, backend: Backend, leave_out: Family) -> Plan:
    """The optimum of the model without one family, turned into a plan as literally as possible.

    GPU indices are handed out in order per node and wrap around when a node is over-committed,
    so that capacity and grouping problems show in the checker.
    """
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not leave_out]
    configs = build_config_set(p)
    f = formulation.build(p, configs, families)
    outcome = solve_exact(backend, f)
    assert outcome.values is not None, outcome.detail
    values = outcome.values
    taken: dict[str, int] = {}
    out = []
    for j in p.jobs:
        chosen = [c for i, c in enumerate(configs.by_job[j.name]) if values[f.y[j.name, i]] > 0.5]
        if not chosen:
            out.append(JobAssignment(j.name, JobState.QUEUED))
            continue
        placement = []
        for n in f.candidates[j.name]:
            k = round(values[f.x[j.name, n.name]])
            if k:
                free = n.available_gpu_indices
                start = taken.get(n.name, 0)
                idx = tuple(sorted({free[(start + t) % len(free)] for t in range(k)}))
                taken[n.name] = start + k
                placement.append(GpuSlice(n.name, idx))
        out.append(JobAssignment(j.name, JobState.RUNNING, chosen[0], tuple(placement)))
    return Plan(tuple(out), ObjectiveBreakdown(0, 0, 0, 0, 0, 0))


def model_objective(f: Formulation, values: tuple[float, ...]) -> float:
    return f.offset + sum(c * values[v] for v, c in f.objective)


# ---------------------------------------------------------------- one family at a time


@by_backend
def test_config_choice(backend: Backend) -> None:
    # Without "at most one configuration", the job takes both (4 + 2 GPUs, 1.625 > 1).
    p = problem(
        cluster(node("n0")), job("a", point(4, 400), point(2, 250)), weights=only_throughput()
    )
    assert "gang" in broken(p, unchecked(p, backend, formulation.add_config_choice))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.config is not None and a.config.num_gpus == 4


@by_backend
def test_gang_size(backend: Backend) -> None:
    # b holds 4 of the 8 GPUs; without the gang rule a runs its 8-GPU shape on the other 4.
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), point(4, 300)),
        job("b", point(4, 1000)),
        weights=only_throughput(),
    )
    assert "gang" in broken(p, unchecked(p, backend, formulation.add_gang_size))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.config is not None and a.config.num_gpus == 4
    assert sum(len(s.gpu_indices) for s in a.placement) == 4


@by_backend
def test_gpu_type_match(backend: Backend) -> None:
    # b takes the A100 node; without the rule a runs its A100 shape on the V100 node.
    c = cluster(node("a0"), node("v0", V100))
    p = problem(
        c,
        job("a", point(8, 800), point(8, 100, gpu=V100)),
        job("b", point(8, 900), weight=2.0),
        weights=only_throughput(),
    )
    assert "gpu_type_match" in broken(p, unchecked(p, backend, formulation.add_gpu_type_match))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.config is not None and a.config.gpu_type == "V100"
    assert [s.node for s in a.placement] == ["v0"]


@by_backend
def test_tensor_groups_in_node(backend: Backend) -> None:
    # Two 8-GPU nodes with 2 GPUs each taken: 6 free per node. The tp=4 job a (8 GPUs) can
    # only take 4 + 4, which leaves 2 + 2: b runs its 2-GPU shape. Without the family a splits
    # 6 + 2, which leaves 4 GPUs on one node for b's better tp=4 shape.
    c = cluster(
        node("n0", unavailable=frozenset({0, 1})), node("n1", unavailable=frozenset({0, 1}))
    )
    p = problem(
        c,
        job("a", point(8, 800, tp=4)),
        job("b", point(2, 250), point(4, 260, tp=4)),
        weights=only_throughput(),
    )
    assert "tensor_group_in_node" in broken(
        p, unchecked(p, backend, formulation.add_tensor_groups_in_node)
    )
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert sorted(len(s.gpu_indices) for s in a.placement) == [4, 4]


@by_backend
def test_gpu_capacity(backend: Backend) -> None:
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), min_gpus=8),
        job("b", point(8, 900), min_gpus=8, weight=2.0),
        weights=only_throughput(),
    )
    assert "gpu_capacity" in broken(p, unchecked(p, backend, formulation.add_gpu_capacity))
    plan = solve(p, backend)
    assert not broken(p, plan)
    assert plan.assignment("a").state is JobState.QUEUED
    assert plan.assignment("b").state is JobState.RUNNING


@by_backend
def test_locality(backend: Backend) -> None:
    # Locality is an objective term: without the family the model scores a plan spread over
    # two nodes and racks as if it were compact; with it, the model's value is the plan's score.
    c = cluster(node("n0", rack="r0"), node("n1", rack="r1"))
    p = problem(c, job("a", point(4, 400)), weights=ObjectiveWeights(1, 0, 0, 0.1, 0))
    configs = build_config_set(p)
    spread = formulation.build(p, configs)
    cfg = max(configs.by_job["a"], key=lambda c: c.samples_per_second)
    split = materialize(p, configs, {"a": (cfg, {"n0": 2, "n1": 2})})
    assert split.objective.locality == 2
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not formulation.add_locality]
    without = formulation.build(p, configs, families)
    hinted = formulation.hint(without, split)
    values = tuple(hinted.get(i, 0.0) for i in range(without.num_variables))
    assert model_objective(without, values) > split.objective.total + 0.1
    hinted = formulation.hint(spread, split)
    values = tuple(hinted.get(i, 0.0) for i in range(spread.num_variables))
    assert model_objective(spread, values) == pytest.approx(split.objective.total, abs=1e-9)

    outcome = solve_exact(backend, spread)
    assert outcome.plan is not None and outcome.values is not None
    assert not broken(p, outcome.plan)
    assert len(outcome.plan.assignment("a").placement) == 1
    assert outcome.plan.objective.locality == 0
    assert model_objective(spread, outcome.values) == pytest.approx(
        outcome.plan.objective.total, abs=1e-6
    )


@by_backend
def test_migration_keeps_running_job(backend: Backend) -> None:
    # "a" runs on GPUs 4-7 of n0. Moving it gains nothing; the migration weight keeps it.
    c = cluster(node("n0"), node("n1"))
    a = job("a", point(4, 400), current=running("A100", {"n0": (4, 5, 6, 7)}))
    p = problem(c, a, weights=ObjectiveWeights(1.0, 0.0, 0.5, 0.0, 0.0))
    plan = solve(p, backend)
    assert not plan.assignment("a").migrated
    assert plan.assignment("a").placement[0].gpu_indices == (4, 5, 6, 7)


@by_backend
def test_non_preemptible_job_stays(backend: Backend) -> None:
    # "b" is worth more on n0, but "a" may not be moved off it.
    c = cluster(node("n0", count=4))
    a = job("a", point(4, 100), current=running("A100", {"n0": (0, 1, 2, 3)}), preemptible=False)
    b = job("b", point(4, 1000), weight=4.0)
    p = problem(c, a, b, weights=only_throughput())
    assert "non_preemptible" in broken(p, unchecked(p, backend, formulation.add_migration))
    plan = solve(p, backend)
    assert plan.assignment("a").state is JobState.RUNNING
    assert plan.assignment("b").state is JobState.QUEUED


@by_backend
def test_kept_only_configuration_stays_where_it_runs(backend: Backend) -> None:
    # a runs on n1 in a shape over the memory limit (kept_only); b needs all of n1 (tp=8).
    # a may not move to n0, so either it stays (b waits) or it waits: here b is worth more.
    c = cluster(node("n0", count=4), node("n1"))
    a = job("a", point(4, 400), current=running("A100", {"n1": (0, 1, 2, 3)}))
    b = job("b", point(8, 1000, tp=8), weight=4.0)
    p = problem(c, a, b, weights=only_throughput())
    base = build_config_set(p)
    kept = tuple(cfg._replace(kept_only=True, memory_per_gpu_gib=90.0) for cfg in base.by_job["a"])
    configs = ConfigSet({**base.by_job, "a": kept}, base.best_samples_per_second, 0)
    outcome = solve_exact(backend, formulation.build(p, configs))
    assert outcome.plan is not None
    assert outcome.plan.assignment("a").state is JobState.QUEUED
    assert not broken(p, outcome.plan)
    families = [f for f in formulation.CONSTRAINT_FAMILIES if f is not formulation.add_migration]
    moved = solve_exact(backend, formulation.build(p, configs, families))
    assert moved.plan is not None
    assert "memory_fit" in broken(p, moved.plan)


@by_backend
def test_power_budget_lowers_clock(backend: Backend) -> None:
    # 8 GPUs at 300 W each at the top clock (2400 W) against a budget of 1900 W, idle 50 W x 8
    # counted in it: the job must run at a lower clock (or fewer GPUs).
    c = cluster(node("n0"), power=1900.0)
    p = problem(c, job("a", point(8, 800)), weights=only_throughput())
    assert "power_budget" in broken(p, unchecked(p, backend, formulation.add_power_budget))
    plan = solve(p, backend)
    assert not broken(p, plan)
    a = plan.assignment("a")
    assert a.state is JobState.RUNNING and a.config is not None
    assert a.config.sm_clock_mhz < 1410


@by_backend
def test_rack_power_budget(backend: Backend) -> None:
    c = cluster(node("n0", rack="r0"), node("n1", rack="r1"), rack_power={"r0": 500.0})
    p = problem(c, job("a", point(8, 800)), job("b", point(8, 790)), weights=only_throughput())
    assert "rack_power_budget" in broken(
        p, unchecked(p, backend, formulation.add_rack_power_budget)
    )
    plan = solve(p, backend)
    assert not broken(p, plan)
    in_r0 = [a for a in plan.assignments if any(s.node == "n0" for s in a.placement)]
    assert all(a.config is not None and a.config.watts <= 500 for a in in_r0)


@by_backend
def test_an_unkeepable_non_preemptible_job_makes_the_model_infeasible(backend: Backend) -> None:
    # a runs in a shape (2 GPUs) its profile doesn't have: it can't be kept, nor stopped.
    c = cluster(node("n0"))
    a = job("a", point(4, 400), current=running("A100", {"n0": (0, 1)}), preemptible=False)
    p = problem(c, a, weights=only_throughput())
    outcome = solve_exact(backend, formulation.build(p, build_config_set(p)))
    assert outcome.status is SolverStatus.INFEASIBLE
    assert outcome.plan is None and outcome.best_bound is None


# ---------------------------------------------------------------- the same optimum everywhere


def _instance(name: str) -> tuple[Problem, ConfigSet]:
    p = problem_from_proto(load_request_json(ROOT / "instances" / f"{name}.json"), Limits())
    return p, build_config_set(p)


def _agree(p: Problem, configs: ConfigSet, time_limit: float) -> dict[Backend, ExactResult]:
    f = formulation.build(p, configs)
    outcomes = {b: solve_exact(b, f, time_limit) for b in EXACT_BACKENDS}
    for b, o in outcomes.items():
        assert o.status is SolverStatus.OPTIMAL, f"{b.value}: {o.detail}"
        assert o.plan is not None and not check_plan(p, o.plan.assignments)
    objectives = [o.plan.objective.total for o in outcomes.values() if o.plan is not None]
    for value in objectives:
        assert value == pytest.approx(objectives[0], rel=1e-6, abs=1e-9)
    for o in outcomes.values():
        assert o.best_bound is not None and o.best_bound >= objectives[0] - 1e-9
    return outcomes


@pytest.mark.parametrize("seed", range(6))
def test_backends_agree_on_random_tiny_instances(seed: int) -> None:
    p, configs, expected = enumerated(seed)
    if expected == float("-inf"):  # no valid plan: every backend must prove it
        f = formulation.build(p, configs)
        for b in EXACT_BACKENDS:
            assert solve_exact(b, f, 30.0).status is SolverStatus.INFEASIBLE, b.value
        return
    outcomes = _agree(p, configs, 30.0)
    plan = outcomes[Backend.CPSAT].plan
    assert plan is not None and plan.objective.total == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", ["tiny-1node", "tiny-power", "tiny-migration", "small"])
def test_backends_agree_on_the_bundled_instances(name: str) -> None:
    # small: CP-SAT and HiGHS each prove it in ~0.2 s (Pyomo ~0.5 s, model building included).
    _agree(*_instance(name), time_limit=60.0)


# ---------------------------------------------------------------- bounds


@by_backend
def test_a_bound_under_a_tiny_time_limit_is_above_the_exact_optimum(backend: Backend) -> None:
    # The exact optimum of small, proven by every backend above (and recomputed here).
    p, configs = _instance("small")
    f = formulation.build(p, configs)
    exact = solve_exact(Backend.HIGHS, f, 60.0)
    assert exact.status is SolverStatus.OPTIMAL and exact.plan is not None
    optimum = exact.plan.objective.total
    # Whatever a short limit stops at on this machine (nothing, a plan, a plan and a bound),
    # a bound is never below the optimum, and the reported gap never below the true one.
    for time_limit in (0.02, 0.06, 0.12):
        quick = solve_full(
            f, backend, hint=None, options=ExactOptions(time_limit=time_limit, threads=1)
        )
        assert quick.status is not SolverStatus.ERROR, quick.detail
        if quick.best_bound is not None:
            assert quick.best_bound >= optimum - 1e-9
        if quick.plan is not None:
            assert not check_plan(p, quick.plan.assignments)
            assert quick.plan.objective.total <= optimum + 1e-9
            if quick.best_bound is not None:
                reported = quick.best_bound - quick.plan.objective.total
                assert reported >= optimum - quick.plan.objective.total - 1e-9
    # A proven bound is never much above the optimum when the solve finishes.
    assert exact.best_bound is not None
    assert exact.best_bound - optimum <= 1e-6 * max(1.0, abs(optimum))


def test_cpsat_stopped_early_reports_a_gap_at_least_the_true_gap() -> None:
    # CP-SAT cut by deterministic time (machine-independent, one worker): a feasible plan and a
    # bound short of optimality; the exact optimum comes from the long solves above.
    p, configs = _instance("small")
    f = formulation.build(p, configs)
    optimum = solve_exact(Backend.HIGHS, f, 60.0)
    assert optimum.plan is not None
    best = optimum.plan.objective.total
    for limit in (0.02, 0.03):
        o = solve_full(
            f,
            Backend.CPSAT,
            hint=None,
            options=ExactOptions(time_limit=10, threads=1, time_budget=2 * limit),
        )
        assert o.status is SolverStatus.FEASIBLE and o.plan is not None, o.detail
        assert o.best_bound is not None
        reported_gap = (o.best_bound - o.plan.objective.total) / abs(o.plan.objective.total)
        true_gap = (best - o.plan.objective.total) / abs(o.plan.objective.total)
        assert reported_gap >= true_gap > 0
        assert o.best_bound >= best


# ---------------------------------------------------------------- warm start


def test_highs_warm_started_with_the_heuristic_plan_does_at_least_as_well() -> None:
    p, configs = _instance("small")
    heuristic = Heuristic(p, configs).run(0.0)
    assert not check_plan(p, heuristic.assignments)
    f = formulation.build(p, configs)
    hint = formulation.hint(f, heuristic)
    # A tiny limit: HiGHS may stop before finding anything of its own; the hint is its start.
    for time_limit in (0.02, 5.0):
        o = solve_full(
            f, Backend.HIGHS, hint=hint, options=ExactOptions(time_limit=time_limit, threads=1)
        )
        assert o.plan is not None, o.detail
        assert o.plan.objective.total >= heuristic.objective.total - 1e-9
        assert not check_plan(p, o.plan.assignments)


@by_backend
def test_a_hint_is_accepted_by_every_backend(backend: Backend) -> None:
    p, configs = _instance("tiny-migration")
    heuristic = Heuristic(p, configs).run(0.0)
    f = formulation.build(p, configs)
    o = solve_full(
        f,
        backend,
        hint=formulation.hint(f, heuristic),
        options=ExactOptions(time_limit=10, threads=1),
    )
    assert o.status is SolverStatus.OPTIMAL and o.plan is not None
    assert o.plan.objective.total >= heuristic.objective.total - 1e-9


# ---------------------------------------------------------------- export


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


# ---------------------------------------------------------------- registry and Pyomo solvers


def test_the_registry_knows_the_exact_backends() -> None:
    assert set(exact_backends()) >= {Backend.CPSAT, Backend.HIGHS, Backend.PYOMO}
    assert get_backend(Backend.CPSAT).name == "CP-SAT"
    assert get_backend(Backend.HIGHS).name == "HiGHS"
    assert get_backend(Backend.PYOMO).name.startswith("Pyomo/")
    with pytest.raises(ValueError, match="not an exact backend"):
        get_backend(Backend.HEURISTIC)


def test_a_registered_backend_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    class Stub:
        name = "stub"

        def solve(
            self,
            formulation: Formulation,
            *,
            hint: object = None,
            options: ExactOptions = ExactOptions(),  # noqa: B008
        ) -> ExactOutcome:
            return ExactOutcome(SolverStatus.NO_SOLUTION, None, None, 0.0, "stub")

    from solver.exact import backends

    monkeypatch.setattr(backends, "_registry", {})
    register_backend(Backend.HIGHS, Stub)
    assert get_backend(Backend.HIGHS).name == "stub"


def test_available_solvers_probes_the_known_list_without_raising() -> None:
    found = available_solvers()
    assert "appsi_highs" in found
    assert set(found) <= set(KNOWN_SOLVERS)


def test_an_unavailable_pyomo_solver_is_an_error_outcome() -> None:
    p, configs = _instance("tiny-1node")
    missing = "no_such_solver"  # a name Pyomo has no plugin for
    o = solve_full(
        formulation.build(p, configs),
        Backend.PYOMO,
        hint=None,
        options=ExactOptions(solver_name=missing),
    )
    assert o.status is SolverStatus.ERROR
    assert missing in o.detail and "not available" in o.detail


def test_the_highs_bound_carries_the_documented_margin() -> None:
    p, configs = _instance("tiny-1node")
    o = solve_exact(Backend.HIGHS, formulation.build(p, configs))
    assert o.plan is not None and o.best_bound is not None
    margin = o.best_bound - o.plan.objective.total
    assert 0 < margin <= 2e-7 * max(1.0, abs(o.plan.objective.total))
    assert math.isfinite(o.best_bound)


def test_highs_solves_whatever_thread_count_its_pool_was_made_with() -> None:
    # HiGHS sizes one process-wide thread pool on its first solve and refuses other sizes
    # later; the backend then runs on the pool as it is.
    p, configs = _instance("tiny-power")
    f = formulation.build(p, configs)
    outcomes = [
        solve_full(f, Backend.HIGHS, options=ExactOptions(time_limit=10, threads=t))
        for t in (1, 2, 3)
    ]
    assert all(o.status is SolverStatus.OPTIMAL for o in outcomes)
    assert any("existing thread pool" in o.detail for o in outcomes)


@by_backend
def test_a_model_without_variables_is_solved(backend: Backend) -> None:
    # No job has a configuration (V100 profile on an A100 cluster): the objective is a constant.
    p = problem(cluster(node("n0")), job("a", point(4, 100, gpu=V100)))
    f = formulation.build(p, build_config_set(p))
    assert f.num_variables == 0
    o = solve_exact(backend, f)
    assert o.status is SolverStatus.OPTIMAL and o.plan is not None
    assert o.plan.assignment("a").state is JobState.QUEUED
    assert o.best_bound is not None and o.best_bound >= o.plan.objective.total


# ---------------------------------------------------------------- one outcome, one extraction


def test_an_outcome_is_made_consistent_whatever_the_solver_said() -> None:
    limit = outcome(SolverStatus.FEASIBLE, None, 3.0, 0.1)
    assert (limit.status, limit.values, limit.best_bound) == (SolverStatus.NO_SOLUTION, None, 3.0)
    claimed = outcome(SolverStatus.OPTIMAL, None, 3.0, 0.1, "x")
    assert claimed.status is SolverStatus.ERROR and claimed.best_bound is None
    assert claimed.detail == "x; optimal without a solution"
    infeasible = outcome(SolverStatus.INFEASIBLE, (1.0,), 2.0, 0.1)
    assert infeasible.values is None and infeasible.best_bound is None


def test_values_that_are_no_plan_make_an_error_result() -> None:
    p, configs = _instance("tiny-1node")
    f = formulation.build(p, configs)
    good = solve_exact(Backend.HIGHS, f)
    assert good.values is not None and good.plan is not None
    # Every variable at 100: more GPUs on a node than it has.
    bad_values = tuple(100.0 for _ in good.values)
    bad = plan_of(f, outcome(SolverStatus.FEASIBLE, bad_values, 5.0, 0.1), "stub")
    assert bad.status is SolverStatus.ERROR and bad.plan is None and bad.best_bound is None
    assert bad.detail.startswith("stub solution unreadable")
    same = plan_of(f, outcome(SolverStatus.OPTIMAL, good.values, good.best_bound, 0.1), "stub")
    assert same.plan == good.plan


def test_every_export_format_the_cli_offers_is_written(tmp_path: Path) -> None:
    p, configs = _instance("tiny-1node")
    f = formulation.build(p, configs)
    for fmt in EXPORT_FORMATS:
        out = export_model(f, tmp_path / f"m.{fmt}", fmt)
        assert out.stat().st_size > 0
    with pytest.raises(ValueError, match="unknown format 'xml'"):
        export_model(f, tmp_path / "m.xml", "xml")
