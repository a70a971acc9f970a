"""Soft node preferences (Kubernetes' preferred node affinity and PreferNoSchedule taints):
resolved at the edge into how much each job would rather not use each node, priced by the
objective's node_preference weight on every path, never a bar."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto
from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.domain import Backend, JobState, ObjectiveWeights, Problem, Termination
from solver.exact.mig_plans import build_mig, extract_mig
from solver.mig import GpuLayout, MigInstance
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.preferences import NodePreference
from solver.scoring.checker import check_plan
from solver.scoring.plans import materialize, queued_assignment
from solver.search.bound import solve_aggregate
from solver.search.heuristic import Heuristic
from solver.search.slices import Packer
from solver.wire import load_request_json
from tests import mig_cases
from tests.bruteforce import EXACT_BACKENDS, assert_reaches, optimum_of, solve_exact
from tests.factories import cluster, job, node, point, problem, random_tiny, solve
from tests.mig_bruteforce import brute_force_mig, random_mig, top_clock
from tests.service_helpers import WAIT, bad_request, serving
from tests.test_exact_mig import model_value
from tests.test_node_rules import IN, PREFER, labelled, term

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "node-preferences.json"


def preferring(
    r: pb.SolveRequest, job: int, weight: int, *requirements: tuple[str, int, list[str]]
) -> None:
    r.jobs[job].node_preferences.add(weight=weight).preference.CopyFrom(term(*requirements))


def dislike(r: pb.SolveRequest, job: int = 0) -> dict[str, float] | None:
    assert validate_request(r, Limits()) == []
    preference = problem_from_proto(r, Limits()).jobs[job].preference
    return None if preference is None else dict(preference.dislike)


def test_a_node_is_disliked_by_the_weight_of_the_terms_it_misses() -> None:
    """labelled(): a100-0 zone a, a100-1 zone b gen 3, h100-0 zone a gen 4. Terms of weight
    80 (zone b) and 20 (gen 3 or 4): a100-1 meets both, h100-0 misses 80, a100-0 both."""
    r = labelled()
    preferring(r, 0, 80, ("zone", IN, ["b"]))
    preferring(r, 0, 20, ("gen", IN, ["3", "4"]))
    assert dislike(r) == {"a100-0": 1.0, "h100-0": 0.8}
    assert dislike(r, 1) is None  # no preference, no soft taint: nothing disliked
    r.weights.node_preference = 0.0  # unpriced: not resolved
    assert dislike(r) is None


def test_a_prefer_no_schedule_taint_is_disliked_wholly_unless_tolerated() -> None:
    r = labelled()
    r.cluster.nodes[1].taints.add(key="maintenance-soon", effect=PREFER)
    preferring(r, 0, 50, ("zone", IN, ["b"]))
    assert dislike(r) == {"a100-0": 1.0, "a100-1": 1.0, "h100-0": 1.0}
    assert dislike(r, 1) == {"a100-1": 1.0}  # no terms: only the taint
    r.jobs[0].tolerations.add(key="maintenance-soon", operator=pb.TOLERATION_OPERATOR_EXISTS)
    assert dislike(r) == {"a100-0": 1.0, "h100-0": 1.0}
    # A preference bars nothing: the job may use every node.
    assert not problem_from_proto(r, Limits()).jobs[0].excluded_nodes


def test_jobs_of_one_rule_share_one_resolution() -> None:
    r = labelled()
    for k in (0, 1):
        preferring(r, k, 10, ("zone", IN, ["a"]))
    p = problem_from_proto(r, Limits())
    assert p.jobs[0].preference is p.jobs[1].preference is not None


@pytest.mark.parametrize(
    ("spoil", "path", "message"),
    [
        (
            lambda p: setattr(p, "weight", 0),
            "node_preferences[0].weight",
            "must be 1 to 100, got 0",
        ),
        (lambda p: setattr(p, "weight", 101), "node_preferences[0].weight", "got 101"),
        (
            lambda p: p.preference.ClearField("requirements"),
            "node_preferences[0].preference.requirements",
            "must not be empty",
        ),
        (
            lambda p: p.preference.requirements[0].ClearField("values"),
            "node_preferences[0].preference.requirements[0].values",
            "must not be empty with IN",
        ),
    ],
)
def test_a_malformed_preference_is_refused_naming_its_field(spoil, path: str, message: str) -> None:  # type: ignore[no-untyped-def]
    r = labelled()
    preferring(r, 1, 10, ("zone", IN, ["a"]))
    spoil(r.jobs[1].node_preferences[0])
    [(field, text)] = [(v.field, v.description) for v in validate_request(r, Limits())]
    assert field == f"jobs[1].{path}" and message in text


def with_random_preferences(seed: int) -> Problem:
    """random_tiny(seed), each job disliking each node by 0, 0.5 or 1 (its max_gpus as it
    is), under a weight that makes them bind."""
    rnd = random.Random(3000 + seed)
    p = random_tiny(seed)
    names = [n.name for n in p.cluster.nodes]
    jobs = []
    for j in p.jobs:
        liked = {n: rnd.choice((0.5, 1.0)) for n in names if rnd.random() < 0.6}
        jobs.append(dataclasses.replace(j, preference=NodePreference(liked) if liked else None))
    weights = dataclasses.replace(p.weights, node_preference=0.3)
    return dataclasses.replace(p, jobs=tuple(jobs), weights=weights)


SEEDS = range(8)


@pytest.mark.parametrize("backend", EXACT_BACKENDS, ids=lambda b: b.value)
@pytest.mark.parametrize("seed", SEEDS)
def test_the_exact_models_optimum_is_the_enumerated_one(seed: int, backend: Backend) -> None:
    """The enumeration judges every plan by score_plan, which prices the preferences: the
    full model's term is the same one."""
    p, configs, best = optimum_of(with_random_preferences, seed)
    assert_reaches(backend, p, configs, best)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_bound_stays_above_and_the_heuristic_near_the_optimum(seed: int) -> None:
    p, configs, best = optimum_of(with_random_preferences, seed)
    if best == float("-inf"):  # no valid plan (a non-preemptible job over the budget)
        return
    bound = solve_aggregate(p, configs, integer=True).best_bound
    assert bound is not None and bound >= best - 1e-9
    result = solve(
        dataclasses.replace(p, options=dataclasses.replace(p.options, backend=Backend.HEURISTIC))
    )
    assert check_plan(p, result.plan.assignments) == []
    assert result.plan.objective.total >= best - 0.35  # at most one job's worth of preference


def test_the_preferences_bind_in_these_snapshots() -> None:
    """Without pricing them, the enumerated optimum is higher in most seeds (the test above
    would pass on a model that ignored them only where they do not bind)."""
    binding = 0
    for seed in SEEDS:
        _, _, priced = optimum_of(with_random_preferences, seed)
        free = lambda s: dataclasses.replace(  # noqa: E731
            with_random_preferences(s), weights=random_tiny(s).weights
        )
        _, _, unpriced = optimum_of(free, seed)
        binding += unpriced > priced + 1e-6
    assert binding >= len(SEEDS) // 2


def two_zones(weight: float = 0.05) -> Problem:
    """Two 8-GPU nodes; the job prefers n1 (n0 disliked wholly); n0 is the first best fit."""
    c = cluster(node("n0"), node("n1"))
    j = job("j", point(4, 100.0, 1000.0), max_gpus=4)
    j = dataclasses.replace(j, preference=NodePreference({"n0": 1.0}))
    return problem(c, j, weights=dataclasses.replace(ObjectiveWeights(), node_preference=weight))


def test_the_heuristic_places_a_job_on_the_nodes_it_prefers_and_the_objective_prices_it() -> None:
    p = two_zones()
    [a] = solve(p).plan.assignments
    assert a.state is JobState.RUNNING and {s.node for s in a.placement} == {"n1"}
    configs = build_config_set(p)
    on_n0 = materialize(p, configs, {"j": (configs.by_job["j"][0], {"n0": 4})})
    on_n1 = materialize(p, configs, {"j": (configs.by_job["j"][0], {"n1": 4})})
    assert on_n0.objective.node_preference == pytest.approx(1.0)  # 4 GPUs at 1, over 4
    assert on_n1.objective.node_preference == 0.0
    assert on_n1.objective.total - on_n0.objective.total == pytest.approx(0.05)
    # The greedy pass alone (no search after it) places it off the disliked node first.
    h = Heuristic(p, configs)
    assert h.first().choices["j"][1] == {"n1": 4}
    [j] = p.jobs  # and its moves are judged by the same price
    assert h.gain(j, 0, {"n1": 4}, False) - h.gain(j, 0, {"n0": 4}, False) == pytest.approx(0.05)
    # Unpriced, the first best fit is taken.
    [free] = solve(two_zones(weight=0.0)).plan.assignments
    assert {s.node for s in free.placement} == {"n0"}


def test_a_preference_never_keeps_a_job_waiting() -> None:
    """Only the disliked node has room: the job runs there, paying its preference (at most the
    weight per job, below any running job's value at the default weights)."""
    p = two_zones()
    c = dataclasses.replace(
        p.cluster, nodes=(node("n0"), node("n1", unavailable=frozenset(range(8))))
    )
    result = solve(dataclasses.replace(p, cluster=c))
    [a] = result.plan.assignments
    assert a.state is JobState.RUNNING and {s.node for s in a.placement} == {"n0"}
    assert result.plan.objective.node_preference == pytest.approx(1.0)


def example() -> pb.SolveRequest:
    """examples/node-preferences.json: four A100 nodes in zones a and b, a100-3 tainted
    PreferNoSchedule; eval and tolerant prefer zone b (tolerant tolerates the taint), train
    prefers zone a."""
    return load_request_json(EXAMPLE)


def test_the_example_is_valid_and_each_job_runs_where_it_prefers_through_the_server() -> None:
    r = example()
    assert validate_request(r, Limits()) == []
    zone = {n.name: n.labels["zone"] for n in r.cluster.nodes}
    with serving() as (_, stub):
        response = stub.Solve(r, timeout=WAIT)
        unpriced = pb.SolveRequest()
        unpriced.CopyFrom(r)
        unpriced.weights.node_preference = 0.0
        free = stub.Solve(unpriced, timeout=WAIT)
        summary = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=r), timeout=WAIT)
        del r.jobs[0].node_preferences[:]  # eval: only the taint left
        r.jobs[2].tolerations.add(key="maintenance-soon", operator=pb.TOLERATION_OPERATOR_EXISTS)
        del r.jobs[2].node_preferences[:]  # tolerant: nothing disliked
        fewer = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=r), timeout=WAIT)
        bad = pb.SolveRequest()
        bad.CopyFrom(r)
        bad.jobs[1].node_preferences[0].weight = 0
        with pytest.raises(grpc.RpcError) as e:
            stub.Solve(bad, timeout=WAIT)
    on = {a.job: {s.node for s in a.placement} for a in response.plan.assignments}
    assert {zone[n] for n in on["eval"]} == {"b"} and "a100-3" not in on["eval"]
    assert {zone[n] for n in on["train"]} == {"a"}
    assert {zone[n] for n in on["tolerant"]} == {"b"}
    assert response.plan.objective.node_preference == 0.0
    assert response.stats.termination == pb.TERMINATION_OPTIMAL
    # Unpriced, best fit puts every job on the first nodes, wherever they are.
    assert any(
        zone[n] != "b"
        for a in free.plan.assignments
        if a.job == "eval"
        for s in a.placement
        for n in [s.node]
    )
    # Zone b is a100-2 and a100-3 (tainted): eval prefers one, tolerant both, train a100-0/1.
    assert [(j.job, j.preferred_nodes) for j in summary.jobs] == [
        ("eval", 1),
        ("train", 2),
        ("tolerant", 2),
    ]
    assert [j.HasField("preferred_nodes") for j in fewer.jobs] == [True, True, False]
    assert fewer.jobs[0].preferred_nodes == 3
    assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert bad_request(e.value) == [
        ("jobs[1].node_preferences[0].weight", "must be 1 to 100, got 0")
    ]


def _two_mig_nodes(*, layouts: bool) -> Problem:
    """mig_cases' one-GPU node n0 (in seven free 1g instances with `layouts`, else whole) and
    a whole one, n1; seven 1g jobs that would rather not run on n0."""
    sevens = (GpuLayout(0, tuple(MigInstance(mig_cases.ONE_G, k) for k in range(7))),)
    liked = NodePreference({"n0": 1.0})
    one = mig_cases.problem(
        *(dataclasses.replace(mig_cases.small(f"j{k}"), preference=liked) for k in range(7)),
        layouts=sevens if layouts else (),
        backend=Backend.HEURISTIC,
    )
    n1 = dataclasses.replace(one.cluster.nodes[0], name="n1", rack="r1", mig_layouts=())
    return dataclasses.replace(
        one, cluster=dataclasses.replace(one.cluster, nodes=(one.cluster.nodes[0], n1))
    )


def test_the_slice_packer_takes_a_spare_gpu_on_a_node_the_job_likes_first() -> None:
    """Both GPUs whole and spare, n0 first: a job that dislikes n0 gets its instance on n1."""
    p = _two_mig_nodes(layouts=False)
    configs = build_config_set(p)
    packer = Packer(p, configs, [queued_assignment(p, configs, j) for j in p.jobs], {})
    assert [node for node, _ in packer.spare["A100-80GB"]] == ["n0", "n1"]
    assert packer.try_new(p.jobs[0]) is True
    [(_, gpu, _)] = packer.packed.values()
    assert gpu == ("n1", 0)


def test_slice_jobs_go_to_instances_on_nodes_they_like_when_there_is_room() -> None:
    """n0's seven free instances would save a reconfiguration; the jobs on instances go to n1
    all the same (the first one's new layout takes the others at no further cost). One job runs
    on n0's GPU whole, paying its preference: a whole GPU is worth more to it than that."""
    p = _two_mig_nodes(layouts=True)
    r = solve(p)
    assert check_plan(p, r.plan.assignments, r.plan.layout_changes) == []
    on = {a.job: a.placement[0].node for a in r.plan.assignments if a.mig is not None}
    whole = [a for a in r.plan.assignments if a.mig is None and a.placement]
    assert set(on.values()) == {"n1"} and len(on) == 6
    assert [a.placement[0].node for a in whole] == ["n0"]
    assert r.plan.objective.node_preference == pytest.approx(1.0)


def _mig_disliked(seed: int) -> tuple[Problem, ConfigSet, float]:
    """mig_bruteforce's random snapshots (one node), every job disliking it by half, priced so
    that it counts: the enumeration scores every plan with score_plan."""
    p = random_mig(seed)
    liked = NodePreference({"n0": 0.5})
    jobs = tuple(dataclasses.replace(j, preference=liked) for j in p.jobs)
    p = dataclasses.replace(
        p, jobs=jobs, weights=dataclasses.replace(p.weights, node_preference=0.3)
    )
    configs = top_clock(build_config_set(p))
    return p, configs, brute_force_mig(p, configs)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("backend", [Backend.CPSAT, Backend.HIGHS])
def test_the_joint_mig_model_prices_preferences_as_score_plan(seed: int, backend: Backend) -> None:
    p, configs, optimum = _mig_disliked(seed)
    f = build_mig(p, configs)
    r = solve_exact(backend, f)
    assert r.values is not None
    plan = extract_mig(f, r.values)
    assert check_plan(p, plan.assignments, plan.layout_changes) == []
    assert plan.objective.total == pytest.approx(optimum, abs=1e-6)
    assert model_value(f, r.values) == pytest.approx(plan.objective.total, abs=1e-9)
    assert plan.objective.node_preference > 0 or not any(a.placement for a in plan.assignments)


def test_a_preference_every_usable_node_misses_is_in_the_bound_and_the_plan_proven() -> None:
    """Both nodes disliked wholly (a preferred zone with no GPU): every placement pays it, the
    aggregated bound counts it, and the plan is proven optimal; liking one node again, the
    bound counts nothing of it."""
    p = two_zones()
    everywhere = NodePreference({"n0": 1.0, "n1": 1.0})
    p = dataclasses.replace(p, jobs=(dataclasses.replace(p.jobs[0], preference=everywhere),))
    r = solve(p)
    assert r.stats.termination is Termination.OPTIMAL
    assert r.plan.objective.node_preference == pytest.approx(1.0)
    assert r.stats.best_bound == pytest.approx(r.plan.objective.total, abs=1e-5)
    unpriced = dataclasses.replace(p, jobs=(dataclasses.replace(p.jobs[0], preference=None),))
    configs = build_config_set(p)
    with_it = solve_aggregate(p, configs, integer=True).best_bound
    without = solve_aggregate(unpriced, configs, integer=True).best_bound
    assert with_it is not None and without is not None
    assert without - with_it == pytest.approx(0.05, abs=1e-5)
    assert solve_aggregate(two_zones(), configs, integer=True).best_bound == pytest.approx(without)
