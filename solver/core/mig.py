"""MIG in a solve: slice jobs packed around the whole-GPU paths' plan (docs/mig.md, "What each
path does with slices").

The whole-GPU paths (heuristic, aggregated bound, full model, LNS, decomposition, quick plan)
do not model MIG. They solve `whole_problem`: the snapshot with every partitioned GPU that
holds a job unavailable (a partitioned GPU no job is on is a whole GPU to them, changed back to
whole when they use it), without the non-preemptible slice jobs, which stay on their instances,
and with the power and quota those draw taken from the budgets. `solve_with_slices` then packs
the slice jobs into that plan (solver.search.slices), checks the result against the snapshot
and labels it: the whole-GPU paths' bound is not a bound of the snapshot with slices, so none
is reported and nothing is called optimal.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping

from solver.core.deadline import reserve_by_size
from solver.core.incumbent import infeasible, proven_optimal, relative_gap, termination
from solver.core.mig_consolidate import consolidated
from solver.core.mig_exact import Joint, joint_solve
from solver.domain import (
    POWER,
    Config,
    Plan,
    Problem,
    SolveResult,
    TenantQueue,
    Termination,
)
from solver.perfmodel.configs import ConfigSet, build_config_set
from solver.perfmodel.quotas import demand
from solver.scoring.checker import check_plan
from solver.scoring.fairness import fairness_headroom
from solver.scoring.objective import running_gain
from solver.scoring.plans import on_this_cluster
from solver.search.bound import solve_aggregate
from solver.search.slices import KeptSlice, pack_slices

log = logging.getLogger(__name__)

JOINT_MARGIN_SECONDS = 0.2
"""Left after the joint model for extraction, checking and the answer, at 850 jobs or more
(``answer_margin``)."""

BOUND_SECONDS_PER_JOB = 5.5e-4
"""What the slice bound's LP takes per job of the snapshot: 0.52-0.53 s at 1,000 jobs, 500 of
them slice jobs, on 1,024 GPUs (docs/benchmarks.md, "MIG slices at 1,024 GPUs"). The
consolidated variant stops this much before the MIG time ends: at a 2 s budget it had taken
all of it, and the snapshot answered without a bound."""

MIP_TIME_SHARE = 0.7
"""The slice aggregate's MIP gets this share of the time left as HiGHS's limit (and is
interrupted at the end): at 1,000 jobs it answered up to 0.2 s past its limit."""

WholeSolve = Callable[
    [Problem, Callable[[Plan], None] | None, ConfigSet | None, float | None], SolveResult
]
"""A whole-GPU solve of a problem, telling its first plan to the callback when given one; the
problem's configurations when they are already built; an earlier end (time.monotonic())."""


def uses_mig(problem: Problem) -> bool:
    """Whether the snapshot has a MIG layout or a slice job on a type with a geometry."""
    return bool(problem.cluster.mig) and (
        any(n.mig_layouts for n in problem.cluster.nodes)
        or any(j.slices is not None for j in problem.jobs)
    )


def whole_gpus_only(problem: Problem) -> Problem:
    """The problem the whole-GPU paths see: every partitioned GPU that holds a job unavailable,
    every other partitioned GPU whole (a whole-GPU job placed there changes it back to whole:
    the packing adds that layout change, so GPUs partitioned for small jobs that have left
    return to the large jobs); the same object without a partitioned GPU."""
    if not any(x.instances for n in problem.cluster.nodes for x in n.mig_layouts):
        return problem
    held = held_partitioned_gpus(problem)
    nodes = tuple(
        dataclasses.replace(
            n,
            unavailable_gpu_indices=n.unavailable_gpu_indices
            | {g for (node, g) in held if node == n.name},
            mig_layouts=tuple(x for x in n.mig_layouts if (n.name, x.gpu_index) in held),
        )
        if n.mig_layouts
        else n
        for n in problem.cluster.nodes
    )
    return dataclasses.replace(problem, cluster=dataclasses.replace(problem.cluster, nodes=nodes))


def held_partitioned_gpus(problem: Problem) -> frozenset[tuple[str, int]]:
    """The partitioned GPUs (node, index) with an instance the snapshot marks busy or a job's
    current allocation is on."""
    partitioned = {
        (n.name, x.gpu_index): x
        for n in problem.cluster.nodes
        for x in n.mig_layouts
        if x.instances
    }
    if not partitioned:
        return frozenset()
    busy = {gpu for gpu, x in partitioned.items() if any(i.job for i in x.instances)}
    current = {
        (s.node, i)
        for j in problem.jobs
        if j.current is not None
        for s in j.current.placement
        for i in s.gpu_indices
    }
    return frozenset(busy | (current & partitioned.keys()))


def kept_slices(problem: Problem, configs: ConfigSet) -> tuple[dict[str, KeptSlice], list[str]]:
    """Non-preemptible jobs on an instance, on it at one clock per GPU (the clock of most
    value common to the GPU's kept jobs); and the jobs with no estimate there (blocked)."""
    by_gpu: dict[tuple[str, int], list[str]] = {}
    jobs = {j.name: j for j in problem.jobs}
    blocked: list[str] = []
    for job in problem.jobs:
        cur = job.current
        if job.preemptible or cur is None or cur.mig is None:
            continue
        gpus = [(s.node, i) for s in cur.placement for i in s.gpu_indices]
        if len(gpus) != 1 or not _on_layout(problem, gpus[0], cur.mig.place):
            blocked.append(job.name)
            continue
        by_gpu.setdefault(gpus[0], []).append(job.name)
    out: dict[str, KeptSlice] = {}
    w, max_watts = problem.weights, problem.cluster.max_gpu_watts()
    for gpu, names in by_gpu.items():
        options: dict[str, dict[int, Config]] = {}
        for name in names:
            cur = jobs[name].current
            assert cur is not None and cur.mig is not None
            options[name] = {
                c.sm_clock_mhz: c
                for c in configs.slices.get(name, ())
                if c.mig_profile == cur.mig.profile and c.gpu_type == cur.shape.gpu_type
            }
        common = set.intersection(*(set(o) for o in options.values()))
        if not common:
            blocked.extend(names)
            continue

        def value(
            clock: int, names: list[str] = names, options: dict[str, dict[int, Config]] = options
        ) -> tuple[float, int]:
            total = 0.0
            for name in names:
                best = configs.best_samples_per_second[name]
                total += running_gain(jobs[name], options[name][clock], best, w, max_watts)
            return (total, clock)

        clock = max(common, key=value)
        for name in names:
            cur = jobs[name].current
            assert cur is not None and cur.mig is not None
            out[name] = (options[name][clock], gpu, cur.mig)
    return out, sorted(blocked)


def _on_layout(problem: Problem, gpu: tuple[str, int], place: tuple[str, int]) -> bool:
    """Whether the snapshot's layout of the (available) GPU has an instance at `place`."""
    node = next((n for n in problem.cluster.nodes if n.name == gpu[0]), None)
    if node is None or gpu[1] not in node.available_gpu_indices:
        return False
    return any(x.gpu_index == gpu[1] and place in x.places() for x in node.mig_layouts)


def whole_problem(problem: Problem, kept: Mapping[str, KeptSlice]) -> Problem:
    """What the whole-GPU paths solve: partitioned GPUs unavailable, the kept slice jobs
    gone, and the power and quota they draw taken from the budgets."""
    rest = whole_gpus_only(problem)
    if not kept:
        return rest
    cluster = rest.cluster
    power = cluster.power_budget_watts
    racks = dict(cluster.rack_power_budgets_watts)
    queues = {q.name: q for q in cluster.queues}
    for name, (config, (node, _), _) in kept.items():
        if power is not None:
            power -= config.watts
        rack = cluster.node(node).rack
        if rack in racks:
            racks[rack] -= config.watts
        job = next(j for j in problem.jobs if j.name == name)
        queue = cluster.queue_of(job.tenant)
        if queue is not None:
            queues[queue.name] = _less_quota(queues[queue.name], config)
    cluster = dataclasses.replace(
        cluster,
        power_budget_watts=power,
        rack_power_budgets_watts=racks,
        queues=tuple(queues[q.name] for q in cluster.queues),
    )
    jobs = tuple(j for j in problem.jobs if j.name not in kept)
    return dataclasses.replace(rest, cluster=cluster, jobs=jobs)


def _less_quota(queue: TenantQueue, config: Config) -> TenantQueue:
    """The queue with what `config` uses taken from its nominal quotas (lending limits stay:
    what each queue keeps unlent drops by as much, so the cohort's rule is unchanged)."""
    quotas = dict(queue.quotas)
    for resource, amount in demand(config).items():
        q = queue.quota(resource)
        if q is None and resource == POWER:
            continue
        assert q is not None
        quotas[resource] = dataclasses.replace(q, nominal=q.nominal - amount)
    return dataclasses.replace(queue, quotas=quotas)


def solve_with_slices(
    problem: Problem,
    solve_whole: WholeSolve,
    on_first: Callable[[Plan], None] | None = None,
    time_left: Callable[[], float] | None = None,
    split_at: Callable[[], float | None] | None = None,
    *,
    finish: bool = True,
) -> SolveResult:
    """`solve_whole` on `whole_problem`, then the slice jobs packed into its plan (converting
    no GPU past `time_left()`, seconds), then the joint model where it applies
    (solver.core.mig_exact) and the slice bound, unless `finish` is False (a fallback, which
    only packs); the same solve, untouched, for a snapshot without MIG. Where `split_at()`
    (asked once the configurations are built) is a time.monotonic() instant, the first
    whole-GPU solve ends there and the consolidated variant (solver.core.mig_consolidate) gets
    the time after it; the better checked plan answers."""
    if not uses_mig(problem):
        return solve_whole(whole_gpus_only(problem), on_first, None, None)
    started = time.monotonic()
    configs = build_config_set(problem)
    kept, blocked = kept_slices(problem, configs)
    if blocked:
        return infeasible(
            problem,
            "non-preemptible jobs with no estimate of their MIG instance at one clock of its "
            "GPU: " + ", ".join(blocked),
            wall_seconds=time.monotonic() - started,
            configs=configs,
        )
    rest = whole_problem(problem, kept)

    def first(plan: Plan) -> None:
        assert on_first is not None
        full = pack_slices(problem, configs, plan.assignments, kept, pack=False)
        if not check_plan(problem, full.assignments, full.layout_changes):
            on_first(full)

    same = rest is problem  # no partitioned GPU, no kept slice: the same configurations
    split = split_at() if split_at is not None else None
    result = solve_whole(
        rest, first if on_first is not None else None, configs if same else None, split
    )
    if result.stats.termination is Termination.INFEASIBLE:
        return result
    end = None if time_left is None else time.monotonic() + time_left()
    margin = answer_margin(problem)
    stop_at = None if end is None else end - margin
    plan, why = _packed(problem, configs, result.plan, kept, stop_at)
    if plan is not None and split is not None:
        plan, result = _better(problem, (plan, result), consolidated(
            problem, configs, kept, whole_problem, lambda p: solve_whole(p, None, None, None),
            None if end is None else variant_end(problem, end),
        ))  # fmt: skip
    if plan is not None:
        plan = on_this_cluster(problem, configs, plan)
    if plan is None or time_left is None or not finish:
        return _label(problem, result, (plan, why), started)
    joint = joint_solve(problem, configs, plan, time_left() - margin)
    if joint is not None:
        plan = joint.plan
    bound = slice_bound(problem, configs, plan.objective.total, time_left() - margin)
    return _label(problem, result, (plan, why), started, joint, bound)


def answer_margin(problem: Problem) -> float:
    """What the packing, the joint model and the slice bound leave for extracting, checking and
    answering: JOINT_MARGIN_SECONDS, less for fewer jobs. Fixed at 0.2 s, it left a 2-job MIG
    snapshot's whole-GPU paths at 0.3 s no time for the aggregated LP (a FALLBACK, the bound
    25 % above; bench_unseen --seed 59, case 32), where the whole solve takes 0.02 s."""
    return reserve_by_size(JOINT_MARGIN_SECONDS, len(problem.jobs))


def variant_end(problem: Problem, end: float) -> float:
    """When the consolidated variant stops packing, for MIG time ending at `end` (a
    time.monotonic() instant): the slice LP's estimate and the answer's margin before it, so
    that a short call keeps its bound (at 2 s on 1,024 GPUs the variant took all of it)."""
    return end - answer_margin(problem) - BOUND_SECONDS_PER_JOB * len(problem.jobs)


def _better(
    problem: Problem, plain: tuple[Plan, SolveResult], other: tuple[Plan, SolveResult] | None
) -> tuple[Plan, SolveResult]:
    """The consolidated plan if it passes the checker and is worth more, else the plain one."""
    if other is None or other[1].stats.termination is Termination.INFEASIBLE:
        return plain
    plan = other[0]
    if check_plan(problem, plan.assignments, plan.layout_changes):
        log.error("consolidated MIG plan rejected by the checker")
        return plain
    if plan.objective.total <= plain[0].objective.total + 1e-9:
        return plain
    stats = other[1].stats
    note = "slices consolidated before the whole-GPU solve"
    stats = dataclasses.replace(stats, detail=f"{stats.detail}; {note}" if stats.detail else note)
    return plan, dataclasses.replace(other[1], stats=stats)


def slice_bound(
    problem: Problem, configs: ConfigSet, value: float, seconds: float
) -> tuple[float | None, str]:
    """A proven bound of the snapshot with slices: the aggregated model with slice
    configurations taking their instances' shares of a GPU (solver.search.bound), as an LP,
    then with integral choices while `seconds` allow and the LP leaves a gap to `value` (the
    plan's); the fairness term's bound added. None without the time."""
    started = time.monotonic()
    if seconds <= 0:
        return None, ""
    outcome = solve_aggregate(problem, configs, time_limit=seconds, slices=True)
    if outcome.best_bound is None:
        return None, f"slice bound: aggregate LP {outcome.status}"
    options = {
        j.name: (*configs.by_job[j.name], *configs.slices.get(j.name, ())) for j in problem.jobs
    }
    headroom = fairness_headroom(problem, options, configs.best_samples_per_second)
    bound, how = outcome.best_bound + headroom, "LP"
    lp_seconds = time.monotonic() - started
    left = seconds - lp_seconds
    if not proven_optimal(value, bound) and left > 2 * lp_seconds:
        end = time.monotonic() + left
        mip = solve_aggregate(
            problem,
            configs,
            integer=True,
            time_limit=MIP_TIME_SHARE * left,  # HiGHS overruns its limit at the root
            stop=lambda: time.monotonic() > end,
            slices=True,
        )
        if mip.best_bound is not None and mip.best_bound + headroom < bound:
            bound, how = mip.best_bound + headroom, f"MIP {mip.status}"
    return bound, f"slice bound ({how}) in {time.monotonic() - started:.2f} s"


def _packed(
    problem: Problem,
    configs: ConfigSet,
    base: Plan,
    kept: Mapping[str, KeptSlice],
    stop_at: float | None = None,
) -> tuple[Plan | None, str]:
    """The packed plan if it passes the checker, else the kept slices only; why."""
    alone = pack_slices(problem, configs, base.assignments, kept, pack=False)
    packed = pack_slices(problem, configs, base.assignments, kept, stop_at=stop_at)
    violations = check_plan(problem, packed.assignments, packed.layout_changes)
    if violations:
        log.error("packed MIG plan rejected by the checker: %s", violations[0])
        why = f"the packed slices failed the checker ({violations[0].constraint})"
    elif packed.objective.total + 1e-9 < alone.objective.total:
        why = "packing slices lowered the objective"
    else:
        return packed, ""
    if check_plan(problem, alone.assignments, alone.layout_changes):
        return None, why
    return alone, why


def _label(
    problem: Problem,
    result: SolveResult,
    got: tuple[Plan | None, str],
    started: float,
    joint: Joint | None = None,
    slice_bound: tuple[float | None, str] = (None, ""),
) -> SolveResult:
    plan, why = got
    s = result.stats
    wall = max(s.wall_seconds, time.monotonic() - started)  # both count the whole-GPU solve
    if plan is None:
        return infeasible(problem, f"MIG: {why}", wall_seconds=wall)
    on = sum(1 for a in plan.assignments if a.mig is not None)
    aggregate, how_bound = slice_bound
    how = "; ".join(
        x
        for x in (
            joint.detail + ", its bound covers slices"
            if joint is not None
            else "slices packed "
            "after the whole-GPU solve (the whole-GPU bound does not cover slices)",
            how_bound,
        )
        if x
    )
    note = f"MIG: {on} jobs on instances, {len(plan.layout_changes)} layout changes ({how})"
    degraded = s.termination is Termination.FALLBACK or bool(why)
    bounds = [b for b in (joint.bound if joint is not None else None, aggregate) if b is not None]
    bound = min(bounds) if bounds else None
    value = plan.objective.total
    stats = dataclasses.replace(
        s,
        termination=termination(value, bound, degraded=degraded),
        objective=value,
        best_bound=None if bound is None else max(bound, value),
        relative_gap=relative_gap(value, bound),
        wall_seconds=wall,
        detail="; ".join(x for x in (why, s.detail, note) if x),
    )
    return SolveResult(plan, stats)
