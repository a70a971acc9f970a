"""The aggregated LP: a valid upper bound, and a rounding the guided heuristic can place."""

from __future__ import annotations

import itertools

import highspy
import numpy as np
import pytest

from solver.app import pipeline
from solver.app.convert import load_request_json
from solver.app.limits import Limits
from solver.domain import Backend, Termination
from solver.exact import formulation
from solver.exact.backends import SolverStatus
from solver.perfmodel.configs import build_config_set
from solver.search import array_lp
from solver.search.array_lp import ArrayLp
from solver.search.bound import solve_aggregate
from tests.backend_helpers import ROOT
from tests.bruteforce import solve_exact
from tests.factories import (
    cluster,
    job,
    node,
    only_throughput,
    point,
    problem,
    random_tiny,
    solve,
)


@pytest.mark.parametrize("seed", range(6))
def test_lp_bound_is_above_the_exact_optimum(seed: int) -> None:
    p = random_tiny(seed)
    configs = build_config_set(p)
    exact = solve_exact(Backend.CPSAT, formulation.build(p, configs))
    lp = solve_aggregate(p, configs)
    if exact.status is SolverStatus.INFEASIBLE:
        return
    assert exact.plan is not None and lp.best_bound is not None
    assert lp.best_bound >= exact.plan.objective.total - 1e-9


def test_lp_bound_is_tight_when_pools_decide() -> None:
    # One pool of 8 GPUs and two jobs that each want all 8: the LP can't split a job usefully
    # beyond the pool, so its bound equals the best single job.
    p = problem(
        cluster(node("n0")),
        job("a", point(8, 800), min_gpus=8),
        job("b", point(8, 900), min_gpus=8, weight=2.0),
        weights=only_throughput(),
    )
    lp = solve_aggregate(p, build_config_set(p))
    assert lp.best_bound == pytest.approx(2.0, rel=1e-5)
    assert set(lp.choice) == {"b"}


def test_aggregate_backend_reports_the_lp_bound() -> None:
    p = problem(
        cluster(node("n0"), node("n1")),
        job("a", point(8, 800)),
        job("b", point(4, 300)),
        backend=Backend.AGGREGATE,
    )
    r = solve(p)
    assert r.stats.best_bound is not None
    assert r.stats.best_bound >= r.stats.objective
    assert r.stats.termination in (Termination.OPTIMAL, Termination.FEASIBLE, Termination.FALLBACK)
    assert "CP-SAT" not in r.stats.detail


def test_a_model_with_a_non_finite_coefficient_is_not_solved() -> None:
    """Defence behind validation: HiGHS is never handed an infinite cost (it could hang)."""
    lp = ArrayLp()
    x = lp.column(float("inf"))
    lp.row([(x, 1.0)], hi=1.0)
    assert lp.solve() == (highspy.HighsModelStatus.kModelError, None, None)
    finite = ArrayLp()
    y = finite.column(2.0)
    finite.row([(y, 1.0)], hi=1.0)
    status, bound, _ = finite.solve()
    assert status == highspy.HighsModelStatus.kOptimal and bound == pytest.approx(2.0)


def test_the_bound_is_proven_after_a_solve_that_sized_highs_thread_pool_otherwise() -> None:
    """HiGHS's thread pool is process-wide and sized by the first solve: an aggregated LP asking
    for one thread after a solve on all of them was refused and reported no bound (seen in a
    simulator worker that ran a Gavel baseline before DSFRO). In a fresh process, the LP after
    such a solve still proves its bound."""
    import subprocess
    import sys

    code = (
        "from solver.simulate.policies.lp import solve_max\n"
        "from solver.search.bound import solve_aggregate\n"
        "from solver.perfmodel.configs import build_config_set\n"
        "from tests.factories import random_tiny\n"
        "assert solve_max([1.0, 2.0], [([0, 1], [1.0, 1.0], 1.0)]) is not None\n"
        "p = random_tiny(1)\n"
        "out = solve_aggregate(p, build_config_set(p))\n"
        "print(out.status, out.best_bound is not None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["OPTIMAL", "True"], done.stdout + done.stderr


def test_the_time_limit_counts_to_the_instant_given_not_from_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HiGHS's own limit counts from its run; loading the model before it (0.1 s for a MIP at
    1,024 nodes) ran past the step's end, so the limit is what is left at the run."""
    lp = ArrayLp()
    x = lp.column(1.0)
    lp.row([(x, 1.0)], hi=1.0)
    seen: list[float] = []

    def run(h: highspy.Highs) -> None:
        seen.append(float(h.getOptionValue("time_limit")[1]))
        h.run()

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return 103.0  # 3 s after the caller's instant 100, loading done

    monkeypatch.setattr(array_lp, "run_on_pool", run)
    monkeypatch.setattr(array_lp, "time", Clock)
    status, bound, _ = lp.solve([x], until=105.0)
    assert seen == [2.0]
    assert status == highspy.HighsModelStatus.kOptimal and bound == pytest.approx(1.0)


def test_the_mips_dual_bound_is_told_as_it_falls_and_stays_a_bound() -> None:
    """A MIP still inside a heuristic at the answer has its result ignored; the bounds it
    proved on the way are told as it proves them."""
    rng = np.random.default_rng(3)
    lp = ArrayLp()
    n = 120
    weights = rng.integers(10, 100, size=(2, n)).astype(float)
    xs = [lp.column(float(w) + float(rng.integers(0, 20))) for w in weights[0]]
    for row in weights:
        lp.row(list(zip(xs, row.tolist(), strict=True)), hi=float(row.sum()) / 3)
    told: list[float] = []
    status, bound, values = lp.solve(xs, on_bound=told.append)
    assert status == highspy.HighsModelStatus.kOptimal and bound is not None
    assert values is not None
    optimum = float(np.dot(lp.cost, values))
    assert len(told) >= 2
    assert all(a > b for a, b in itertools.pairwise(told))  # each one tighter
    assert min(told) >= bound - 1e-9 * abs(bound)  # proofs on the way to the last one
    assert bound >= optimum - 1e-6


def test_solve_aggregate_tells_its_bounds_with_its_offset_and_margin() -> None:
    request = load_request_json(ROOT / "instances/hetero-power/hetero-power-32-s2.json")
    p = pipeline.to_problem(request, Limits(max_time_budget_seconds=600))
    configs = build_config_set(p)
    told: list[float] = []
    outcome = solve_aggregate(p, configs, integer=True, on_bound=told.append)
    assert outcome.status == "OPTIMAL" and outcome.best_bound is not None
    # With the model's offset and the MIP's margin, as its final bound: the first told, at
    # the root, is the LP's; the last, the final bound or above it (the proof can end
    # between two polls).
    lp = solve_aggregate(p, configs)
    assert lp.best_bound is not None and told[0] <= lp.best_bound
    assert min(told) >= outcome.best_bound - 1e-9 * abs(outcome.best_bound)
    assert outcome.best_bound >= 109.558575  # the stored proven optimum (optima.json)


def _refuses_to_solve(*_: object, **__: object) -> None:
    raise AssertionError("the model went to HiGHS after its time was up")


def test_a_build_past_its_time_limit_stops_before_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building is not bounded by HiGHS's limit: a model whose time went on building is not
    handed over (it could prove nothing), and says so: stopped, without a bound or a guide."""
    p = random_tiny(3)
    configs = build_config_set(p)
    monkeypatch.setattr(ArrayLp, "solve", _refuses_to_solve)
    for outcome in (
        solve_aggregate(p, configs, time_limit=-1.0),
        solve_aggregate(p, configs, integer=True, time_limit=-1.0),
        solve_aggregate(p, configs, stop=lambda: True),
    ):
        assert (outcome.status, outcome.best_bound, outcome.choice) == ("STOPPED", None, {})


def test_a_stop_while_building_ends_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [job(f"j{k}", point(1, 100.0), point(2, 180.0)) for k in range(200)]
    p = problem(cluster(*(node(f"n{k}") for k in range(4))), *jobs)
    configs = build_config_set(p)
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 1  # the first look passes, the next one (64 jobs on) stops

    monkeypatch.setattr(ArrayLp, "solve", _refuses_to_solve)
    outcome = solve_aggregate(p, configs, stop=stop)
    assert (outcome.status, outcome.best_bound) == ("STOPPED", None)
    assert len(calls) == 2
