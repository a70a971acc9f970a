"""Power budgets count what the nodes draw with no job (solver.perfmodel.budgets, the checker,
the resume step, validation): up nodes their base power beside their idle GPUs, suspended nodes
the power-saving policy's draw, and a node the plan wakes the difference."""

from __future__ import annotations

import dataclasses

import pytest

from solver.domain import Backend, Config, GpuSlice, JobAssignment, JobState, Problem
from solver.perfmodel import budgets
from solver.perfmodel.configs import build_config_set
from solver.power_states import NodePower, NodePowerState, PowerAction, PowerActionKind, PowerSaving
from solver.scoring.checker import check_plan
from tests.factories import A100, cluster, job, node, point, problem, solve

UP, ASLEEP = NodePowerState.UP, NodePowerState.SUSPENDED
SAVING = PowerSaving(enabled=True, suspend_after_seconds=600.0, suspended_node_watts=20.0)


def powered(name: str, state: NodePowerState = UP, base: float = 500.0) -> object:
    return dataclasses.replace(node(name, count=4), power=NodePower(state, 0.0, base))


def snapshot(
    *nodes: object, budget: float | None, jobs: int = 1, backend: Backend = Backend.HEURISTIC
) -> Problem:
    """One clock only: each job runs at 1,200 W or waits (no lower clock fits it under)."""
    c = dataclasses.replace(cluster(*nodes, power=budget), power_saving=SAVING)  # type: ignore[arg-type]
    one = dataclasses.replace(A100, sm_clocks_mhz=(A100.max_clock_mhz,))
    c = dataclasses.replace(c, gpu_types={**c.gpu_types, A100.name: one})
    fours = [
        job(f"j{k}", point(4, 100.0, watts=1200.0), min_gpus=4, max_gpus=4) for k in range(jobs)
    ]
    return problem(c, *fours, backend=backend, budget=2.0)


def test_the_floor_counts_base_power_up_and_the_policys_draw_asleep() -> None:
    p = snapshot(powered("up"), powered("asleep", ASLEEP), budget=None)
    c = p.cluster
    up_floor = 500.0 + 4 * A100.idle_watts
    assert budgets.floor_watts(c) == pytest.approx(up_floor + 20.0)
    assert budgets.resume_watts(c, c.node("asleep")) == pytest.approx(up_floor - 20.0)
    assert budgets.rack_floor_watts(c) == {"r0": pytest.approx(up_floor + 20.0)}


def top(p: Problem, name: str) -> Config:
    """The job's configuration at the profile's point: 4 GPUs at 1,200 W."""
    [config] = [c for c in build_config_set(p).by_job[name] if c.watts == 1200.0]
    return config


def run_on_up(p: Problem) -> list[JobAssignment]:
    config = top(p, "j0")
    return [JobAssignment("j0", JobState.RUNNING, config, (GpuSlice("up", (0, 1, 2, 3)),))]


def test_the_checker_counts_base_power_against_the_budget() -> None:
    # The job's 1,200 W replace its GPUs' 200 W idle: 1,200 + 500 base + 20 asleep = 1,720 W.
    fits = snapshot(powered("up"), powered("asleep", ASLEEP), budget=1720.0)
    assert check_plan(fits, run_on_up(fits)) == []
    short = snapshot(powered("up"), powered("asleep", ASLEEP), budget=1700.0)
    [v] = check_plan(short, run_on_up(short))
    assert v.constraint == "power_budget"
    unbased = snapshot(powered("up", base=0.0), powered("asleep", ASLEEP), budget=1700.0)
    assert check_plan(unbased, run_on_up(unbased)) == []


def test_a_resumed_node_counts_its_up_floor_in_the_checker() -> None:
    p = snapshot(powered("up"), powered("asleep", ASLEEP), budget=3000.0, jobs=2)
    config = top(p, "j1")
    plan = [
        *run_on_up(p),
        JobAssignment("j1", JobState.RUNNING, config, (GpuSlice("asleep", (0, 1, 2, 3)),)),
    ]
    wake = [PowerAction("asleep", PowerActionKind.RESUME, "a job of the plan is placed on it")]
    # 1,200 + 500 (up) + 1,200 + 500 (asleep, now up) = 3,400 W > 3,000 W.
    [v] = check_plan(p, plan, (), wake)
    assert v.constraint == "power_budget"


@pytest.mark.parametrize("budget, woken", [(3400.0, True), (3300.0, False)])
def test_a_suspended_node_is_woken_only_where_the_budget_holds_its_floor(
    budget: float, woken: bool
) -> None:
    p = snapshot(powered("up"), powered("asleep", ASLEEP), budget=budget, jobs=2)
    r = solve(p)
    plan = r.plan
    assert check_plan(p, plan.assignments, plan.layout_changes, plan.power_actions) == []
    resumed = [a.node for a in plan.power_actions if a.kind is PowerActionKind.RESUME]
    assert (resumed == ["asleep"]) is woken
    running = sum(a.state is JobState.RUNNING for a in plan.assignments)
    assert running == (2 if woken else 1)


def test_every_path_keeps_a_budget_that_base_power_makes_binding() -> None:
    # Two 4-GPU jobs fit 3 x 4 GPUs, but the base power leaves room for one job only.
    nodes = [powered(f"n{k}") for k in range(3)]
    floor = 3 * (500.0 + 4 * A100.idle_watts)
    budget = floor + 1.5 * (1200.0 - 4 * A100.idle_watts)
    for backend in (Backend.HEURISTIC, Backend.CPSAT, Backend.HIGHS):
        p = snapshot(*nodes, budget=budget, jobs=2, backend=backend)
        r = solve(p)
        plan = r.plan
        assert check_plan(p, plan.assignments, plan.layout_changes, plan.power_actions) == []
        assert sum(a.state is JobState.RUNNING for a in plan.assignments) == 1, backend


def test_the_resume_step_never_starts_a_job_in_a_configuration_kept_only_where_it_runs() -> None:
    """A configuration over the memory model's limit is usable only on the job's current GPUs
    (kept_only); a suspended node is never those."""
    from solver.perfmodel.configs import ConfigSet
    from solver.search.resume import resume_for_queued

    p = snapshot(powered("asleep", ASLEEP), budget=None)
    base = build_config_set(p)
    kept = {"j0": tuple(c._replace(kept_only=True) for c in base.by_job["j0"])}
    configs = ConfigSet(kept, base.best_samples_per_second, 0)
    queued = [JobAssignment("j0", JobState.QUEUED)]
    assignments, actions = resume_for_queued(p, configs, queued)
    assert assignments == queued and actions == []
    assignments, actions = resume_for_queued(p, base, queued)  # the same job, placeable
    assert assignments[0].state is JobState.RUNNING and [a.node for a in actions] == ["asleep"]


def test_the_baselines_power_ledger_counts_the_floor_as_the_checker_does() -> None:
    """The simulator's baselines (solver.simulate.policies.common.PowerLedger) budget as DSFRO
    and the checker do: a suspended node at the policy's draw until a job wakes it."""
    from solver.simulate.policies.common import PowerLedger

    p = snapshot(powered("up"), powered("asleep", ASLEEP), budget=3400.0, jobs=2)
    ledger = PowerLedger(p.cluster)
    assert ledger.watts == pytest.approx(budgets.floor_watts(p.cluster))
    first = (GpuSlice("up", (0, 1, 2, 3)),)
    second = (GpuSlice("asleep", (0, 1)),)
    third = (GpuSlice("asleep", (2, 3)),)
    config = top(p, "j0")
    ledger.add(config, first)
    half = config._replace(watts=600.0, shape=dataclasses.replace(config.shape, data_parallel=2))
    ledger.add(half, second)
    ledger.add(half, third)  # the node is woken once
    # Both nodes up with 500 W base, 1,200 W of jobs each: what the checker counts.
    assert ledger.watts == pytest.approx(2 * (500.0 + 1200.0))
    plan = [
        JobAssignment("j0", JobState.RUNNING, config, first),
        JobAssignment("j1", JobState.RUNNING, config, (GpuSlice("asleep", (0, 1, 2, 3)),)),
    ]
    wake = [PowerAction("asleep", PowerActionKind.RESUME, "a job of the plan is placed on it")]
    assert check_plan(p, plan, (), wake) == []
    assert not ledger.fits(half, (GpuSlice("up", (0,)),))  # the budget is used up


def test_the_margin_counts_the_nodes_a_plan_wakes_in_the_solver_and_in_the_report() -> None:
    """The guard's predicted draw (solver.perfmodel.guard) and the checker's margin report
    (solver.scoring.power), each its own derivation, count a node the plan wakes as up."""
    from solver.perfmodel.guard import GuardParams, margin_of, plan_draws
    from solver.scoring.power import power_margin

    p = snapshot(powered("up"), powered("asleep", ASLEEP), budget=5000.0, jobs=2)
    config = top(p, "j1")
    plan = [
        *run_on_up(p),
        JobAssignment("j1", JobState.RUNNING, config, (GpuSlice("asleep", (0, 1, 2, 3)),)),
    ]
    params = GuardParams()
    woken = budgets.woken_watts(p.cluster, plan)
    assert woken == pytest.approx(500.0 + 4 * A100.idle_watts - 20.0)
    guard = margin_of(p, plan_draws(p, plan, params), params, woken)
    report = power_margin(p, plan, params)
    assert guard is not None and report is not None
    # Both nodes up with 500 W base, each job's 1,200 W in place of its GPUs' idle power.
    assert guard.predicted == pytest.approx(2 * (500.0 + 1200.0))
    assert report.predicted == pytest.approx(guard.predicted)
    asleep_only = run_on_up(p)
    assert budgets.woken_watts(p.cluster, asleep_only) == 0.0
    report = power_margin(p, asleep_only, params)
    assert report is not None and report.predicted == pytest.approx(500.0 + 1200.0 + 20.0)
