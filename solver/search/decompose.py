"""Decomposition for snapshots too large for one model (POP-style partitioning).

Racks (kept whole, and joined where a running job spans them) and jobs are split into parts of
similar GPU capacity per type; every part is solved on its own through an Executor, in two
rounds: configurations and a greedy plan first (merged: the first plan), then the aggregated
LP's guided plan and local search within the time left. The merged plan is completed by one
global pass that starts queued jobs wherever room is left, and checked as a whole.

Configurations are enumerated against the whole cluster's facts, and every part scores with
the whole cluster's power reference, so part objectives add up to the global one exactly and
the Lagrangian bound over all parts' configurations is a valid bound for the whole snapshot.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from solver.domain import Cluster, Fairness, Job, Node, Plan, Problem
from solver.perfmodel import budgets, quotas
from solver.perfmodel.configs import ConfigSet, TypeFacts, build_config_set, type_facts
from solver.runtime.pools import Executor, Stop, Stopped, WorkerLost
from solver.scoring.fairness import part_fairness
from solver.scoring.plans import Choice
from solver.search.bound import solve_aggregate
from solver.search.heuristic import Heuristic


@dataclass(frozen=True)
class Part:
    problem: Problem
    """The part as a problem of its own: its racks' nodes and its jobs."""


def _rack_groups(problem: Problem) -> list[list[str]]:
    """Racks joined where a running job's GPUs span several (union-find)."""
    parent = {r: r for r in problem.cluster.racks}

    def root(r: str) -> str:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    for job in problem.jobs:
        if job.current is None:
            continue
        racks = [problem.cluster.node(s.node).rack for s in job.current.placement]
        for other in racks[1:]:
            parent[root(other)] = root(racks[0])
    groups: dict[str, list[str]] = {}
    for r in sorted(parent):
        groups.setdefault(root(r), []).append(r)
    return list(groups.values())


def partition(problem: Problem, parts: int, seed: int) -> list[Part]:
    """Split racks and jobs into `parts` parts balanced in GPUs per type and in demand."""
    cluster = problem.cluster
    types = sorted(cluster.gpu_types)
    rack_gpus: dict[str, dict[str, int]] = {}
    for n in cluster.nodes:
        per = rack_gpus.setdefault(n.rack, dict.fromkeys(types, 0))
        per[n.gpu_type] += n.available_gpus
    total = {t: max(sum(r[t] for r in rack_gpus.values()), 1) for t in types}
    groups = _rack_groups(problem)
    rng = random.Random(seed)
    rng.shuffle(groups)
    groups.sort(key=lambda g: -sum(sum(rack_gpus[r].values()) for r in g))
    load = [dict.fromkeys(types, 0) for _ in range(parts)]
    part_racks: list[set[str]] = [set() for _ in range(parts)]
    for g in groups:
        gpus = {t: sum(rack_gpus[r][t] for r in g) for t in types}

        def worst(p: int, gpus: dict[str, int] = gpus) -> tuple[float, int]:
            return (max((load[p][t] + gpus[t]) / total[t] for t in types), p)

        best = min(range(parts), key=worst)
        part_racks[best].update(g)
        for t in types:
            load[best][t] += gpus[t]
    rack_part = {r: p for p, racks in enumerate(part_racks) for r in racks}

    jobs_of: list[list[Job]] = [[] for _ in range(parts)]
    demand = [0.0] * parts
    waiting = []
    for job in problem.jobs:
        if job.current is not None:
            p = rack_part[cluster.node(job.current.placement[0].node).rack]
            jobs_of[p].append(job)
            demand[p] += job.max_gpus
        else:
            waiting.append(job)
    rng.shuffle(waiting)
    # Room per part for each set of usable types and barred nodes, computed once a set, in
    # numpy (2,000 jobs each barring its own 19,950 of 20,000 nodes: 15 s walked node by node).
    rooms: dict[tuple[tuple[str, ...], frozenset[str]], npt.NDArray[np.float64]] = {}
    pending = np.array(demand, dtype=np.float64)
    avail = np.array([n.available_gpus for n in cluster.nodes], dtype=np.float64)
    part_of = np.array([rack_part[n.rack] for n in cluster.nodes], dtype=np.int64)
    type_of = np.array([n.gpu_type for n in cluster.nodes])
    for job in waiting:
        usable = tuple(t for t in types if job.allows(t)) or tuple(types)
        room = rooms.get((usable, job.barred_nodes))
        if room is None:
            free = np.array([float(sum(load[p][t] for t in usable)) for p in range(parts)])
            if job.barred_nodes:
                at = np.fromiter(cluster.positions(job.barred_nodes), dtype=np.int64)
                at = at[np.isin(type_of[at], usable)]
                free -= np.bincount(part_of[at], weights=avail[at], minlength=parts)
            room = np.maximum(free, 1.0)
            rooms[(usable, job.barred_nodes)] = room
        # The least pressed part, the first at ties: demand over room after the job.
        p = int(np.argmin((pending + job.max_gpus) / room))
        jobs_of[p].append(job)
        pending[p] += job.max_gpus
    order = {j.name: i for i, j in enumerate(problem.jobs)}
    fairness = part_fairness(problem, None)
    return [
        Part(_sub_problem(problem, part_racks[p], jobs_of[p], p, order, fairness))
        for p in range(parts)
    ]


def _sub_problem(
    problem: Problem,
    racks: set[str],
    jobs: list[Job],
    index: int,
    order: Mapping[str, int],
    fairness: Fairness,
) -> Problem:
    """The part's racks and jobs (in the problem's job order) as a problem of its own."""
    cluster = problem.cluster
    nodes = tuple(n for n in cluster.nodes if n.rack in racks)
    budget = None
    if cluster.power_budget_watts is not None:
        budget = _power_share(cluster, nodes)
    # Everything else of the cluster carries over: the power-saving policy prices a suspended
    # node's floor (without it a part took 0 W for it and overran a rack budget).
    sub = dataclasses.replace(
        cluster,
        nodes=nodes,
        power_budget_watts=budget,
        rack_power_budgets_watts={
            r: w for r, w in cluster.rack_power_budgets_watts.items() if r in racks
        },
        reference_gpu_watts=cluster.max_gpu_watts(),
        queues=quotas.part_queues(cluster, nodes),
    )
    options = dataclasses.replace(problem.options, threads=1, seed=problem.options.seed + index)
    ordered = tuple(sorted(jobs, key=lambda j: order[j.name]))
    return Problem(sub, ordered, problem.weights, options, fairness)


def _power_share(cluster: Cluster, nodes: Sequence[Node]) -> float:
    """The part's floor plus its share of the budget's headroom, by dynamic range."""
    assert cluster.power_budget_watts is not None

    def idle(ns: Sequence[Node]) -> float:
        return sum(budgets.node_floor_watts(cluster, n) for n in ns)

    def span(ns: Sequence[Node]) -> float:
        return sum(
            n.gpu_count
            * (cluster.gpu_types[n.gpu_type].tdp_watts - cluster.gpu_types[n.gpu_type].idle_watts)
            for n in ns
        )

    headroom = budgets.power_room(cluster) or 0.0
    return idle(nodes) + headroom * span(nodes) / max(span(cluster.nodes), 1e-9)


# ---------------------------------------------------------------- work done in the workers


SECOND_ROUND_SECONDS = 0.5
"""The second round starts with this much time left after the first (xl's parts: seconds each)."""
SECOND_ROUND_PACE = 8.0
"""... or with this many times the first round's time left, when that is less: a part's
second round (its aggregated LP and guided placement) took 3-6 times its first at 200 jobs a
part (0.09-0.12 s against 0.02-0.03 s); with the fixed 0.5 s alone, a warm 1 s call at 400
jobs answered after 0.14 s with the first round's plan, 45 % below its 3 s answer."""
SECOND_ROUND_MIN_SECONDS = 0.1
"""... and never with less than this."""


def second_round_need(first_seconds: float) -> float:
    """Seconds the second round needs left after a first round of `first_seconds`."""
    return max(
        SECOND_ROUND_MIN_SECONDS, min(SECOND_ROUND_SECONDS, SECOND_ROUND_PACE * first_seconds)
    )


OVERRUN_SHARE = 0.05
"""The second round may run this share of the window past its end before its parts are
dropped: a wave of parts started late still finishes, one that hangs does not hold the
answer."""


@dataclass(frozen=True)
class GreedyTask:
    problem: Problem
    facts: Mapping[str, TypeFacts]
    """The whole cluster's facts: configurations as a global enumeration would make them."""
    seconds: float


@dataclass(frozen=True)
class GreedyResult:
    configs: ConfigSet
    choices: dict[str, Choice]


@dataclass(frozen=True)
class ImproveTask:
    problem: Problem
    configs: ConfigSet
    choices: dict[str, Choice]
    seconds: float


def greedy_part(task: GreedyTask) -> GreedyResult:
    """Round 1 in a worker: the part's configurations and its first greedy pass (round 2
    improves it): the whole snapshot's first plan comes as soon as every part has one."""
    configs = build_config_set(task.problem, task.facts)
    heuristic = Heuristic(task.problem, configs)
    state = heuristic.greedy(0.0, time.monotonic() + task.seconds)
    return GreedyResult(configs, dict(state.choices))


def improve_part(task: ImproveTask) -> dict[str, Choice]:
    """Round 2 in a worker: the aggregated LP's guided plan against the round-1 plan."""
    end = time.monotonic() + task.seconds
    heuristic = Heuristic(task.problem, task.configs)
    current = heuristic.complete(task.choices, end)
    if time.monotonic() < end:
        lp = solve_aggregate(task.problem, task.configs)
        if lp.choice:
            guided = heuristic.run_guided(lp.choice, end, lp.racks)
            if guided.objective.total > current.objective.total:
                return _choices(guided)
    return _choices(current)


def _choices(plan: Plan) -> dict[str, Choice]:
    return {
        a.job: (a.config, a.gpus_per_node())
        for a in plan.assignments
        if a.config is not None and a.placement
    }


# ---------------------------------------------------------------- in the caller


@dataclass(frozen=True)
class Decomposition:
    configs: ConfigSet
    """All parts' configurations: the global configuration set."""
    first: dict[str, Choice]
    first_seconds: float
    final: dict[str, Choice]
    parts: int
    lost: str = ""
    """Why the second round's work was lost (a worker died, or the solve was stopped), or
    empty."""
    cut: str = ""
    """Why the second round was cut short at its end, or empty."""


def solve_decomposed(
    problem: Problem,
    executor: Executor,
    *,
    end: float,
    part_gpus: int,
    parts: int | None = None,
    stop: Stop | None = None,
) -> Decomposition:
    """Both rounds over `executor`; `end` is the time.monotonic() instant to be done by; parts
    of about `part_gpus` GPUs each (or `parts` parts), at least one per worker.

    Once `stop()` is true the parts are dropped: in the first round that raises Stopped (no
    plan exists yet), in the second the first round's plan stands. A worker that dies in the
    first round raises WorkerLost; a Ray cluster that goes away, RayConnectionError (a
    ConnectionError); in the second round, either leaves the first round's plan.
    """
    start = time.monotonic()
    total_gpus = sum(n.available_gpus for n in problem.cluster.nodes)
    k = parts or max(executor.workers, round(total_gpus / part_gpus), 1)
    pieces = partition(problem, k, problem.options.seed)
    facts = type_facts(problem.cluster)
    waves = -(-k // executor.workers)
    # A safety stop only: the local search is limited by passes, not by the clock.
    greedy_seconds = 0.4 * (end - start) / waves
    results = executor.map(
        greedy_part, [GreedyTask(p.problem, facts, greedy_seconds) for p in pieces], stop
    )
    configs = ConfigSet(
        by_job={j: c for r in results for j, c in r.configs.by_job.items()},
        best_samples_per_second={
            j: b for r in results for j, b in r.configs.best_samples_per_second.items()
        },
        num_enumerated=sum(r.configs.num_enumerated for r in results),
        least_joules_per_sample={
            j: e for r in results for j, e in r.configs.least_joules_per_sample.items()
        },
    )
    first = {j: c for r in results for j, c in r.choices.items()}
    first_seconds = time.monotonic() - start
    left = end - time.monotonic()
    final = first
    lost = cut = ""
    if left > second_round_need(first_seconds):
        seconds = 0.8 * left / waves
        # Parts that run past the end are dropped (their workers killed), whatever they
        # would bring: the answer is due.
        late = end + OVERRUN_SHARE * (end - start)

        def halt() -> bool:
            return (stop is not None and stop()) or time.monotonic() >= late

        try:
            improved = executor.map(
                improve_part,
                [
                    ImproveTask(p.problem, r.configs, r.choices, seconds)
                    for p, r in zip(pieces, results, strict=True)
                ],
                halt,
            )
            final = {j: c for part in improved for j, c in part.items()}
        except (WorkerLost, ConnectionError) as e:  # the first round's plan stands
            lost = str(e)
        except Stopped as e:
            if stop is not None and stop():
                lost = str(e)
            else:
                cut = "the second round ran past its end; its parts were dropped"
    return Decomposition(configs, first, first_seconds, final, k, lost, cut)
