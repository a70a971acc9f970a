"""Aging (docs/objective.md, "Aging"): leaving a job queued costs l_E min(1, age / 3600 s), the
age in whole steps of 300 s, so a job the energy weight prices out runs once it has waited long
enough, and from 3,600 s on whatever the weights. In every path (the score, the heuristic, the
quick plan's gains, the full model, the aggregated LP and MIP, the Lagrangian dual) with the
bounds still above the exact optimum; and in the simulator, where every job finishes across a
sweep of the energy weight."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from solver.domain import (
    Backend,
    JobAssignment,
    JobState,
    ObjectiveWeights,
    Problem,
    QueueReason,
)
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.scoring.objective import (
    AGING_SECONDS,
    AGING_STEP_SECONDS,
    aging,
    running_gain,
    score_plan,
)
from solver.search import quick
from solver.simulate.engine import Simulation
from solver.simulate.policies import make_policy
from solver.simulate.scenario import load_scenario
from solver.simulate.settings import EngineSettings
from tests.bruteforce import assert_models_meet_the_enumerated_optimum
from tests.factories import cluster, job, node, point, problem, random_tiny, solve

ROOT = Path(__file__).resolve().parent.parent


def starving(age: float, weights: ObjectiveWeights | None = None) -> Problem:
    """One 8-GPU A100 node (P_max 3,200 W) and one job that needs all 8 at 2,400 W at the top
    clock (E = 0.75): at energy weight 10 it costs 7.5 against its utility of at most 1."""
    big = job("big", point(8, 800.0, watts=2400.0), min_gpus=8, age_seconds=age)
    return problem(cluster(node("n0")), big, weights=weights or ObjectiveWeights(energy=10.0))


def threshold(p: Problem) -> float:
    """The first age (a whole step) at which some configuration's gain is positive: a_j must
    exceed the least over them of (l_E E_c - l_T u_c) / l_E (one node: no locality spread)."""
    configs = build_config_set(p)
    (j,) = p.jobs
    w, best, peak = p.weights, configs.best_samples_per_second[j.name], 3200.0
    deficit = min(
        (w.energy * c.watts / peak - w.throughput * c.samples_per_second / best) / w.energy
        for c in configs.by_job[j.name]
    )
    steps = math.floor(deficit * AGING_SECONDS / AGING_STEP_SECONDS) + 1
    return steps * AGING_STEP_SECONDS


def test_score_charges_the_aging_of_queued_jobs_at_the_energy_weight() -> None:
    p = starving(age=1199.0)  # three whole steps of 300 s: a = 0.25
    configs = build_config_set(p)
    got = score_plan(p, [JobAssignment("big", JobState.QUEUED)], configs.best_samples_per_second)
    assert aging(p.jobs[0]) == 0.25 and got.aging == 0.25
    assert got.total == pytest.approx(-10.0 * 0.25)
    ages = {0.0: 0.0, 299.0: 0.0, 300.0: 1 / 12, 3599.0: 11 / 12, 3600.0: 1.0, 1e9: 1.0}
    for age, a in ages.items():  # in steps, at most 1
        assert aging(replace(p.jobs[0], age_seconds=age)) == pytest.approx(a), age
    c = configs.by_job["big"][0]
    queued = score_plan(p, [JobAssignment("big", JobState.QUEUED)], {"big": 800.0}).total
    gain = running_gain(p.jobs[0], c, 800.0, p.weights, 3200.0)
    running = queued + gain  # the gain is against the aged queued value
    assert running == pytest.approx(c.samples_per_second / 800.0 - 10.0 * c.watts / 3200.0)


@pytest.mark.parametrize("backend", [Backend.HEURISTIC, Backend.AUTO, Backend.AGGREGATE])
def test_a_job_the_energy_weight_prices_out_runs_past_its_age(backend: Backend) -> None:
    at = threshold(starving(0.0))
    assert 0.0 < at <= AGING_SECONDS  # 6.5 / 10 of an hour at the top clock, less lower down
    for age, runs in ((0.0, False), (at - 1.0, False), (at, True), (3600.0, True)):
        p = replace(starving(age), options=replace(starving(age).options, backend=backend))
        r = solve(p)
        (a,) = r.plan.assignments
        assert (a.state is JobState.RUNNING) == runs, age
        if not runs:
            assert a.queue_reason is QueueReason.NOT_WORTH_RUNNING
        rescored = score_plan(p, r.plan.assignments, build_config_set(p).best_samples_per_second)
        assert r.plan.objective.total == pytest.approx(rescored.total)
        if r.stats.best_bound is not None:
            assert r.stats.best_bound >= r.plan.objective.total - 1e-9


@pytest.mark.parametrize(
    "weights",
    [
        ObjectiveWeights(energy=10.0),
        ObjectiveWeights(energy=1000.0),
        ObjectiveWeights(throughput=0.001, energy=1000.0, locality=1000.0, deadline=0.0),
    ],
)
def test_from_the_documented_age_every_job_runs_whatever_the_weights(
    weights: ObjectiveWeights,
) -> None:
    for backend in (Backend.HEURISTIC, Backend.AUTO):
        p = starving(AGING_SECONDS, weights)
        r = solve(replace(p, options=replace(p.options, backend=backend)))
        assert [a.state for a in r.plan.assignments] == [JobState.RUNNING], backend
        queued = starving(0.0, weights)
        r = solve(replace(queued, options=replace(queued.options, backend=backend)))
        assert [a.state for a in r.plan.assignments] == [JobState.QUEUED], backend


def aged(seed: int) -> tuple[Problem, ConfigSet]:
    """A random tiny instance with every job of a random age (some past 3,600 s), at a high
    energy weight, and its configurations at two clocks (small enough to enumerate)."""
    rnd = random.Random(seed)
    p = random_tiny(seed)
    jobs = tuple(replace(j, age_seconds=rnd.choice([0.0, 1200.0, 5000.0])) for j in p.jobs)
    p = replace(p, jobs=jobs, weights=replace(p.weights, energy=rnd.choice([0.5, 5.0])))
    full = build_config_set(p)
    by_job = {
        j: tuple(c for c in cs if c.sm_clock_mhz in (1410, 990, 1380, 960))
        for j, cs in full.by_job.items()
    }
    return p, ConfigSet(by_job, full.best_samples_per_second, full.num_enumerated)


@pytest.mark.parametrize("seed", range(6))
def test_bounds_stay_above_the_exact_optimum_with_aged_jobs(seed: int) -> None:
    p, configs = aged(seed)
    assert_models_meet_the_enumerated_optimum(p, configs)


def test_the_quick_plans_gain_counts_aging() -> None:
    from solver.core.settings import SolverSettings

    defaults = SolverSettings()
    for seed in range(6):
        p, _ = aged(seed)
        q = quick._Quick(
            p, float("inf"), None, defaults.quick_chunk_jobs, defaults.quick_check_every
        )
        q.rows.load(p.jobs)
        for j in p.jobs:
            for row in q.rows.of(j):
                expected = running_gain(j, q.config(j, row), q.rows.best(j), p.weights, q.max_watts)
                assert q.row_gain(j, row) == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- the simulator


def test_every_job_finishes_across_a_sweep_of_the_energy_weight(tmp_path: Path) -> None:
    """A rigid 4-GPU job that energy weight 10 left queued for good (the run stalled after a
    day with it unfinished) starts after a few rounds; every weight up to the largest the
    service accepts finishes every job."""
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submit_time_s,tenant,workload,num_gpus,duration_s\n"
        "small,0,t,gavel-resnet-50-bs64,1,600\nbig,0,t,gavel-resnet-50-bs64,4,1800\n"
    )
    scenario = load_scenario(trace, ROOT / "instances" / "sim" / "gavel-physical-cluster.json")
    for energy in (0.0, 0.1, 1.0, 10.0, 100.0, 1000.0):
        for policy in ("dsfro-fixed-shape", "dsfro-heuristic"):
            log = Simulation(
                scenario.cluster,
                scenario.sim_jobs(),
                make_policy(policy),
                settings=EngineSettings(weights={"energy": energy}),
            ).run()
            assert log.stopped == "", (policy, energy)
            assert all(j.finish_s is not None for j in log.jobs), (policy, energy)
            big = next(j for j in log.jobs if j.job_id == "big")
            assert big.first_start_s is not None and big.first_start_s <= AGING_SECONDS


def test_dsfro_sweep_over_the_energy_weight_runs_every_job_of_an_hour() -> None:
    """``dsfro sweep``'s points on the service's sample request: at energy weight 1000 every
    job just submitted waits; an hour old, every job runs at every weight."""
    from solver.offline.sweep.run import run_sweep
    from tests.factories import make_request

    def states(age: int, energies: list[float]) -> list[list[str]]:
        req = make_request()
        req.options.time_budget.FromSeconds(2)
        for j in req.jobs:
            j.age.FromSeconds(age)
        points = run_sweep(req, [("energy", energies)]).points
        assert all(p.error is None for p in points)
        return [[c.state for c in p.jobs] for p in points]

    assert states(0, [1000.0]) == [["QUEUED"] * 3]
    assert states(3600, [0.1, 10.0, 1000.0]) == [["RUNNING"] * 3] * 3
