"""The node floor (solver.scoring.node_floor, solver.exact.node_floor): a busy node that power
saving could suspend is charged its base power and its free GPUs' idle power, so packing work
onto fewer nodes is worth something, in the scorer and in the full model alike."""

from __future__ import annotations

import dataclasses

import pytest

from solver.domain import (
    Backend,
    GpuSlice,
    JobAssignment,
    JobState,
    ObjectiveWeights,
    Problem,
    Termination,
)
from solver.exact import formulation
from solver.perfmodel.configs import build_config_set
from solver.power_states import NodePower, NodePowerState, PowerSaving
from solver.scoring.checker import check_plan
from solver.scoring.node_floor import node_floor_watts
from solver.scoring.objective import score_plan
from tests.factories import A100, cluster, job, node, point, problem, random_tiny, running, solve
from tests.reference_model import build_reference
from tests.test_formulation import _new, _reference

BASE = 600.0
POLICY = PowerSaving(enabled=True, suspend_after_seconds=600.0, price_node_floor=True)
WEIGHTS = ObjectiveWeights(1.0, 0.5, 0.2, 0.0, 0.3)


def based(name: str, count: int = 4, unavailable: frozenset[int] = frozenset()) -> object:
    n = node(name, count=count, unavailable=unavailable)
    return dataclasses.replace(n, power=NodePower(NodePowerState.UP, 0.0, BASE))


def snapshot(
    *nodes: object,
    saving: PowerSaving = POLICY,
    jobs: tuple[object, ...] = (),
    backend: Backend = Backend.AUTO,
) -> Problem:
    c = dataclasses.replace(cluster(*nodes), power_saving=saving)  # type: ignore[arg-type]
    return problem(c, *jobs, weights=WEIGHTS, backend=backend)  # type: ignore[arg-type]


def on(name: str, p: Problem, gpus: dict[str, tuple[int, ...]]) -> JobAssignment:
    [config] = [
        c for c in build_config_set(p).by_job[name] if c.num_gpus == sum(map(len, gpus.values()))
    ][:1]
    return JobAssignment(
        name, JobState.RUNNING, config, tuple(GpuSlice(n, g) for n, g in gpus.items())
    )


TWO = (
    job("a", point(2, 100.0), min_gpus=2, max_gpus=2),
    job("b", point(2, 100.0), min_gpus=2, max_gpus=2),
)


def test_a_busy_node_is_charged_its_base_and_its_free_gpus_idle_power() -> None:
    p = snapshot(based("n0"), based("n1"), jobs=TWO)
    packed = [on("a", p, {"n0": (0, 1)}), on("b", p, {"n0": (2, 3)})]
    spread = [on("a", p, {"n0": (0, 1)}), on("b", p, {"n1": (0, 1)})]
    idle = A100.idle_watts
    assert node_floor_watts(p.cluster, packed) == pytest.approx(BASE)
    assert node_floor_watts(p.cluster, spread) == pytest.approx(2 * (BASE + 2 * idle))
    best = build_config_set(p).best_samples_per_second
    gap = score_plan(p, spread, best).energy - score_plan(p, packed, best).energy
    assert gap == pytest.approx((BASE + 4 * idle) / p.cluster.max_gpu_watts())


@pytest.mark.parametrize(
    "saving, nodes",
    [
        (PowerSaving(price_node_floor=True), ("n0", "n1")),  # off: no node can be suspended
        (PowerSaving(enabled=True), ("n0", "n1")),  # the floor is priced only when asked
        (dataclasses.replace(POLICY, price_node_floor=False), ("n0", "n1")),
        (dataclasses.replace(POLICY, exclude_nodes=frozenset({"n0", "n1"})), ("n0", "n1")),
    ],
)
def test_no_floor_where_the_policy_could_not_suspend_the_node(
    saving: PowerSaving, nodes: tuple[str, str]
) -> None:
    p = snapshot(based("n0"), based("n1"), saving=saving, jobs=TWO)
    spread = [on("a", p, {"n0": (0, 1)}), on("b", p, {"n1": (0, 1)})]
    assert node_floor_watts(p.cluster, spread) == 0.0


def test_a_node_held_by_outside_work_is_not_charged() -> None:
    p = snapshot(based("n0", unavailable=frozenset({3})), based("n1"), jobs=TWO)
    plan = [on("a", p, {"n0": (0, 1)}), on("b", p, {"n1": (0, 1)})]
    assert node_floor_watts(p.cluster, plan) == pytest.approx(BASE + 2 * A100.idle_watts)


def tiny_with_power_saving(seed: int) -> Problem:
    p = random_tiny(seed)
    nodes = tuple(
        dataclasses.replace(n, power=NodePower(NodePowerState.UP, 0.0, 100.0 * (k + 1)))
        for k, n in enumerate(p.cluster.nodes)
    )
    weights = dataclasses.replace(p.weights, energy=max(p.weights.energy, 0.4))
    c = dataclasses.replace(p.cluster, nodes=nodes, power_saving=POLICY)
    return dataclasses.replace(p, cluster=c, weights=weights)


@pytest.mark.parametrize("seed", range(6))
def test_the_family_is_the_reference_model(seed: int) -> None:
    """With the node floor priced, the model is the reference model whole and with each other
    family left out (the floor's rows read the placement, so it goes last)."""
    p = tiny_with_power_saving(seed)
    configs = build_config_set(p)
    others = [
        fam
        for fam in formulation.CONSTRAINT_FAMILIES
        if fam not in (formulation.add_placement_vars, formulation.add_node_floor)
    ]
    for leave_out in [None, *others]:
        families = [fam for fam in formulation.CONSTRAINT_FAMILIES if fam is not leave_out]
        f = formulation.build(p, configs, families)
        assert f.index.busy.size, "a priced node some job could use"
        ref = build_reference(p, configs, [fam.__name__ for fam in families])
        new, old = _new(f), _reference(ref)
        for key in old:
            assert new[key] == old[key], (leave_out, key)
        assert [v.name for v in f.variables] == [v.name for v in ref.variables]


@pytest.mark.parametrize("backend", [Backend.CPSAT, Backend.HIGHS])
def test_the_full_model_packs_jobs_onto_one_node_and_its_value_is_the_score(
    backend: Backend,
) -> None:
    p = snapshot(based("n0"), based("n1"), jobs=TWO, backend=backend)
    r = solve(p)
    assert r.stats.termination is Termination.OPTIMAL
    plan = r.plan
    assert check_plan(p, plan.assignments, plan.layout_changes, plan.power_actions) == []
    assert {s.node for a in plan.assignments for s in a.placement} in ({"n0"}, {"n1"})
    best = build_config_set(p).best_samples_per_second
    assert plan.objective.total == pytest.approx(score_plan(p, plan.assignments, best).total)


def test_the_full_model_leaves_the_floor_out_when_the_policy_does_not_price_it() -> None:
    saving = dataclasses.replace(POLICY, price_node_floor=False)
    p = snapshot(based("n0"), based("n1"), saving=saving, jobs=TWO)
    f = formulation.build(p, build_config_set(p))
    assert f.index.busy.size == 0
    assert not any(v.name.startswith(("busy[", "free[")) for v in f.variables)


def test_a_running_job_moves_to_free_a_node_when_the_floor_outweighs_the_migration() -> None:
    alone = job(
        "alone",
        point(1, 100.0),
        min_gpus=1,
        max_gpus=1,
        current=running("A100", {"n1": (0,)}),
    )
    host = job(
        "host", point(2, 100.0), min_gpus=2, max_gpus=2, current=running("A100", {"n0": (0, 1)})
    )
    for migration, moved in ((0.001, True), (1.0, False)):
        weights = ObjectiveWeights(1.0, 2.0, migration, 0.0, 0.3)
        c = dataclasses.replace(cluster(based("n0"), based("n1")), power_saving=POLICY)  # type: ignore[arg-type]
        p = problem(c, alone, host, weights=weights, backend=Backend.CPSAT)
        r = solve(p)
        assert r.stats.termination is Termination.OPTIMAL
        assert all(a.state is JobState.RUNNING for a in r.plan.assignments)
        nodes = {s.node for a in r.plan.assignments for s in a.placement}
        assert (len(nodes) == 1) is moved


@pytest.mark.parametrize("backend", ["BACKEND_AUTO", "BACKEND_HIGHS", "BACKEND_CPSAT"])
def test_with_slices_the_bound_stays_above_the_plan_and_the_plan_valid(backend: str) -> None:
    """The joint MIG model leaves the floor out: its bound must still bound the scored plan."""
    from solver._proto.dsfro.v1 import scheduler_pb2 as pb
    from solver.app.limits import Limits
    from solver.app.pipeline import solve_request, to_problem
    from solver.core.solver import Solver
    from tests.mig_helpers import make_mig_request

    req = make_mig_request()
    for n in req.cluster.nodes:
        n.base_watts = 400.0
    req.cluster.power_saving.enabled = True
    req.cluster.power_saving.price_node_floor = True
    req.options.backend = getattr(pb, backend)
    solver = Solver()
    try:
        out = solve_request(req, solver)
    finally:
        solver.close()
    plan, stats = out.result.plan, out.result.stats
    p = to_problem(req, Limits())
    assert check_plan(p, plan.assignments, plan.layout_changes, plan.power_actions) == []
    best = build_config_set(p).best_samples_per_second
    assert node_floor_watts(p.cluster, plan.assignments) > 0
    if stats.best_bound is not None:
        assert stats.best_bound >= plan.objective.total - 1e-9
    assert plan.objective.total == pytest.approx(
        score_plan(p, plan.assignments, best, plan.layout_changes).total
    )
