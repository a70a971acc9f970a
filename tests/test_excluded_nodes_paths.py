"""Per-job node exclusions on every solve path: the full model on each exact backend reaches
the optimum that exhaustive enumeration (judged by the independent checker) finds; the
aggregated bound stays above it; the heuristic, the quick plan, the decomposition, MIG
packing, the joint MIG model and resumed suspended nodes place no job on a node it excludes,
and lose little for it."""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from pathlib import Path

import pytest

from scripts.common.exclusions import one_rack, selectors
from solver.app.convert import load_request_json, problem_from_proto
from solver.app.limits import Limits
from solver.domain import Backend, Problem, QueueReason, Shape, SolveResult, Termination
from solver.exact import formulation
from solver.mig import GpuLayout, MigInstance
from solver.perfmodel.configs import build_config_set
from solver.runtime.pools import InlineExecutor
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize, queued_assignment
from solver.search.bound import solve_aggregate
from solver.search.bound_rules import RackRules
from solver.search.decompose import partition, solve_decomposed
from solver.search.heuristic import Heuristic
from solver.search.quick import quick_plan
from solver.search.slices import Packer
from solver.simulate.policies.common import Planner, RoundView
from tests import mig_cases
from tests.bruteforce import EXACT_BACKENDS, assert_reaches, brute_force, optimum_of, solve_exact
from tests.factories import (
    cluster,
    job,
    node,
    only_throughput,
    point,
    problem,
    random_tiny,
    running,
    solve,
)
from tests.simulate_tenant_helpers import round_input, tenant_cluster, waiting
from tests.test_power_states import ASLEEP, RESUME, actions, powered, snapshot

ROOT = Path(__file__).resolve().parent.parent


def with_random_exclusions(seed: int) -> Problem:
    """random_tiny(seed), each job excluding each node with probability 0.4."""
    rnd = random.Random(2000 + seed)
    p = random_tiny(seed)
    names = [n.name for n in p.cluster.nodes]
    jobs = tuple(
        dataclasses.replace(j, excluded_nodes=frozenset(n for n in names if rnd.random() < 0.4))
        for j in p.jobs
    )
    return dataclasses.replace(p, jobs=jobs)


def without_exclusions(p: Problem) -> Problem:
    jobs = tuple(dataclasses.replace(j, excluded_nodes=frozenset()) for j in p.jobs)
    return dataclasses.replace(p, jobs=jobs)


SEEDS = range(10)


@pytest.mark.parametrize("backend", EXACT_BACKENDS, ids=lambda b: b.value)
@pytest.mark.parametrize("seed", SEEDS)
def test_the_exact_models_optimum_is_the_enumerated_one(seed: int, backend: Backend) -> None:
    p, configs, best = optimum_of(with_random_exclusions, seed)
    assert_reaches(backend, p, configs, best)


def test_the_exclusions_bind_in_these_snapshots() -> None:
    """Without them the optimum places some job on a node it excludes in most snapshots."""
    broken = 0
    for seed in SEEDS:
        p = with_random_exclusions(seed)
        free = without_exclusions(p)
        r = solve_exact(Backend.HIGHS, formulation.build(free, build_config_set(free)))
        if r.plan is None:  # infeasible as it is (a non-preemptible job over a budget)
            continue
        broken += any(v.constraint == "excluded_node" for v in check_plan(p, r.plan.assignments))
    assert broken >= 4


@pytest.mark.parametrize("seed", SEEDS)
def test_the_aggregated_bound_stays_above_the_optimum(seed: int) -> None:
    p, configs, best = optimum_of(with_random_exclusions, seed)
    bound = solve_aggregate(p, configs).best_bound
    if bound is None:  # the LP proved it infeasible: so is every plan
        assert best == float("-inf")
    else:
        assert bound >= best - 1e-9


def with_rack_budgets(seed: int) -> Problem:
    """with_random_exclusions(seed) with a power budget on each of its two racks."""
    p = with_random_exclusions(seed)
    budgets = {"r0": 900.0, "r1": 700.0}
    return dataclasses.replace(
        p, cluster=dataclasses.replace(p.cluster, rack_power_budgets_watts=budgets)
    )


def test_the_split_over_racks_follows_the_rules_and_stays_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per rule, the LP splits its jobs' GPUs only over the racks it leaves them, within what
    it leaves there (bound_rules.RackRules): above the enumerated optimum on every snapshot,
    tighter than the split without the rules on some."""
    tighter = 0
    for seed in SEEDS:
        p, configs, best = optimum_of(with_rack_budgets, seed)
        bound = solve_aggregate(p, configs).best_bound
        with monkeypatch.context() as m:
            m.setattr(RackRules, "rule", lambda self, job: frozenset())
            loose = solve_aggregate(p, configs).best_bound
        if bound is None:
            assert best == float("-inf")
            continue
        assert loose is not None and best - 1e-9 <= bound <= loose + 1e-9
        tighter += bound < loose - 1e-6
    assert tighter >= 2


@pytest.mark.parametrize("backend", [Backend.HEURISTIC, Backend.AUTO, Backend.DECOMPOSED])
@pytest.mark.parametrize("seed", SEEDS)
def test_every_backend_answers_a_checked_plan_no_better_than_the_optimum(
    seed: int, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    p, _, best = optimum_of(with_random_exclusions, seed)
    p = dataclasses.replace(p, options=dataclasses.replace(p.options, backend=backend))
    with caplog.at_level(logging.ERROR):
        r = solve(p, seconds=2.0)
    if best == float("-inf"):  # a non-preemptible job's kept GPUs break a budget
        assert r.stats.termination is Termination.INFEASIBLE
        return
    assert check_plan(p, r.plan.assignments) == []
    assert not [m for m in caplog.messages if "rejected by the checker" in m]
    assert r.plan.objective.total <= best + 1e-6
    if backend is Backend.AUTO:  # proven on snapshots this small
        assert r.plan.objective.total == pytest.approx(best, abs=1e-6)


# ---------------------------------------------------------------- a 128-node snapshot


def medium() -> Problem:
    return problem_from_proto(load_request_json(ROOT / "instances" / "medium.json"), Limits())


def medium_with_exclusions() -> Problem:
    """instances/medium.json, a third of its jobs under one of four rules, each barring a
    random fifth of the nodes (as selectors and taints do: few rules, many jobs each)."""
    return selectors(medium())


def four_racks_only() -> Problem:
    """instances/medium.json, every waiting job barred from all but the first rack of each of
    its four GPU types."""
    return one_rack(medium())


def test_the_aggregated_bound_counts_the_gpus_each_rule_leaves() -> None:
    """Rows per barred set and type (solver.search.bound_rules): the bound stays above the
    heuristic's plan and well below the bound without the exclusions."""
    p = four_racks_only()
    configs = build_config_set(p)
    bound = solve_aggregate(p, configs).best_bound
    free = without_exclusions(p)
    loose = solve_aggregate(free, build_config_set(free)).best_bound
    plan = Heuristic(p, configs).run(time.monotonic() + 3)
    assert bound is not None and loose is not None
    assert plan.objective.total <= bound < 0.9 * loose


def test_nested_rules_bound_the_jobs_of_the_stricter_one_too() -> None:
    """Two jobs barred from {n0, n1} and two from {n0}, 8 GPUs each on three 8-GPU nodes: two
    can run (n1 and n2); the row of {n0} holds all four, without it the LP ran three."""
    c = cluster(node("n0"), node("n1"), node("n2"))
    eight = [point(8, 100.0)]
    p = problem(
        c,
        job("a", *eight, min_gpus=8, excluded_nodes=frozenset({"n0", "n1"})),
        job("b", *eight, min_gpus=8, excluded_nodes=frozenset({"n0", "n1"})),
        job("c", *eight, min_gpus=8, excluded_nodes=frozenset({"n0"})),
        job("d", *eight, min_gpus=8, excluded_nodes=frozenset({"n0"})),
        weights=only_throughput(),
    )
    bound = solve_aggregate(p, build_config_set(p)).best_bound
    assert bound == pytest.approx(2.0, rel=1e-6)  # two jobs at full pace


def test_the_rows_count_the_gpus_running_jobs_keep_where_a_rule_sends_others() -> None:
    """A running job on n1 and a waiting one barred from n0 both want n1's 8 GPUs: the LP
    no longer runs both there; its bound is the enumerated optimum (the running job moved to
    n0 at its migration cost, or kept and the other waiting)."""
    c = cluster(node("n0"), node("n1"))
    eight = [point(8, 100.0)]
    p = problem(
        c,
        job("r", *eight, min_gpus=8, current=running("A100", {"n1": tuple(range(8))})),
        job("b", *eight, min_gpus=8, excluded_nodes=frozenset({"n0"})),
        weights=dataclasses.replace(only_throughput(), migration=0.3),
    )
    configs = build_config_set(p)
    bound = solve_aggregate(p, configs).best_bound
    assert bound is not None
    assert bound == pytest.approx(brute_force(p, configs), rel=1e-5)  # the LP's safety margin
    assert bound == pytest.approx(2.0 - 0.3, rel=1e-5)


def _placed_within_rules(p: Problem, r: SolveResult) -> None:
    assert check_plan(p, r.plan.assignments) == []
    jobs = {j.name: j for j in p.jobs}
    for a in r.plan.assignments:
        assert all(jobs[a.job].may_use(s.node) for s in a.placement), a.job


def test_the_heuristic_and_the_quick_plan_keep_off_excluded_nodes_and_lose_little() -> None:
    p = medium_with_exclusions()
    configs = build_config_set(p)
    assert sum(bool(j.barred_nodes) for j in p.jobs) > 60
    heuristic = Heuristic(p, configs).run(time.monotonic() + 3)
    assert check_plan(p, heuristic.assignments) == []
    free = without_exclusions(p)
    unbarred = Heuristic(free, build_config_set(free)).run(time.monotonic() + 3)
    assert heuristic.objective.total >= 0.97 * unbarred.objective.total
    quick = quick_plan(p, time.monotonic() + 5, chunk_jobs=256, check_every=32)
    assert check_plan(p, quick.plan.assignments) == []
    quick_unbarred = quick_plan(free, time.monotonic() + 5, chunk_jobs=256, check_every=32)
    assert quick.plan.objective.total >= 0.97 * quick_unbarred.plan.objective.total


def test_the_decomposition_sends_waiting_jobs_where_they_may_run_and_merges_checked_plans() -> None:
    """Every waiting job of medium may use one rack of each GPU type only (a quarter of the
    cluster): each goes to a part that holds one of them, and the parts' plans merge into
    checked plans that run most of those jobs."""
    p = four_racks_only()
    types = {n.name: n.gpu_type for n in p.cluster.nodes}
    for piece in partition(p, 4, seed=0):
        here = {n.name for n in piece.problem.cluster.nodes}
        for j in piece.problem.jobs:
            if j.current is None:
                usable = {n for n in here - j.barred_nodes if j.allows(types[n])}
                assert usable, j.name  # its part holds a node it may use
    d = solve_decomposed(p, InlineExecutor(), end=time.monotonic() + 10, part_gpus=2048, parts=4)
    first = materialize(p, d.configs, d.first)
    final = materialize(p, d.configs, d.final)
    assert check_plan(p, first.assignments) == []
    assert check_plan(p, final.assignments) == []
    assert final.objective.total >= first.objective.total - 1e-9
    started = {a.job for a in final.assignments if a.placement} - {
        j.name for j in p.jobs if j.current is not None
    }
    assert len(started) >= 20


@pytest.mark.parametrize("backend", [Backend.AUTO, Backend.HIGHS, Backend.DECOMPOSED])
def test_the_solver_answers_within_the_rules_on_each_backend(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    p = medium_with_exclusions()
    p = dataclasses.replace(p, options=dataclasses.replace(p.options, backend=backend))
    with caplog.at_level(logging.ERROR):
        r = solve(p, seconds=4.0)
    _placed_within_rules(p, r)
    assert not [m for m in caplog.messages if "rejected by the checker" in m]
    assert r.stats.best_bound is None or r.stats.best_bound >= r.plan.objective.total - 1e-6


# ---------------------------------------------------------------- MIG slices, power states


def _two_mig_nodes(backend: Backend) -> Problem:
    """mig_cases' one-GPU node n0, already in seven free 1g instances, and a whole one, n1;
    seven 1g jobs that exclude n0: the free instances there would cost no reconfiguration."""
    sevens = tuple(MigInstance(mig_cases.ONE_G, k) for k in range(7))
    one = mig_cases.problem(
        *(
            dataclasses.replace(mig_cases.small(f"j{k}"), excluded_nodes=frozenset({"n0"}))
            for k in range(7)
        ),
        layouts=(GpuLayout(0, sevens),),
        backend=backend,
    )
    n1 = dataclasses.replace(one.cluster.nodes[0], name="n1", rack="r1", mig_layouts=())
    return dataclasses.replace(
        one, cluster=dataclasses.replace(one.cluster, nodes=(one.cluster.nodes[0], n1))
    )


@pytest.mark.parametrize("backend", [Backend.HEURISTIC, Backend.AUTO, Backend.HIGHS])
def test_slice_jobs_go_to_instances_on_nodes_they_may_use(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    p = _two_mig_nodes(backend)
    with caplog.at_level(logging.ERROR):
        r = solve(p)
    assert check_plan(p, r.plan.assignments, r.plan.layout_changes) == []
    assert not [m for m in caplog.messages if "rejected by the checker" in m]
    on = {a.job: a.placement[0].node for a in r.plan.assignments if a.mig is not None}
    assert on == {f"j{k}": "n1" for k in range(7)}
    assert [c.node for c in r.plan.layout_changes] == ["n1"]
    if backend is Backend.HIGHS:
        assert r.stats.termination is Termination.OPTIMAL and "joint MIG model" in r.stats.detail


def test_the_packer_takes_the_first_spare_gpu_the_job_may_use() -> None:
    """Both GPUs whole and spare, n0 first: a job barred from n0 gets a new instance on n1."""
    p = _two_mig_nodes(Backend.HEURISTIC)
    whole = dataclasses.replace(p.cluster.nodes[0], mig_layouts=())
    p = dataclasses.replace(
        p, cluster=dataclasses.replace(p.cluster, nodes=(whole, p.cluster.nodes[1]))
    )
    configs = build_config_set(p)
    packer = Packer(p, configs, [queued_assignment(p, configs, j) for j in p.jobs], {})
    assert [node for node, _ in packer.spare["A100-80GB"]] == ["n0", "n1"]
    assert packer.try_existing(p.jobs[0]) is False
    assert packer.try_new(p.jobs[0]) is True
    [(_, gpu, _)] = packer.packed.values()
    assert gpu == ("n1", 0)


def test_a_suspended_node_is_resumed_only_for_a_job_that_may_use_it() -> None:
    p = snapshot(powered("up"), powered("a", ASLEEP), powered("b", ASLEEP), jobs=2)
    jobs = (p.jobs[0], dataclasses.replace(p.jobs[1], excluded_nodes=frozenset({"a"})))
    p = dataclasses.replace(p, jobs=jobs)
    r, acts = actions(p)
    on = {a.job: {s.node for s in a.placement} for a in r.plan.assignments}  # type: ignore[attr-defined]
    assert on["j0"] and on["j1"] and "a" not in on["j1"]
    assert len(acts) == 1 and acts[0][1] is RESUME


def test_a_job_the_nodes_it_may_use_cannot_hold_waits_and_says_why() -> None:
    """Two 8-GPU nodes and a 4-GPU one: an 8-GPU job barred from both large ones can never
    run (no feasible configuration); barred from one, it runs on the other."""
    p = snapshot(powered("n0"), powered("n1"), powered("small", count=4), jobs=1)
    for barred, runs in ((frozenset({"n0", "n1"}), False), (frozenset({"n0", "small"}), True)):
        one = dataclasses.replace(p, jobs=(dataclasses.replace(p.jobs[0], excluded_nodes=barred),))
        r = solve(one)
        [a] = r.plan.assignments
        assert check_plan(one, r.plan.assignments) == []
        if runs:
            assert {s.node for s in a.placement} == {"n1"}
        else:
            assert a.placement == () and a.queue_reason is QueueReason.NO_FEASIBLE_CONFIGURATION
            assert "the nodes it may use (excluded_nodes, node_selector, taints)" in a.queue_detail


def test_the_simulators_baselines_place_off_the_barred_nodes() -> None:
    """The best fit every baseline places with (Planner.place) skips a job's barred nodes."""
    r = round_input(tenant_cluster(3), [waiting("j", "t", 0.0, 2)])
    barred = dataclasses.replace(r.problem.jobs[0], excluded_nodes=frozenset({"n0", "n1"}))
    r = dataclasses.replace(r, problem=dataclasses.replace(r.problem, jobs=(barred,)))
    view = RoundView.of(r)
    planner = Planner(view)
    config = view.config(barred, Shape("G", 2, 1, 1), 1000)
    assert config is not None and planner.place(barred, config)
    assert [s.node for s in planner.allocations["j"].placement] == ["n2"]
    assert not Planner(view).place(
        dataclasses.replace(barred, excluded_nodes=frozenset({"n0", "n1", "n2"})), config
    )
