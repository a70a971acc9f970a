"""Property: every backend's plan for a random valid snapshot passes the independent checker."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solver import orchestrator
from solver.domain import (
    Allocation,
    Backend,
    GpuSlice,
    Job,
    ObjectiveWeights,
    Problem,
    Shape,
    SolveOptions,
    Termination,
)
from solver.scoring.checker import check_plan
from solver.search.executor import InlineExecutor
from tests.factories import A100, V100, cluster, job, node, point


@st.composite
def snapshots(draw: st.DrawFn) -> Problem:
    n_nodes = draw(st.integers(1, 4))
    nodes = []
    for i in range(n_nodes):
        gpu = draw(st.sampled_from([A100, V100]))
        count = draw(st.sampled_from([2, 4, 8]))
        unavailable = frozenset(draw(st.sets(st.integers(0, count - 1), max_size=2)))
        nodes.append(node(f"n{i}", gpu, count, rack=f"r{i % 2}", unavailable=unavailable))
    free = {n.name: list(n.available_gpu_indices) for n in nodes}
    jobs: list[Job] = []
    for k in range(draw(st.integers(0, 5))):
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
    r = orchestrator.solve(p, executor=InlineExecutor())
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
