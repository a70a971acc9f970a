"""Node power states (solver.power_states, solver.search.resume, solver.core.power_states,
solver.scoring.power_checks): suspended nodes used last and resumed when used, idle nodes
suspended by the policy with spares kept, the checker's rules one at a time."""

from __future__ import annotations

import dataclasses

from solver.core.power_states import awake_problem, with_power_actions
from solver.domain import (
    Allocation,
    Backend,
    GpuSlice,
    JobAssignment,
    JobState,
    ObjectiveBreakdown,
    Plan,
    Problem,
    Shape,
    SolveResult,
    SolveStats,
    Termination,
)
from solver.perfmodel.configs import resolve_config
from solver.power_states import (
    NodePower,
    NodePowerState,
    PowerAction,
    PowerActionKind,
    PowerSaving,
)
from solver.scoring.checker import check_plan
from solver.scoring.evaluation import evaluate_allocations
from tests.factories import A100, cluster, job, node, point, problem, solve

UP, ASLEEP = NodePowerState.UP, NodePowerState.SUSPENDED
SUSPEND, RESUME = PowerActionKind.SUSPEND, PowerActionKind.RESUME


def powered(name: str, state: NodePowerState = UP, idle: float = 0.0, count: int = 8) -> object:
    return dataclasses.replace(node(name, count=count), power=NodePower(state, idle, 300.0))


def snapshot(*nodes: object, saving: PowerSaving | None = None, jobs: int = 1) -> Problem:
    c = cluster(*nodes)  # type: ignore[arg-type]
    if saving is not None:
        c = dataclasses.replace(c, power_saving=saving)
    eight = [job(f"j{k}", point(8, 100.0), min_gpus=8, max_gpus=8) for k in range(jobs)]
    return problem(c, *eight, backend=Backend.HEURISTIC, budget=2.0)


POLICY = PowerSaving(enabled=True, suspend_after_seconds=600.0, spare_nodes_per_type=1)


def actions(p: Problem) -> tuple[object, list[tuple[str, PowerActionKind]]]:
    r = solve(p)
    plan = r.plan
    assert check_plan(p, plan.assignments, plan.layout_changes, plan.power_actions) == []
    return r, sorted((a.node, a.kind) for a in plan.power_actions)


def test_an_up_node_is_used_before_a_suspended_one() -> None:
    r, acts = actions(snapshot(powered("asleep", ASLEEP), powered("up")))
    [a] = r.plan.assignments  # type: ignore[attr-defined]
    assert {s.node for s in a.placement} == {"up"}
    assert acts == []


def test_a_queued_job_wakes_a_suspended_node() -> None:
    r, acts = actions(snapshot(powered("up"), powered("asleep", ASLEEP), jobs=2))
    nodes = {s.node for a in r.plan.assignments for s in a.placement}  # type: ignore[attr-defined]
    assert nodes == {"up", "asleep"}
    assert acts == [("asleep", RESUME)]
    assert "1 resumed" in r.stats.detail  # type: ignore[attr-defined]


def test_idle_nodes_are_suspended_longest_idle_first_keeping_a_spare() -> None:
    p = snapshot(
        powered("busy", idle=5000.0),
        powered("idle-long", idle=3000.0),
        powered("idle-short", idle=900.0),
        powered("fresh", idle=100.0),
        saving=POLICY,
    )
    r, acts = actions(p)
    # The job goes to one node (best fit keeps cluster order); three stay empty, two may go
    # (fresh has not been idle 600 s), and one empty node stays up as the spare.
    used = {s.node for a in r.plan.assignments for s in a.placement}  # type: ignore[attr-defined]
    assert used == {"busy"}
    assert acts == [("idle-long", SUSPEND), ("idle-short", SUSPEND)]
    spare = dataclasses.replace(POLICY, spare_nodes_per_type=2)
    _, acts = actions(
        dataclasses.replace(p, cluster=dataclasses.replace(p.cluster, power_saving=spare))
    )
    assert acts == [("idle-long", SUSPEND)]


def test_excluded_nodes_and_a_disabled_policy_suspend_nothing() -> None:
    nodes = (powered("a", idle=5000.0), powered("b", idle=5000.0), powered("c", idle=5000.0))
    excluded = dataclasses.replace(
        POLICY, exclude_nodes=frozenset({"b", "c"}), spare_nodes_per_type=0
    )
    _, acts = actions(snapshot(*nodes, saving=excluded))
    assert acts == []
    _, acts = actions(snapshot(*nodes, saving=dataclasses.replace(POLICY, enabled=False)))
    assert acts == []


def test_without_power_states_the_plan_is_the_same() -> None:
    plain = snapshot(node("a"), node("b"), jobs=2)
    r = solve(plain)
    assert r.plan.power_actions == () and "power states" not in r.stats.detail


def test_a_bound_over_every_node_when_some_sleep() -> None:
    r, _ = actions(snapshot(powered("up"), powered("asleep", ASLEEP), jobs=2))
    s = r.stats  # type: ignore[attr-defined]
    assert s.best_bound is not None and s.best_bound >= s.objective - 1e-9
    assert s.termination in (Termination.OPTIMAL, Termination.FEASIBLE)


# ---------------------------------------------------------------- the checker, rule by rule


def on(node_name: str) -> list[JobAssignment]:
    p = snapshot(powered("x"))
    config = solve(p).plan.assignments[0].config
    assert config is not None
    return [JobAssignment("j0", JobState.RUNNING, config, (GpuSlice(node_name, tuple(range(8))),))]


def constraints(p: Problem, plan: list[JobAssignment], acts: list[PowerAction]) -> list[str]:
    return [v.message for v in check_plan(p, plan, (), acts) if v.constraint == "power_state"]


def test_checker_a_job_on_a_suspended_node_needs_its_resume() -> None:
    p = snapshot(powered("asleep", ASLEEP))
    assert constraints(p, on("asleep"), []) == ["node asleep is suspended and not resumed"]
    assert constraints(p, on("asleep"), [PowerAction("asleep", RESUME)]) == []


def test_checker_resume_only_a_suspended_node_a_job_uses() -> None:
    p = snapshot(powered("up"), powered("asleep", ASLEEP))
    assert constraints(p, on("up"), [PowerAction("up", RESUME)]) == [
        "RESUME of up, which is not suspended"
    ]
    assert constraints(p, on("up"), [PowerAction("asleep", RESUME)]) == [
        "RESUME of asleep, which no job uses"
    ]


def test_checker_suspend_only_what_the_policy_lets_go() -> None:
    no_spare = dataclasses.replace(POLICY, spare_nodes_per_type=0)
    p = snapshot(powered("a", idle=5000.0), powered("b", idle=10.0), saving=no_spare)
    assert constraints(p, on("a"), [PowerAction("b", SUSPEND)]) == [
        "b is not up and idle for suspend_after"
    ]
    assert constraints(p, on("a"), [PowerAction("a", SUSPEND)]) == [
        "SUSPEND of a, which runs a job"
    ]
    off = snapshot(powered("a", idle=5000.0), powered("b", idle=5000.0))
    assert constraints(off, on("a"), [PowerAction("b", SUSPEND)]) == [
        "the policy does not let b suspend"
    ]


def test_checker_keeps_the_spare_nodes() -> None:
    p = snapshot(powered("a"), powered("b", idle=5000.0), powered("c", idle=5000.0), saving=POLICY)
    both = [PowerAction("b", SUSPEND), PowerAction("c", SUSPEND)]
    assert constraints(p, on("a"), both) == ["fewer than 1 empty A100 nodes left up"]
    assert constraints(p, on("a"), both[:1]) == []


def test_a_plan_made_on_the_nodes_awake_is_scored_on_the_whole_cluster() -> None:
    """A 16-GPU job on n0 (rack r0) and n2 (r1): with n1 (r0) asleep the awake cluster needs
    two racks for 16 GPUs, the snapshot's one; the answer's locality counts the extra rack, as
    EvaluatePlan does (before: 0 against 1, found by bench_unseen --energy-features)."""
    n0, n1 = powered("n0"), powered("n1", ASLEEP)
    n2 = dataclasses.replace(node("n2", rack="r1"), power=NodePower(UP, 0.0, 300.0))
    c = dataclasses.replace(cluster(n0, n1, n2), power_saving=POLICY)  # type: ignore[arg-type]
    big = job("big", point(16, 100.0), min_gpus=16, max_gpus=16)
    p = problem(c, big, backend=Backend.HEURISTIC, budget=2.0)
    config = resolve_config(awake_problem(p), big, Shape(A100.name, 16, 1, 1), A100.max_clock_mhz)
    assert config is not None and config.min_racks == 2
    eight = tuple(range(8))
    placed = JobAssignment(
        "big", JobState.RUNNING, config, (GpuSlice("n0", eight), GpuSlice("n2", eight))
    )
    zero = ObjectiveBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    stats = SolveStats(Termination.FEASIBLE, Backend.HEURISTIC, 0.0, None, None, 0.0, 0.0, 0, 0)
    out = with_power_actions(p, SolveResult(Plan((placed,), zero), stats), 0.0)
    assert out.plan.objective.locality == 1.0
    allocations = {"big": Allocation(config.shape, A100.max_clock_mhz, placed.placement)}
    evaluated = evaluate_allocations(p, allocations, (), out.plan.power_actions)
    assert evaluated.plan is not None
    assert out.stats.objective == evaluated.plan.objective.total
