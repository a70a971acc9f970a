"""Validation of a whole solve request: cluster, power budgets, jobs, weights and options."""

from __future__ import annotations

import math
from collections.abc import Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import (
    MAX_BANDWIDTH_GBPS,
    MAX_ENERGY_HORIZON_SECONDS,
    MAX_ENERGY_JOULES,
    MAX_FAIRNESS_HORIZON_SECONDS,
    MAX_FAIRNESS_MEAN_WEIGHT,
    MAX_GPU_MEMORY_GIB,
    MAX_GPU_WATTS,
    MAX_OBJECTIVE_WEIGHT,
    MAX_POWER_WATTS,
    MAX_SM_CLOCK_MHZ,
    MAX_TFLOPS,
    MAX_THREADS,
    MIN_BANDWIDTH_GBPS,
    MIN_TFLOPS,
    Limits,
)
from solver.app.validation.common import (
    Collector,
    FieldViolation,
    duration_seconds,
    positive_duration,
    quoted,
)
from solver.app.validation.grid import check_grid, check_max_deferral
from solver.app.validation.jobs import (
    check_allocation,
    check_excluded_nodes,
    check_job,
    check_kept_shape_profiled,
    supported_clocks,
)
from solver.app.validation.mig import check_mig
from solver.app.validation.mig_geometry import check_mig_geometry
from solver.app.validation.node_rules import (
    Checked,
    check_job_rules,
    check_node_rules,
    check_rule_pairs,
)
from solver.app.validation.power_states import (
    check_power_states,
    check_running_on_suspended,
    wire_floor_watts,
)
from solver.app.validation.queues import check_job_queue, check_queues


def validate_request(req: pb.SolveRequest, limits: Limits) -> list[FieldViolation]:
    """All problems of a solve request; an empty list means it can be solved."""
    c = Collector()
    types: dict[str, pb.GpuType] = {}
    nodes: dict[str, pb.Node] = {}
    queues: set[str] | None = set()
    if not req.HasField("cluster"):
        c.add("cluster", "is required")
    else:
        types = _check_gpu_types(c, req.cluster, limits)
        nodes = _check_nodes(c, req.cluster, types, limits)
        racks = {n.rack for n in nodes.values()} if nodes else None
        _check_power(c, req.cluster, racks, limits)
        _check_power_above_idle(c, req.cluster, types, nodes)
        check_power_states(c, req.cluster)
        check_running_on_suspended(c, req)
        check_grid(c, req.cluster)
        queues = check_queues(c, req.cluster, types, limits)
    jobs: Sequence[pb.Job] = req.jobs
    if len(jobs) > limits.max_jobs:
        c.add("jobs", f"{len(jobs)} jobs exceed the limit of {limits.max_jobs} (max_jobs)")
        jobs = []  # over a limit, the entries are not checked one by one
    points = sum(len(job.profile.points) for job in jobs if job.HasField("profile"))
    if points > limits.max_profile_points:
        c.add(
            "jobs",
            f"the jobs' profiles hold {points} points together, above the limit of "
            f"{limits.max_profile_points} (max_profile_points; each point is read and checked "
            f"within the time budget): send fewer points a job, or fewer jobs",
        )
        jobs = []
    if jobs and not check_rule_pairs(c, jobs, req.cluster.nodes, limits):
        jobs = []
    seen: dict[str, str] = {}
    claims: dict[tuple[str, int], tuple[int, str]] = {}
    clocks = supported_clocks(types)
    for i, job in enumerate(jobs):
        check_job(c, f"jobs[{i}]", job, types, limits, clocks)
        c.name(f"jobs[{i}].name", job.name, seen, limits.max_name_length)
        check_job_queue(c, f"jobs[{i}]", job, queues)
        check_max_deferral(c, f"jobs[{i}]", job)
        if job.excluded_nodes and nodes:  # none: cluster.nodes is reported already
            check_excluded_nodes(c, f"jobs[{i}]", job, nodes, limits)
        if job.node_selector or job.tolerations or job.node_preferences:
            check_job_rules(c, f"jobs[{i}]", job, limits)
        if job.HasField("current_allocation"):
            check_allocation(c, i, job, types, nodes, claims, limits)
            check_kept_shape_profiled(c, i, job)
    if nodes:
        check_mig(c, req, nodes, claims)
    _check_weights(c, req)
    _check_fairness(c, req)
    _check_options(c, req, limits)
    return c.out


def _check_gpu_types(
    c: Collector, cluster: pb.ClusterSnapshot, limits: Limits
) -> dict[str, pb.GpuType]:
    types: dict[str, pb.GpuType] = {}
    seen: dict[str, str] = {}
    if not cluster.gpu_types:
        c.add("cluster.gpu_types", "must not be empty")
    if not c.count(
        "cluster.gpu_types", len(cluster.gpu_types), limits.max_gpu_types, "max_gpu_types"
    ):
        return types
    for i, t in enumerate(cluster.gpu_types):
        p = f"cluster.gpu_types[{i}]"
        c.name(f"{p}.name", t.name, seen, limits.max_name_length)
        types.setdefault(t.name, t)
        c.positive(f"{p}.memory_gib", t.memory_gib, MAX_GPU_MEMORY_GIB)
        c.positive(f"{p}.peak_tflops", t.peak_tflops, MAX_TFLOPS, MIN_TFLOPS)
        c.positive(
            f"{p}.memory_bandwidth_gbps",
            t.memory_bandwidth_gbps,
            MAX_BANDWIDTH_GBPS,
            MIN_BANDWIDTH_GBPS,
        )
        c.positive(
            f"{p}.intra_node_bandwidth_gbps",
            t.intra_node_bandwidth_gbps,
            MAX_BANDWIDTH_GBPS,
            MIN_BANDWIDTH_GBPS,
        )
        c.positive(f"{p}.tdp_watts", t.tdp_watts, MAX_GPU_WATTS)
        if not (math.isfinite(t.idle_watts) and 0 <= t.idle_watts < t.tdp_watts):
            c.add(
                f"{p}.idle_watts",
                f"must be >= 0 and < tdp_watts ({t.tdp_watts:g}), got {t.idle_watts:g}",
            )
        if t.HasField("mig"):
            check_mig_geometry(c, f"{p}.mig", t)
        if not t.sm_clocks_mhz:
            c.add(f"{p}.sm_clocks_mhz", "must not be empty")
        if not c.count(
            f"{p}.sm_clocks_mhz",
            len(t.sm_clocks_mhz),
            limits.max_sm_clocks_per_gpu_type,
            "max_sm_clocks_per_gpu_type",
        ):
            continue
        clocks: set[int] = set()
        for k, mhz in enumerate(t.sm_clocks_mhz):
            if mhz <= 0:
                c.add(f"{p}.sm_clocks_mhz[{k}]", f"must be > 0, got {mhz}")
            elif mhz > MAX_SM_CLOCK_MHZ:
                c.add(f"{p}.sm_clocks_mhz[{k}]", f"must be <= {MAX_SM_CLOCK_MHZ}, got {mhz}")
            elif mhz in clocks:
                c.add(f"{p}.sm_clocks_mhz[{k}]", f"duplicate clock {mhz}")
            clocks.add(mhz)
    types.pop("", None)
    return types


def _check_nodes(
    c: Collector, cluster: pb.ClusterSnapshot, types: dict[str, pb.GpuType], limits: Limits
) -> dict[str, pb.Node]:
    nodes: dict[str, pb.Node] = {}
    seen: dict[str, str] = {}
    if not cluster.nodes:
        c.add("cluster.nodes", "must not be empty")
    if len(cluster.nodes) > limits.max_nodes:
        c.add(
            "cluster.nodes",
            f"{len(cluster.nodes)} nodes exceed the limit of {limits.max_nodes} (max_nodes)",
        )
        return nodes  # over a limit, the entries are not checked one by one
    checked = Checked()
    for i, n in enumerate(cluster.nodes):
        p = f"cluster.nodes[{i}]"
        c.name(f"{p}.name", n.name, seen, limits.max_name_length)
        nodes.setdefault(n.name, n)
        if not n.gpu_type:
            c.add(f"{p}.gpu_type", "must not be empty")
        elif types and n.gpu_type not in types:
            c.add(f"{p}.gpu_type", f"unknown gpu type {quoted(n.gpu_type)}")
        if n.gpu_count <= 0:
            c.add(f"{p}.gpu_count", f"must be > 0, got {n.gpu_count}")
        elif n.gpu_count > limits.max_gpus_per_node:
            c.add(
                f"{p}.gpu_count",
                f"must be <= {limits.max_gpus_per_node} (max_gpus_per_node), got {n.gpu_count}",
            )
        indices: set[int] = set()
        unavailable: Sequence[int] = n.unavailable_gpu_indices
        if not c.count(
            f"{p}.unavailable_gpu_indices",
            len(unavailable),
            limits.max_gpus_per_node,
            "max_gpus_per_node",
        ):
            unavailable = []
        for k, idx in enumerate(unavailable):
            ip = f"{p}.unavailable_gpu_indices[{k}]"
            if not 0 <= idx < n.gpu_count:
                c.add(ip, f"must be in [0, gpu_count) = [0, {n.gpu_count}), got {idx}")
            elif idx in indices:
                c.add(ip, f"duplicate index {idx}")
            indices.add(idx)
        if not n.rack:
            c.add(f"{p}.rack", "must not be empty")
        else:
            c.text(f"{p}.rack", n.rack, limits.max_name_length)
        if n.labels or n.taints:
            check_node_rules(c, p, n, limits, checked)
        c.positive(
            f"{p}.network_bandwidth_gbps",
            n.network_bandwidth_gbps,
            MAX_BANDWIDTH_GBPS,
            MIN_BANDWIDTH_GBPS,
        )
    nodes.pop("", None)
    return nodes


def _check_power(
    c: Collector, cluster: pb.ClusterSnapshot, racks: set[str] | None, limits: Limits
) -> None:
    """Budgets in range, each for one rack of ``racks`` (None: the racks are not known)."""
    if cluster.HasField("power_budget_watts"):
        c.positive("cluster.power_budget_watts", cluster.power_budget_watts, MAX_POWER_WATTS)
    if cluster.HasField("energy_budget"):
        _check_energy_budget(c, cluster.energy_budget)
    seen: dict[str, str] = {}
    budgets = cluster.rack_power_budgets
    if not c.count(
        "cluster.rack_power_budgets",
        len(budgets),
        limits.max_rack_power_budgets,
        "max_rack_power_budgets",
    ):
        return
    for i, b in enumerate(budgets):
        p = f"cluster.rack_power_budgets[{i}]"
        if not b.rack:
            c.add(f"{p}.rack", "must not be empty")
        elif b.rack in seen:
            c.add(f"{p}.rack", f"duplicate budget for rack {quoted(b.rack)} (also {seen[b.rack]})")
        elif racks is not None and b.rack not in racks:
            c.add(f"{p}.rack", f"unknown rack {quoted(b.rack)}: no node is in it")
        seen.setdefault(b.rack, p)
        c.positive(f"{p}.watts", b.watts, MAX_POWER_WATTS)


def _check_energy_budget(c: Collector, e: pb.EnergyBudget) -> None:
    """A non-negative allowance over a positive, well-formed horizon."""
    p = "cluster.energy_budget"
    c.non_negative(f"{p}.remaining_joules", e.remaining_joules, MAX_ENERGY_JOULES)
    secs = duration_seconds(e.horizon_left)
    if not positive_duration(e.horizon_left):
        c.add(f"{p}.horizon_left", f"must be > 0, got {secs:g}s")
    elif secs > MAX_ENERGY_HORIZON_SECONDS:
        c.add(f"{p}.horizon_left", f"must be <= {MAX_ENERGY_HORIZON_SECONDS:g}s, got {secs:g}s")


def _check_power_above_idle(
    c: Collector,
    cluster: pb.ClusterSnapshot,
    types: dict[str, pb.GpuType],
    nodes: dict[str, pb.Node],
) -> None:
    """A budget below what the nodes draw with no job (up: idle GPUs and base power; suspended:
    the power-saving policy's draw) can't be met by any plan: a snapshot error."""
    idle: dict[str, float] = {}
    for n in nodes.values():
        floor = wire_floor_watts(cluster, n, types.get(n.gpu_type))
        idle[n.rack] = idle.get(n.rack, 0.0) + floor
    total = sum(idle.values())
    budget = cluster.power_budget_watts
    if cluster.HasField("power_budget_watts") and math.isfinite(budget) and 0 < budget < total:
        c.add(
            "cluster.power_budget_watts",
            f"{budget:g} W is below the idle power of the cluster's GPUs and nodes ({total:g} W)",
        )
    for i, b in enumerate(cluster.rack_power_budgets):
        rack_idle = idle.get(b.rack, 0.0)
        if math.isfinite(b.watts) and 0 < b.watts < rack_idle:
            c.add(
                f"cluster.rack_power_budgets[{i}].watts",
                f"{b.watts:g} W is below the idle power of rack {quoted(b.rack)}'s GPUs and "
                f"nodes ({rack_idle:g} W)",
            )


def _check_weights(c: Collector, req: pb.SolveRequest) -> None:
    w = req.weights
    fields = (
        ("throughput", w.HasField("throughput"), w.throughput),
        ("energy", w.HasField("energy"), w.energy),
        ("migration", w.HasField("migration"), w.migration),
        ("locality", w.HasField("locality"), w.locality),
        ("deadline", w.HasField("deadline"), w.deadline),
        ("fairness", w.HasField("fairness"), w.fairness),
        ("completion", w.HasField("completion"), w.completion),
        ("node_preference", w.HasField("node_preference"), w.node_preference),
    )
    for name, is_set, value in fields:
        if is_set:
            c.non_negative(f"weights.{name}", value, MAX_OBJECTIVE_WEIGHT)
    if w.energy_basis not in pb.EnergyBasis.values():
        c.add("weights.energy_basis", f"unknown energy basis {w.energy_basis}")


LEAST_ROW_MODES = frozenset(
    {pb.FAIRNESS_MODE_MAX_MIN, pb.FAIRNESS_MODE_DRF, pb.FAIRNESS_MODE_FINISH_TIME}
)
"""The wire's modes whose F is the least row (``Fairness.mean_weight`` applies)."""


def _check_fairness(c: Collector, req: pb.SolveRequest) -> None:
    f = req.fairness
    if f.mode not in pb.FairnessMode.values():
        c.add("fairness.mode", f"unknown fairness mode {f.mode}")
    if f.scope not in pb.FairnessScope.values():
        c.add("fairness.scope", f"unknown fairness scope {f.scope}")
    if f.HasField("horizon"):
        secs = duration_seconds(f.horizon)
        if not positive_duration(f.horizon):
            c.add("fairness.horizon", f"must be > 0, got {secs:g}s")
        elif secs > MAX_FAIRNESS_HORIZON_SECONDS:
            c.add(
                "fairness.horizon",
                f"must be <= {MAX_FAIRNESS_HORIZON_SECONDS:g}s (a week), got {secs:g}s",
            )
    path = "fairness.mean_weight"
    if (
        f.mean_weight
        and c.non_negative(path, f.mean_weight, MAX_FAIRNESS_MEAN_WEIGHT)
        and f.mode not in LEAST_ROW_MODES
    ):
        c.add(path, "applies only to FAIRNESS_MODE_MAX_MIN, _DRF and _FINISH_TIME; must be 0")


def _check_options(c: Collector, req: pb.SolveRequest, limits: Limits) -> None:
    o = req.options
    if o.HasField("time_budget"):
        secs = duration_seconds(o.time_budget)
        if not positive_duration(o.time_budget):
            c.add("options.time_budget", f"must be > 0, got {secs:g}s")
        elif secs > limits.max_time_budget_seconds:
            c.add(
                "options.time_budget",
                f"must be <= {limits.max_time_budget_seconds:g}s "
                f"(the server's max_time_budget_seconds), got {secs:g}s",
            )
    if o.backend not in pb.Backend.values():
        c.add("options.backend", f"unknown backend {o.backend}")
    if not (math.isfinite(o.relative_gap) and 0 <= o.relative_gap < 1):
        c.add("options.relative_gap", f"must be in [0, 1), got {o.relative_gap:g}")
    if not 0 <= o.threads <= MAX_THREADS:
        c.add("options.threads", f"must be in [0, {MAX_THREADS}], got {o.threads}")
    c.at_least("options.seed", o.seed, 0)
    _check_pyomo_solver(c, o)


def _check_pyomo_solver(c: Collector, o: pb.SolveOptions) -> None:
    """pyomo_solver goes with BACKEND_PYOMO and must name a solver installed here."""
    if not o.pyomo_solver:
        return
    if o.backend != pb.BACKEND_PYOMO:
        backend: object = o.backend
        if o.backend in pb.Backend.values():
            backend = pb.Backend.Name(o.backend)
        c.add("options.pyomo_solver", f"is only used with BACKEND_PYOMO, got {backend}")
        return
    from solver.exact.backends import pyomo_solvers  # Pyomo takes ~0.5 s: for these only

    found = pyomo_solvers()
    if o.pyomo_solver not in found:
        c.add(
            "options.pyomo_solver",
            f"solver {quoted(o.pyomo_solver)} is not available here; available: "
            f"{', '.join(found) or 'none'}",
        )
