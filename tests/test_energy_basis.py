"""The energy term's basis (docs/objective.md, "Energy basis"): DRAW charges each running
configuration its power draw; WASTE charges only the draw above the job's most efficient
configuration at the same throughput, ``watts - samples_per_second * e*_j``. Every path uses
the same per-configuration number; the wire, profiles and the simulator carry the choice."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.overrides import prepare
from solver.app.profile import ProfileError, format_profile, load_profile, profile_from_dict
from solver.app.validation import validate_request
from solver.core.settings import SolverSettings
from solver.domain import Backend, EnergyBasis, JobState, ObjectiveWeights, Problem
from solver.exact import formulation
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.objective import energy_watts, running_gain, score_plan
from solver.search import quick
from solver.search.bound import solve_aggregate
from solver.search.lagrangian import solve_lagrangian
from solver.simulate.core import PowerSchedule
from solver.simulate.rounds import Requests
from solver.simulate.settings import EngineSettings
from tests.bruteforce import brute_force, solve_exact
from tests.factories import cluster, job, make_request, node, point, problem, random_tiny, solve

WASTE = EnergyBasis.WASTE


def two_shapes(basis: EnergyBasis, energy: float = 10.0) -> Problem:
    """One 8-GPU A100 node (P_max 3,200 W) and a job measured at 8 GPUs (800 samples/s,
    2,400 W: 3 J/sample) and at 4 (600 samples/s, 1,000 W: 1.67 J/sample); lower clocks come
    from the clock model, the 4-GPU one at the lowest clock the most efficient of all."""
    j = job("j", point(8, 800.0, 2400.0), point(4, 600.0, 1000.0))
    weights = ObjectiveWeights(energy=energy, energy_basis=basis)
    return problem(cluster(node("n0")), j, weights=weights)


def test_waste_is_zero_at_the_most_efficient_configuration_and_positive_elsewhere() -> None:
    p = two_shapes(WASTE)
    configs = build_config_set(p)
    least = configs.least_joules("j")
    options = configs.by_job["j"]
    assert least == pytest.approx(min(c.watts / c.samples_per_second for c in options))
    charges = {c: energy_watts(c, least, WASTE) for c in options}
    efficient = min(options, key=lambda c: c.watts / c.samples_per_second)
    assert (efficient.num_gpus, efficient.sm_clock_mhz) == (4, 990)
    assert charges[efficient] == pytest.approx(0.0, abs=1e-9)
    for c, charge in charges.items():
        if c != efficient:
            assert charge > 1.0, c  # watts above the efficient rate at the same throughput
            assert charge == pytest.approx(c.watts - c.samples_per_second * least)
    top = next(c for c in options if c.num_gpus == 8 and c.sm_clock_mhz == 1410)
    assert charges[top] == pytest.approx(2400.0 - 800.0 * least)


def test_draw_charges_the_draw_whatever_e_star() -> None:
    """DRAW (the default) is the objective as before: the configuration's watts, exactly (the
    golden plans of tests/test_plan_regression.py are unchanged)."""
    assert ObjectiveWeights().energy_basis is EnergyBasis.DRAW
    configs = build_config_set(two_shapes(EnergyBasis.DRAW))
    for c in configs.by_job["j"]:
        assert energy_watts(c, configs.least_joules("j"), EnergyBasis.DRAW) == c.watts


def test_a_mig_slice_configuration_keeps_its_draw_charge() -> None:
    """A slice's watts are above its GPU's idle power, not a whole-GPU draw: no e* applies."""
    configs = build_config_set(two_shapes(WASTE))
    c = configs.by_job["j"][0]._replace(mig_profile="1g.10gb", watts=40.0)
    assert energy_watts(c, configs.least_joules("j"), WASTE) == 40.0


@pytest.mark.parametrize("backend", [Backend.HEURISTIC, Backend.AUTO, Backend.CPSAT, Backend.HIGHS])
def test_each_backend_runs_the_efficient_configuration_under_waste(backend: Backend) -> None:
    """At energy weight 10 the draw prices the job out (it waits); the waste basis runs it at
    its most efficient configuration, with the objective the checker's score and a bound above."""
    for basis in EnergyBasis:
        p = two_shapes(basis)
        p = replace(p, options=replace(p.options, backend=backend, time_budget_seconds=5.0))
        r = solve(p)
        (a,) = r.plan.assignments
        configs = build_config_set(p)
        if basis is EnergyBasis.DRAW:
            assert a.state is JobState.QUEUED, backend
            continue
        assert a.state is JobState.RUNNING and a.config is not None, backend
        assert (a.config.num_gpus, a.config.sm_clock_mhz) == (4, 990), backend
        rescored = score_plan(
            p, r.plan.assignments, configs.best_samples_per_second, (),
            configs.least_joules_per_sample,
        )  # fmt: skip
        assert r.plan.objective.total == pytest.approx(rescored.total, abs=1e-9)
        assert rescored.energy == pytest.approx(0.0, abs=1e-9)
        assert r.plan.objective.total == pytest.approx(a.config.samples_per_second / 800.0)
        assert r.stats.best_bound is not None
        assert r.stats.best_bound >= r.plan.objective.total - 1e-6


def wasteful(seed: int) -> tuple[Problem, ConfigSet]:
    """A random tiny instance under WASTE at a high energy weight, two clocks per shape."""
    p = random_tiny(seed)
    p = replace(p, weights=replace(p.weights, energy=5.0, energy_basis=WASTE))
    full = build_config_set(p)
    by_job = {
        j: tuple(c for c in cs if c.sm_clock_mhz in (1410, 990, 1380, 960))
        for j, cs in full.by_job.items()
    }
    least = full.least_joules_per_sample
    return p, ConfigSet(by_job, full.best_samples_per_second, 0, least_joules_per_sample=least)


@pytest.mark.parametrize("seed", range(4))
def test_bounds_stay_above_the_exact_optimum_under_waste(seed: int) -> None:
    """The full model (HiGHS), the aggregated LP and MIP and the Lagrangian dual price the same
    waste as the checker's score: the exact optimum is the brute force's, the bounds above."""
    p, configs = wasteful(seed)
    optimum = brute_force(p, configs)
    if optimum == float("-inf"):
        return
    exact = solve_exact(Backend.HIGHS, formulation.build(p, configs))
    assert exact.plan is not None
    assert exact.plan.objective.total == pytest.approx(optimum, abs=1e-6)
    for integer in (False, True):
        bound = solve_aggregate(p, configs, integer=integer, time_limit=10.0).best_bound
        assert bound is not None and bound >= optimum - 1e-9, integer
    assert solve_lagrangian(p, configs, time_limit=5.0).best_bound >= optimum - 1e-9


def test_the_quick_plans_row_gain_is_the_waste_gain() -> None:
    defaults = SolverSettings()
    for seed in range(4):
        p, full = wasteful(seed)
        q = quick._Quick(
            p, float("inf"), None, defaults.quick_chunk_jobs, defaults.quick_check_every
        )
        q.rows.load(p.jobs)
        for j in p.jobs:
            assert q.rows.least_joules(j) == full.least_joules(j.name)
            for row in q.rows.of(j):
                c = q.config(j, row)
                expected = running_gain(
                    j, c, q.rows.best(j), p.weights, q.max_watts, full.least_joules(j.name)
                )
                assert q.row_gain(j, row) == pytest.approx(expected, abs=1e-12)


def test_e_star_survives_pickling_for_decomposed_parts() -> None:
    configs = build_config_set(two_shapes(WASTE))
    again = pickle.loads(pickle.dumps(configs))
    assert again.least_joules_per_sample == configs.least_joules_per_sample
    assert again.least_joules("j") > 0


# ---------------------------------------------------------------- wire, profile, simulator


def test_the_wire_carries_the_basis_and_unspecified_is_draw() -> None:
    r = make_request()
    assert problem_from_proto(r, Limits()).weights.energy_basis is EnergyBasis.DRAW
    r.weights.energy_basis = pb.ENERGY_BASIS_WASTE
    assert validate_request(r, Limits()) == []
    assert problem_from_proto(r, Limits()).weights.energy_basis is WASTE


def test_an_unknown_energy_basis_is_rejected_naming_the_field() -> None:
    r = make_request()
    r.weights.energy_basis = 7  # type: ignore[assignment]
    violations = validate_request(r, Limits())
    assert [v.field for v in violations] == ["weights.energy_basis"], violations
    assert "unknown energy basis 7" in violations[0].description


def test_a_profile_sets_the_basis_and_round_trips(tmp_path: Path) -> None:
    profile = profile_from_dict({"weights": {"energy_basis": "waste", "energy": 3.0}})
    assert profile.effective_weights().energy_basis is WASTE
    p = problem_from_proto(prepare(make_request(), profile), Limits())
    assert (p.weights.energy_basis, p.weights.energy) == (WASTE, 3.0)
    r = make_request()
    r.weights.energy_basis = pb.ENERGY_BASIS_DRAW  # the request's own wins
    assert problem_from_proto(prepare(r, profile), Limits()).weights.energy_basis is (
        EnergyBasis.DRAW
    )
    text = format_profile(profile)
    assert 'energy_basis = "waste"\n' in text
    path = tmp_path / "again.toml"
    path.write_text(text)
    assert load_profile(path).effective_weights() == profile.effective_weights()
    assert 'energy_basis = "draw"  # default' in format_profile(profile_from_dict({}))


@pytest.mark.parametrize(
    ("value", "says"), [("cheapest", "unknown energy basis 'cheapest'"), (1, "must be a string")]
)
def test_a_bad_energy_basis_in_a_profile_is_named(value: object, says: str) -> None:
    with pytest.raises(ProfileError) as e:
        profile_from_dict({"weights": {"energy_basis": value}})
    assert "weights.energy_basis" in str(e.value) and says in str(e.value)


def test_the_simulator_sends_the_basis_in_dsfros_requests() -> None:
    for basis, wire in ((WASTE, pb.ENERGY_BASIS_WASTE), (None, pb.ENERGY_BASIS_UNSPECIFIED)):
        settings = EngineSettings() if basis is None else EngineSettings(energy_basis=basis)
        assert pickle.loads(pickle.dumps(settings)) == settings  # --compare's workers
        requests = Requests(pb.ClusterSnapshot(), PowerSchedule(), settings, 1)
        assert requests.request(0.0, [], pb.ClusterSnapshot()).weights.energy_basis == wire
