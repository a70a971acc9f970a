"""Aggregated model: configurations against GPU pools per type (and per rack where racks have
power budgets), without node placement.

It relaxes the full model (placement can only lose GPUs to fragmentation and pay locality), so
its proven optimum is a valid upper bound on the whole problem. Its solution is also a strong
guide: a configuration choice to place greedily.

Where racks have power budgets, the GPUs of each power class (a type and a draw per GPU) are
split (continuously) over the racks of their type: each rack's GPUs of each type and its budget
above idle bound what goes there; the guide hands each chosen job its share of its class. Without
this, a budget split over racks leaves the bound several per cent loose when racks bind.
A running job kept in its shape on its own GPUs (not migrated) draws in its own racks, not on
its class's split: a column of its own earns the migration back (at 1,024 nodes the bound fell
0.05-0.06 %, and the MIP's choices became placeable: docs/benchmarks.md).
The LP is built as arrays and solved by HiGHS's simplex.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np
import numpy.typing as npt

from solver.domain import Config, Job, Problem
from solver.perfmodel import budgets, quotas
from solver.perfmodel.configs import ConfigSet
from solver.scoring.fairness import FairnessTerms
from solver.scoring.objective import migration_cost, queued_value, running_gain
from solver.search.array_lp import INF, ArrayLp
from solver.search.bound_fairness import add_fairness, holds_fairness
from solver.search.bound_preferences import add_preference_rows, floor_per_gpu
from solver.search.bound_rules import RackRules, add_exclusion_rows
from solver.search.guide import Guide, PowerClass, extract_guide


@dataclass(frozen=True)
class AggregateOutcome:
    status: str
    best_bound: float | None
    """Proven upper bound on the full problem's objective, rounding error included."""
    choice: dict[str, Config]
    """The aggregated solution: a configuration per running job."""
    wall_seconds: float
    racks: dict[str, dict[str, float]] = field(default_factory=dict)
    """Where racks have budgets: how the solution splits each chosen job's GPUs over racks
    (UNBUDGETED for a type's racks without one), a guide for placement."""
    with_fairness: bool = False
    """The model held the fairness term: `best_bound` bounds the whole objective, not the
    objective less weight x F."""


BUILD_CHECK_JOBS = 64
"""The model's build looks at its time limit once per this many jobs (a few milliseconds)."""

LP_SAFETY = 1e-6
"""Relative margin added to the LP optimum: the simplex's optimality tolerances, made explicit."""

MIP_SAFETY = 1e-7
"""Relative margin added to the MIP's dual bound: HiGHS's feasibility tolerances (as for the
full model, solver.exact.backends.highs.BOUND_MARGIN), small enough to prove 1e-6 gaps."""


def solve_aggregate(
    problem: Problem,
    configs: ConfigSet,
    *,
    integer: bool = False,
    time_limit: float | None = None,
    stop: Callable[[], bool] | None = None,
    on_choice: Callable[[Guide, float], None] | None = None,
    slices: bool = False,
    integral_racks: bool = False,
    on_bound: Callable[[float], None] | None = None,
    fairness: bool = False,
) -> AggregateOutcome:
    """LP relaxation of the aggregated model: a bound in milliseconds, and a rounding.

    With `slices`, each slice job may also take one of its slice configurations (docs/mig.md),
    which uses its profile's share of a GPU's SM slices and of its memory slices: per MIG type,
    whole GPUs plus SM shares, and whole GPUs plus memory shares, are within the type's GPUs.
    A valid layout keeps both per GPU, so this relaxes the problem with slices (its rack rows,
    reconfigurations and the idle power of partitioned GPUs left out: each only lowers the
    objective), and its optimum bounds it.

    The multiple-choice knapsack behind it has an LP optimum with few fractional jobs, so
    rounding each job to its heaviest configuration is close to optimal. With `integer`, each
    job's choice is integral (a MIP on HiGHS within `time_limit` of the call, building the model
    included): a tighter bound, often the full problem's optimum when power rather than
    placement binds, and an integral guide.
    With `integral_racks` too, each power class's GPUs per budgeted rack are whole tensor
    groups (as every plan's are): tighter where rack budgets bind (0.08-0.11 % at 1,024 nodes,
    0.1-0.3 % at 128-256 nodes; docs/benchmarks.md), and its choice places with less loss.
    With `integer`, `on_bound(bound)` is told each proven bound as the MIP tightens it.
    With `fairness`, the model holds the fairness term (``solver.search.bound_fairness``;
    not with `slices`), and says so in its outcome.
    """
    start = time.monotonic()
    until = None if time_limit is None else start + time_limit

    def out_of_time() -> bool:
        return (until is not None and time.monotonic() > until) or (stop is not None and stop())

    cluster = problem.cluster
    w = problem.weights
    max_watts = cluster.max_gpu_watts()
    lp = ArrayLp()
    y: dict[str, list[tuple[int, int]]] = {}
    """Per job, its columns: (configuration index, column); a configuration of a job kept on
    its own GPUs has two (moved, and kept in its racks)."""
    pools: dict[str, list[tuple[int, float]]] = {}
    power: list[tuple[int, float]] = []
    offset = 0.0
    rack_pools = _rack_pools(problem)
    budgeted = cluster.rack_power_budgets_watts
    rack_rules = RackRules(problem, lambda n: n.rack if n.rack in budgeted else UNBUDGETED)
    rack_gpus: dict[tuple[str, str], list[tuple[int, float]]] = {}
    rack_power: dict[str, list[tuple[int, float]]] = {}
    classes: dict[PowerClass, list[tuple[str, int, int, float]]] = {}
    """(GPU type, extra watts per GPU, tensor-parallel degree with `integral_racks`, else 0)
    -> its (job, configuration index, column, GPUs)."""
    choice_columns: list[int] = []
    opts = _options(problem, configs, slices)
    memory: dict[str, list[tuple[int, float]]] = {}
    held: dict[str, list[int]] = {}
    """Per running job, the columns that keep it on its own GPUs (at most one is 1)."""
    for k, job in enumerate(problem.jobs):
        # Building is Python and not bounded by HiGHS's time limit: on a loaded machine it ran
        # past the limit (2,048 jobs: 0.35-0.49 s against 0.2), and a model whose time is
        # spent before HiGHS starts proves nothing, so the build stops at the limit too.
        if k % BUILD_CHECK_JOBS == 0 and out_of_time():
            return AggregateOutcome("STOPPED", None, {}, time.monotonic() - start)
        options = opts[job.name]
        offset += queued_value(job, w) - migration_cost(job, w)
        best = configs.best_samples_per_second[job.name]
        least = configs.least_joules(job.name)
        same_shape: list[tuple[int, float]] = []
        kept_racks = _kept_racks(problem, job, rack_pools)
        floor = floor_per_gpu(problem, job)
        cols: list[tuple[int, int]] = []
        for i, c in enumerate(options):
            # Placement terms dropped: w_L (nodes + racks - min) >= 0 only lowers the objective;
            # of the node preferences, only what any placement of the type pays is counted.
            gain = running_gain(job, c, best, w, max_watts, least)
            if floor:
                gain -= floor.get(c.gpu_type, 0.0) * c.num_gpus
            col = lp.column(gain)
            cols.append((i, col))
            compute, memory_share = _gpu_shares(problem, c)
            pools.setdefault(c.gpu_type, []).append((col, compute))
            if slices and c.gpu_type in cluster.mig:
                memory.setdefault(c.gpu_type, []).append((col, memory_share))
            extra_per_gpu = budgets.extra_watts_per_gpu(cluster, c)
            power.append((col, extra_per_gpu * c.num_gpus))
            same = job.current is not None and c.shape == job.current.shape
            if same and kept_racks is None:
                same_shape.append((col, -1.0))
            if c.gpu_type in rack_pools and not c.mig_profile:
                group = c.tensor_parallel if integral_racks else 0
                key = (c.gpu_type, extra_per_gpu, group, rack_rules.rule(job))
                classes.setdefault(key, []).append((job.name, i, col, float(c.num_gpus)))
            if same and kept_racks is not None:
                # Kept (not migrated) means on its own GPUs, so in its own racks: the column
                # that earns the migration back draws there, not on its class's split.
                kept = lp.column(gain + migration_cost(job, w))
                cols.append((i, kept))
                held.setdefault(job.name, []).append(kept)
                same_shape.append((kept, -1.0))
                pools[c.gpu_type].append((kept, compute))
                if slices and c.gpu_type in cluster.mig:
                    memory[c.gpu_type].append((kept, memory_share))
                power.append((kept, extra_per_gpu * c.num_gpus))
                for rack, gpus in kept_racks.items():
                    rack_gpus.setdefault((rack, c.gpu_type), []).append((kept, gpus))
                    rack_power.setdefault(rack, []).append((kept, extra_per_gpu * gpus))
        y[job.name] = cols
        choice_columns.extend(col for _, col in cols)
        if cols:
            lp.choice([col for _, col in cols])
        if same_shape:
            forced = job.current is not None and not job.preemptible
            if kept_racks is not None:
                if forced:
                    lp.row([(col, 1.0) for col, _ in same_shape], lo=1.0)
            else:
                keep = lp.column(migration_cost(job, w), 1.0 if forced else 0.0, 1.0)
                held[job.name] = [keep]
                lp.row([(keep, 1.0), *same_shape], hi=0.0)
    _add_quota_rows(lp, problem, opts, y)
    add_exclusion_rows(lp, problem, opts, y, held, lambda c: _gpu_shares(problem, c)[0])
    add_preference_rows(lp, problem, opts, y, held)
    with_fairness = fairness and not slices and holds_fairness(problem)
    picks: list[int] = []
    if with_fairness:
        f_terms = FairnessTerms(problem, configs.best_samples_per_second)
        picks, constant = add_fairness(lp, f_terms, opts, y)
        offset += constant
    # The split over racks, per power class: configurations of one type that draw the same
    # watts per GPU weigh alike in every rack row, so splitting their sum is exact (any split
    # of the sum disaggregates in proportion) and the LP has a column per class and rack, not
    # per configuration and rack (360,000 columns at 1,024 nodes in 26 racks became 6,000).
    splits: dict[PowerClass, list[tuple[str, int]]] = {}
    split_columns: list[int] = []
    # With `integral_racks`, a class holds one tensor-parallel degree and its split counts
    # whole groups: a group never spans nodes, so a job's GPUs in a rack are whole groups.
    ruled: dict[tuple[frozenset[str], str, str], list[tuple[int, float]]] = {}
    for key, members in classes.items():
        gpu_type, extra_per_gpu, group, rule = key
        unit = float(group or 1)
        split = [(col, -gpus) for _, _, col, gpus in members]
        left = rack_rules.left(rule, gpu_type) if rule else None
        for rack in rack_pools[gpu_type]:
            if left is not None and rack not in left:
                continue  # the rule leaves its jobs nothing there
            z = lp.column(0.0, 0.0, INF)
            if left is not None:
                ruled.setdefault((rule, rack, gpu_type), []).append((z, unit))
            if integral_racks:
                split_columns.append(z)
            splits.setdefault(key, []).append((rack, z))
            split.append((z, unit))
            rack_gpus.setdefault((rack, gpu_type), []).append((z, unit))
            rack_power.setdefault(rack, []).append((z, extra_per_gpu * unit))
        lp.row(split, 0.0, 0.0)
    for gpu_type, terms in [*pools.items(), *memory.items()]:
        capacity = sum(n.available_gpus for n in cluster.nodes if n.gpu_type == gpu_type)
        lp.row(terms, hi=float(capacity))
    available: dict[tuple[str, str], int] = {}
    for n in cluster.nodes:
        available[n.rack, n.gpu_type] = available.get((n.rack, n.gpu_type), 0) + n.available_gpus
    room = budgets.power_room(cluster)
    if room is not None:
        lp.row(power, hi=room)
    for rack_type, terms in rack_gpus.items():
        if rack_type[0] != UNBUDGETED:  # those GPUs are bounded by their type's pool
            lp.row(terms, hi=float(available[rack_type]))
    for (rule, rack, gpu_type), terms in ruled.items():  # and by the rule's rows (bound_rules)
        if rack != UNBUDGETED:
            lp.row(terms, hi=float(rack_rules.left(rule, gpu_type)[rack]))
    rack_room = budgets.rack_power_room(cluster)
    for rack, terms in rack_power.items():
        if rack in rack_room:
            lp.row(terms, hi=rack_room[rack])
    if not lp.cost:
        bound = _with_margin(offset, LP_SAFETY)
        return AggregateOutcome("OPTIMAL", bound, {}, time.monotonic() - start)

    def improved(values: npt.NDArray[np.float64], objective: float) -> None:
        if on_choice is not None:
            on_choice(extract_guide(problem, opts, y, classes, splits, values), objective + offset)

    def tighter(objective: float) -> None:
        assert on_bound is not None  # only handed to the MIP with one
        on_bound(_with_margin(objective + offset, MIP_SAFETY))

    if out_of_time():  # handing the model to HiGHS alone takes 0.07 s at 2,048 jobs
        return AggregateOutcome("STOPPED", None, {}, time.monotonic() - start)
    status, objective, values = lp.solve(
        [*choice_columns, *split_columns, *picks] if integer else None,
        until,
        stop,
        improved if on_choice is not None else None,
        tighter if on_bound is not None else None,
    )
    elapsed = time.monotonic() - start
    if status == highspy.HighsModelStatus.kInfeasible:
        return AggregateOutcome("INFEASIBLE", None, {}, elapsed)
    name = "OPTIMAL" if status == highspy.HighsModelStatus.kOptimal else "STOPPED"
    if objective is None:
        return AggregateOutcome(name, None, {}, elapsed)
    value = objective + offset
    bound = _with_margin(value, MIP_SAFETY if integer else LP_SAFETY)
    if values is None:
        return AggregateOutcome(name, bound, {}, elapsed, with_fairness=with_fairness)
    guide = extract_guide(problem, opts, y, classes, splits, values)
    return AggregateOutcome(name, bound, guide.choice, elapsed, guide.racks, with_fairness)


def _with_margin(value: float, safety: float) -> float:
    """A solver's optimum or dual bound `value` as a proven upper bound: its tolerances added
    (relative, at least absolute for values near 0)."""
    return value + safety * max(abs(value), 1.0)


def _add_quota_rows(
    lp: ArrayLp,
    problem: Problem,
    opts: Mapping[str, Sequence[Config]],
    y: Mapping[str, list[tuple[int, int]]],
) -> None:
    """The queues' quotas over the choice columns (docs/fairness.md): each queue within its
    limit per resource; per cohort, claims (a column each, at least the queue's usage and what
    it keeps unlent) within the cohort's nominal quota."""
    cluster = problem.cluster
    if not cluster.queues:
        return
    terms: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for job in problem.jobs:
        queue = cluster.queue_of(job.tenant)
        if queue is None:
            continue
        for i, col in y[job.name]:
            for resource, amount in quotas.demand(opts[job.name][i]).items():
                if queue.quota(resource) is not None:
                    terms.setdefault((queue.name, resource), []).append((col, amount))
    cohorts: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for q in cluster.queues:
        for resource in sorted({r for (n, r) in terms if n == q.name} | set(q.quotas)):
            quota = q.quota(resource)
            if quota is None:
                continue
            usage = terms.get((q.name, resource), [])
            if not q.cohort:
                if usage:
                    lp.row(usage, hi=quota.nominal)
                continue
            claim = lp.column(0.0, quota.guaranteed, INF)
            lp.row([*usage, (claim, -1.0)], hi=0.0)
            cohorts.setdefault((q.cohort, resource), []).append((claim, quota.nominal))
            if quota.borrowing_limit is not None and usage:
                lp.row(usage, hi=quota.nominal + quota.borrowing_limit)
    for parts in cohorts.values():
        lp.row([(claim, 1.0) for claim, _ in parts], hi=sum(n for _, n in parts))


def _kept_racks(
    problem: Problem, job: Job, rack_pools: Mapping[str, list[str]]
) -> dict[str, float] | None:
    """A running job's GPUs per rack (UNBUDGETED for racks without a budget), where racks of
    its type have budgets and its GPUs are all still there to keep; else None."""
    current = job.current
    if current is None or current.mig is not None or current.shape.gpu_type not in rack_pools:
        return None
    budgeted = problem.cluster.rack_power_budgets_watts
    out: dict[str, float] = {}
    for s in current.placement:
        node = problem.cluster.node(s.node)
        if node.gpu_type != current.shape.gpu_type or not set(s.gpu_indices) <= set(
            node.available_gpu_indices
        ):
            return None
        rack = node.rack if node.rack in budgeted else UNBUDGETED
        out[rack] = out.get(rack, 0.0) + len(s.gpu_indices)
    return out


def _options(problem: Problem, configs: ConfigSet, slices: bool) -> dict[str, Sequence[Config]]:
    """Each job's configurations in the model: whole-GPU ones, and with `slices` its slice ones."""
    if not slices:
        return dict(configs.by_job)
    return {
        j.name: (*configs.by_job[j.name], *configs.slices.get(j.name, ())) for j in problem.jobs
    }


def _gpu_shares(problem: Problem, c: Config) -> tuple[float, float]:
    """What a configuration takes of its type's GPUs, in SM slices and in memory slices:
    its GPUs whole, or its instance's shares of one GPU."""
    if not c.mig_profile:
        return float(c.num_gpus), float(c.num_gpus)
    geometry = problem.cluster.mig[c.gpu_type]
    p = geometry.profiles[c.mig_profile]
    return (
        p.compute_slices / geometry.compute_slices,
        p.memory_slices / geometry.memory_slices,
    )


def aggregate_columns(problem: Problem, configs: ConfigSet) -> int:
    """Columns of the aggregated LP, what its cost grows with: one per configuration, and
    where racks have power budgets one per power class of a type and rack of it."""
    pools = {t: len(racks) for t, racks in _rack_pools(problem).items()}
    cluster = problem.cluster
    classes = {
        (c.gpu_type, budgets.extra_watts_per_gpu(cluster, c))
        for options in configs.by_job.values()
        for c in options
        if c.gpu_type in pools
    }
    return configs.num_configurations + sum(pools[t] for t, _ in classes)


def _rack_pools(problem: Problem) -> dict[str, list[str]]:
    """Per GPU type, the racks its GPUs are split over: every rack with a power budget that
    holds the type, and one pool for the type's GPUs in racks without a budget (those are
    bounded by the type's pool alone). Empty when no rack has a budget."""
    cluster = problem.cluster
    budgets = cluster.rack_power_budgets_watts
    if not budgets:
        return {}
    out: dict[str, list[str]] = {}
    for n in cluster.nodes:
        if n.available_gpus == 0:
            continue
        racks = out.setdefault(n.gpu_type, [])
        rack = n.rack if n.rack in budgets else UNBUDGETED
        if rack not in racks:
            racks.append(rack)
    return out


UNBUDGETED = "\0unbudgeted"
"""Pseudo-rack of a type's GPUs in racks without a power budget."""
