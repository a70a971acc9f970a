"""Property: every backend's plan for a random valid snapshot passes the independent checker,
and the heuristic's moves change the objective by exactly what they report."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from solver.domain import (
    Allocation,
    Backend,
    Cluster,
    GpuSlice,
    Job,
    ObjectiveWeights,
    Plan,
    Problem,
    Shape,
    SolveOptions,
    Termination,
)
from solver.exact.lns import Lns
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.runtime.pools import InlineExecutor
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize
from solver.search.heuristic import Heuristic
from solver.search.local import local_search
from solver.search.moves import move_admit, move_clock, move_reshape, move_swap
from solver.search.pricing import dual_prices, price_ladder, uniform
from solver.search.state import SearchState
from tests.factories import A100, V100, cluster, job, node, point, solve


@st.composite
def snapshots(draw: st.DrawFn, max_nodes: int = 4, max_jobs: int = 5) -> Problem:
    n_nodes = draw(st.integers(1, max_nodes))
    nodes = []
    for i in range(n_nodes):
        gpu = draw(st.sampled_from([A100, V100]))
        count = draw(st.sampled_from([2, 4, 8]))
        unavailable = frozenset(draw(st.sets(st.integers(0, count - 1), max_size=2)))
        nodes.append(node(f"n{i}", gpu, count, rack=f"r{i % 2}", unavailable=unavailable))
    free = {n.name: list(n.available_gpu_indices) for n in nodes}
    jobs: list[Job] = []
    for k in range(draw(st.integers(0, max_jobs))):
        pts = []
        for gpu in (A100, V100):
            for g in draw(st.sets(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=3)):
                tp = draw(st.sampled_from([t for t in (1, 2, 4) if g % t == 0]))
                pts.append(
                    point(
                        g,
                        draw(st.floats(10, 1000)),
                        draw(st.floats(50, 400)) * g,
                        gpu=gpu,
                        tp=tp,
                        memory=draw(st.floats(1, 40)),
                    )
                )
        current = None
        host = draw(st.sampled_from(nodes))
        if draw(st.booleans()) and len(free[host.name]) >= 2:
            idx = tuple(free[host.name][:2])
            del free[host.name][:2]
            current = Allocation(
                Shape(host.gpu_type, 2, 1, 1),
                max((A100 if host.gpu_type == "A100" else V100).sm_clocks_mhz),
                (GpuSlice(host.name, idx),),
            )
        jobs.append(
            job(
                f"j{k}",
                *pts,
                weight=draw(st.floats(0.5, 4)),
                max_gpus=draw(st.sampled_from([2, 4, 8])),
                current=current,
                preemptible=draw(st.booleans()),
                remaining_samples=draw(st.sampled_from([0.0, 1e5])),
                deadline_seconds=3600.0,
            )
        )
    idle = sum(n.gpu_count * (A100 if n.gpu_type == "A100" else V100).idle_watts for n in nodes)
    power = draw(st.one_of(st.none(), st.floats(idle, idle + 10000)))
    weights = ObjectiveWeights(
        1.0,
        draw(st.floats(0, 1)),
        draw(st.floats(0, 1)),
        draw(st.floats(0, 0.1)),
        draw(st.floats(0, 1)),
    )
    return Problem(
        cluster(*nodes, power=power),
        tuple(jobs),
        weights,
        SolveOptions(time_budget_seconds=1.0, threads=1),
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshots(),
    st.sampled_from(list(Backend)),
)
def test_every_backend_returns_a_checked_plan(p: Problem, backend: Backend) -> None:
    p = Problem(
        p.cluster,
        p.jobs,
        p.weights,
        SolveOptions(time_budget_seconds=1.0, backend=backend, threads=1),
    )
    r = solve(p, executor=InlineExecutor())
    if r.stats.termination is Termination.INFEASIBLE:
        # Only non-preemptible running jobs can make a request infeasible: over the power budget,
        # or in a shape their profile does not cover.
        assert any(j.current is not None and not j.preemptible for j in p.jobs)
        assert r.plan.assignments == ()
        return
    assert check_plan(p, r.plan.assignments) == []
    assert {a.job for a in r.plan.assignments} == {j.name for j in p.jobs}
    if r.stats.best_bound is not None:
        assert r.stats.best_bound >= r.stats.objective - 1e-9


@st.composite
def power_snapshots(draw: st.DrawFn) -> Problem:
    """A random snapshot under a cluster budget little above idle, sometimes a rack budget too:
    power binds, so the priced passes, clock repairs and swaps all get to run."""
    p = draw(snapshots(max_nodes=3, max_jobs=8))
    c = p.cluster
    idle = {
        r: sum(n.gpu_count * c.gpu_types[n.gpu_type].idle_watts for n in c.nodes if n.rack == r)
        for r in c.racks
    }
    budget = sum(idle.values()) + draw(st.floats(0, 3000))
    racks = {}
    if draw(st.booleans()):
        rack = draw(st.sampled_from(sorted(idle)))
        racks[rack] = idle[rack] + draw(st.floats(0, 3000))
    cluster_ = Cluster(c.gpu_types, c.nodes, budget, racks)
    return Problem(cluster_, p.jobs, p.weights, p.options)


def _total(p: Problem, configs: ConfigSet, state: SearchState) -> float:
    plan = materialize(p, configs, dict(state.choices))
    assert check_plan(p, plan.assignments) == []
    return plan.objective.total


def _random_state(h: Heuristic, data: st.DataObject) -> SearchState:
    """Jobs started in a drawn order, each in a drawn shape at its most power-hungry clock if
    it fits: a poor plan that uses up the power, where every move finds work."""
    state = h.greedy(0.0)
    for name in list(state.choices):
        if not h.scorer.fixed(h.scorer.jobs[name]):
            state.release(name)
    for member in data.draw(st.permutations(h.problem.jobs)):
        options = h.configs.by_job[member.name]
        if member.name in state.choices or not options:
            continue
        shape = options[data.draw(st.integers(0, len(options) - 1))].shape
        c = max((x for x in options if x.shape == shape), key=lambda x: x.watts)
        fitted = state.fit(member, c)
        if fitted is not None and state.within_budgets(c, fitted[0]):
            state.take(member.name, c, fitted[0])
    return state


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(power_snapshots(), st.data())
def test_moves_keep_plans_valid_and_gain_what_they_say(p: Problem, data: st.DataObject) -> None:
    configs = build_config_set(p)
    h = Heuristic(p, configs)
    first = materialize(p, configs, dict(h.greedy(0.0).choices))
    # Only non-preemptible jobs over a budget make the first plan invalid (the request is).
    assume(check_plan(p, first.assignments) == [])
    starts = [h.greedy(uniform(0.0)), _random_state(h, data)]
    starts += [h.greedy(q) for q in price_ladder(dual_prices(p, configs, time_limit=5))]
    for state in starts:
        for move in (move_admit, move_swap, move_clock, move_reshape):
            for member in p.jobs:
                before = _total(p, configs, state)
                gained = move(h.scorer, state, member)
                assert gained >= 0
                assert _total(p, configs, state) - before == pytest.approx(gained, abs=1e-9)
        before = _total(p, configs, state)
        gained = local_search(h.scorer, state, time.monotonic() + 5)
        assert _total(p, configs, state) - before == pytest.approx(gained, abs=1e-9)
    plan = h.run(time.monotonic() + 5)
    assert check_plan(p, plan.assignments) == []
    assert plan.objective.total >= first.objective.total - 1e-9


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(power_snapshots())
def test_lns_improvements_are_checked_and_strict(p: Problem) -> None:
    configs = build_config_set(p)
    start = Heuristic(p, configs).run(time.monotonic() + 5)
    assume(check_plan(p, start.assignments) == [])
    seen = [start.objective.total]

    def improved(plan: Plan) -> None:
        assert check_plan(p, plan.assignments) == []
        assert plan.objective.total > seen[-1]
        seen.append(plan.objective.total)

    best = Lns(p, configs, start).run(time.monotonic() + 0.6, on_improve=improved)
    assert best.objective.total == seen[-1]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(power_snapshots())
def test_auto_on_two_threads_returns_a_checked_plan_under_a_bound(p: Problem) -> None:
    """The portfolio: LNS with the aggregated MIP and the full model (worker process) beside."""
    p = Problem(p.cluster, p.jobs, p.weights, SolveOptions(time_budget_seconds=1.0, threads=2))
    r = solve(p)
    if r.stats.termination is Termination.INFEASIBLE:
        assert any(j.current is not None and not j.preemptible for j in p.jobs)
        return
    assert check_plan(p, r.plan.assignments) == []
    if r.stats.best_bound is not None:
        assert r.stats.best_bound >= r.stats.objective - 1e-9
