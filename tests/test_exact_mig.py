"""The joint MIG model (solver.exact.mig_model): enumerated optima, score_plan agreement, its
families, and the bound a solve reports with it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solver.domain import Backend, SolveOptions
from solver.exact.mig_model import (
    WHOLE,
    add_instance_capacity,
    add_whole_on_unpartitioned,
    placed,
)
from solver.exact.mig_plans import MIG_FAMILIES, build_mig, extract_mig, hint_mig
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.search.bound import solve_aggregate
from tests.bruteforce import solve_exact
from tests.factories import solve
from tests.mig_bruteforce import enumerated_mig
from tests.mig_cases import problem, small


def model_value(f: object, values: object) -> float:
    from solver.exact.mig_model import MigFormulation

    assert isinstance(f, MigFormulation)
    return float(f.objective_vector() @ np.asarray(values, dtype=float)) + f.offset


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("backend", [Backend.CPSAT, Backend.HIGHS])
def test_joint_model_reaches_the_enumerated_optimum(seed: int, backend: Backend) -> None:
    p, configs, optimum = enumerated_mig(seed)
    f = build_mig(p, configs)
    r = solve_exact(backend, f)
    assert r.values is not None and r.best_bound is not None
    plan = extract_mig(f, r.values)
    assert check_plan(p, plan.assignments, plan.layout_changes) == []
    assert plan.objective.total == pytest.approx(optimum, abs=1e-6)
    assert model_value(f, r.values) == pytest.approx(plan.objective.total, abs=1e-9)
    assert r.best_bound >= optimum - 1e-6


@pytest.mark.parametrize("seed", range(6))
def test_the_slice_aggregate_bounds_the_enumerated_optimum(seed: int) -> None:
    """solve_aggregate with slices relaxes the snapshot with slices: its LP and MIP bounds
    are at least the enumerated optimum, and the MIP's at most the LP's."""
    p, configs, optimum = enumerated_mig(seed)
    lp = solve_aggregate(p, configs, slices=True)
    mip = solve_aggregate(p, configs, slices=True, integer=True)
    assert lp.best_bound is not None and mip.best_bound is not None
    assert lp.best_bound >= optimum - 1e-9 and mip.best_bound >= optimum - 1e-9
    assert mip.best_bound <= lp.best_bound + 1e-6
    whole = solve_aggregate(p, configs, integer=True)
    assert whole.best_bound is not None and mip.best_bound >= whole.best_bound - 1e-6


def seven_and_one(backend: Backend = Backend.HEURISTIC) -> object:
    return problem(*(small(f"j{k}") for k in range(7)), small("w", measured=None), gpus=2,
                   backend=backend)  # fmt: skip


def test_the_packed_plan_as_a_hint_scores_as_score_plan() -> None:
    p = seven_and_one()
    packed = solve(p).plan  # type: ignore[arg-type]
    assert packed.layout_changes
    f = build_mig(p, build_config_set(p))  # type: ignore[arg-type]
    values = hint_mig(f, packed)
    v = np.asarray([values[i] for i in range(f.num_variables)])
    assert model_value(f, v) == pytest.approx(packed.objective.total, abs=1e-9)
    lo, hi, _ = f.bounds()
    assert np.all(v >= lo) and np.all(v <= hi)


def test_without_instance_capacity_slices_run_on_a_whole_layout() -> None:
    """Without the rows, slices need no instances: the GPU stays whole (no reconfiguration)."""
    p = problem(*(small(f"j{k}", measured=90.0) for k in range(7)), gpus=1)
    configs = build_config_set(p)
    families = [x for x in MIG_FAMILIES if x is not add_instance_capacity]
    for fams, layout_whole in ((families, True), (MIG_FAMILIES, False)):
        f = build_mig(p, configs, fams)
        r = solve_exact(Backend.HIGHS, f)
        assert r.values is not None
        assert sum(1 for s in f.mig.slices if r.values[s.var] > 0.5) >= 6
        [gpu] = f.mig.gpus
        assert (placed(gpu, list(r.values)) == WHOLE) is layout_whole


def test_without_whole_on_unpartitioned_a_whole_job_shares_a_partitioned_gpu() -> None:
    p = problem(*(small(f"j{k}", measured=90.0) for k in range(7)), small("w", measured=None))
    configs = build_config_set(p)
    families = [x for x in MIG_FAMILIES if x is not add_whole_on_unpartitioned]
    f = build_mig(p, configs, families)
    r = solve_exact(Backend.HIGHS, f)
    assert r.values is not None
    slices = sum(1 for s in f.mig.slices if r.values[s.var] > 0.5)
    whole = sum(1 for v in f.index.y.tolist() if r.values[v] > 0.5)
    assert (slices, whole) == (7, 1)
    full = build_mig(p, configs)
    r = solve_exact(Backend.HIGHS, full)
    assert r.values is not None
    assert sum(1 for v in full.index.y.tolist() if r.values[v] > 0.5) == 0


@pytest.mark.parametrize("backend", [Backend.CPSAT, Backend.HIGHS])
def test_an_exact_solve_reports_the_joint_bound(backend: Backend) -> None:
    p = seven_and_one(backend)
    p = dataclasses.replace(p, options=SolveOptions(4.0, backend, threads=1))  # type: ignore[type-var]
    result = solve(p)  # type: ignore[arg-type]
    s = result.stats
    assert check_plan(p, result.plan.assignments, result.plan.layout_changes) == []  # type: ignore[arg-type]
    assert s.best_bound is not None and s.relative_gap is not None
    assert s.best_bound >= s.objective and s.relative_gap < 1e-4
    heuristic = solve(seven_and_one())  # type: ignore[arg-type]
    # The slice aggregate's bound is a relaxation: never below the joint model's optimum.
    assert heuristic.stats.best_bound is not None
    assert heuristic.stats.best_bound >= s.objective - 1e-9
    assert s.objective >= heuristic.plan.objective.total - 1e-9
    assert "joint MIG model" in s.detail


def test_the_joint_model_s_build_counts_in_its_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the joint model is Python within the same seconds: a build that uses them up
    leaves the packed plan alone, no solver started late."""
    import time

    from solver.core import mig_exact

    p = seven_and_one(Backend.HIGHS)
    configs = build_config_set(p)  # type: ignore[arg-type]
    packed = solve(seven_and_one()).plan  # type: ignore[arg-type]
    slow_build = build_mig

    def build(*args: object) -> object:
        time.sleep(0.2)
        return slow_build(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(mig_exact, "build_mig", build)
    joint = mig_exact.joint_solve(p, configs, packed, 0.1)  # type: ignore[arg-type]
    assert joint is not None and joint.plan is packed and joint.bound is None
    assert "no time left after building it" in joint.detail
    monkeypatch.setattr(mig_exact, "build_mig", slow_build)
    joint = mig_exact.joint_solve(p, configs, packed, 10.0)  # type: ignore[arg-type]
    assert joint is not None and joint.bound is not None
