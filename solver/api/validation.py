"""Input validation of solve requests and caller-made plans, before anything is solved.

Every problem is collected (not just the first) with the path of the offending field in the
protobuf field-name form used by google.rpc.BadRequest, e.g. ``jobs[3].max_gpus``. Paths are
relative to the SolveRequest; plan paths start with ``plan.``. Validation guarantees what the
converters and solvers assume (names resolve, numbers are finite and in range); whether a plan
fits the cluster is not validation but the plan checker's job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from google.protobuf.duration_pb2 import Duration

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.api.settings import MAX_THREADS, Limits


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


_NAME_SHOWN = 64
"""Names are cut to this length in descriptions: error details travel in metadata."""


def _q(name: str) -> str:
    """A name quoted for a description, shortened if very long."""
    if len(name) > _NAME_SHOWN:
        name = name[:_NAME_SHOWN] + "..."
    return f'"{name}"'


def duration_seconds(d: Duration) -> float:
    """Seconds of a google.protobuf.Duration, as a float."""
    return d.seconds + d.nanos / 1e9


def _positive_duration(d: Duration) -> bool:
    """Well-formed (nanos in range, same sign as seconds) and > 0."""
    return d.seconds >= 0 and 0 <= d.nanos < 1_000_000_000 and duration_seconds(d) > 0


class _Collector:
    """Accumulates violations, with the recurring checks as one-liners."""

    def __init__(self) -> None:
        self.out: list[FieldViolation] = []

    def add(self, path: str, description: str) -> None:
        self.out.append(FieldViolation(path, description))

    def positive(self, path: str, value: float) -> None:
        if not (math.isfinite(value) and value > 0):
            self.add(path, f"must be a positive finite number, got {value:g}")

    def non_negative(self, path: str, value: float) -> None:
        if not (math.isfinite(value) and value >= 0):
            self.add(path, f"must be a non-negative finite number, got {value:g}")

    def at_least(self, path: str, value: int, minimum: int) -> bool:
        if value < minimum:
            self.add(path, f"must be >= {minimum}, got {value}")
            return False
        return True

    def name(self, path: str, name: str, seen: dict[str, str]) -> None:
        """Non-empty and unique among ``seen`` (name -> path of its first use)."""
        if not name:
            self.add(path, "must not be empty")
        elif name in seen:
            self.add(path, f"duplicate name {_q(name)} (also {seen[name]})")
        else:
            seen[name] = path


# ---------------------------------------------------------------- request


def validate_request(req: pb.SolveRequest, limits: Limits) -> list[FieldViolation]:
    """All problems of a solve request; an empty list means it can be solved."""
    c = _Collector()
    types: dict[str, pb.GpuType] = {}
    nodes: dict[str, pb.Node] = {}
    if not req.HasField("cluster"):
        c.add("cluster", "is required")
    else:
        types = _check_gpu_types(c, req.cluster)
        nodes = _check_nodes(c, req.cluster, types, limits)
        _check_power(c, req.cluster, {n.rack for n in nodes.values()})
        _check_power_above_idle(c, req.cluster, types, nodes)
    if len(req.jobs) > limits.max_jobs:
        c.add("jobs", f"{len(req.jobs)} jobs exceed the limit of {limits.max_jobs} (max_jobs)")
    seen: dict[str, str] = {}
    claims: dict[tuple[str, int], tuple[int, str]] = {}
    for i, job in enumerate(req.jobs):
        _check_job(c, f"jobs[{i}]", job, types, limits)
        c.name(f"jobs[{i}].name", job.name, seen)
        if job.HasField("current_allocation"):
            _check_allocation(c, i, job, types, nodes, claims)
            _check_kept_shape_profiled(c, i, job)
    _check_weights(c, req)
    _check_options(c, req, limits)
    return c.out


def _check_gpu_types(c: _Collector, cluster: pb.ClusterSnapshot) -> dict[str, pb.GpuType]:
    types: dict[str, pb.GpuType] = {}
    seen: dict[str, str] = {}
    if not cluster.gpu_types:
        c.add("cluster.gpu_types", "must not be empty")
    for i, t in enumerate(cluster.gpu_types):
        p = f"cluster.gpu_types[{i}]"
        c.name(f"{p}.name", t.name, seen)
        types.setdefault(t.name, t)
        c.positive(f"{p}.memory_gib", t.memory_gib)
        c.positive(f"{p}.peak_tflops", t.peak_tflops)
        c.positive(f"{p}.memory_bandwidth_gbps", t.memory_bandwidth_gbps)
        c.positive(f"{p}.intra_node_bandwidth_gbps", t.intra_node_bandwidth_gbps)
        c.positive(f"{p}.tdp_watts", t.tdp_watts)
        if not (math.isfinite(t.idle_watts) and 0 <= t.idle_watts < t.tdp_watts):
            c.add(
                f"{p}.idle_watts",
                f"must be >= 0 and < tdp_watts ({t.tdp_watts:g}), got {t.idle_watts:g}",
            )
        if not t.sm_clocks_mhz:
            c.add(f"{p}.sm_clocks_mhz", "must not be empty")
        clocks: set[int] = set()
        for k, mhz in enumerate(t.sm_clocks_mhz):
            if mhz <= 0:
                c.add(f"{p}.sm_clocks_mhz[{k}]", f"must be > 0, got {mhz}")
            elif mhz in clocks:
                c.add(f"{p}.sm_clocks_mhz[{k}]", f"duplicate clock {mhz}")
            clocks.add(mhz)
    types.pop("", None)
    return types


def _check_nodes(
    c: _Collector, cluster: pb.ClusterSnapshot, types: dict[str, pb.GpuType], limits: Limits
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
    for i, n in enumerate(cluster.nodes):
        p = f"cluster.nodes[{i}]"
        c.name(f"{p}.name", n.name, seen)
        nodes.setdefault(n.name, n)
        if not n.gpu_type:
            c.add(f"{p}.gpu_type", "must not be empty")
        elif types and n.gpu_type not in types:
            c.add(f"{p}.gpu_type", f"unknown gpu type {_q(n.gpu_type)}")
        if n.gpu_count <= 0:
            c.add(f"{p}.gpu_count", f"must be > 0, got {n.gpu_count}")
        elif n.gpu_count > limits.max_gpus_per_node:
            c.add(
                f"{p}.gpu_count",
                f"must be <= {limits.max_gpus_per_node} (max_gpus_per_node), got {n.gpu_count}",
            )
        indices: set[int] = set()
        for k, idx in enumerate(n.unavailable_gpu_indices):
            ip = f"{p}.unavailable_gpu_indices[{k}]"
            if not 0 <= idx < n.gpu_count:
                c.add(ip, f"must be in [0, gpu_count) = [0, {n.gpu_count}), got {idx}")
            elif idx in indices:
                c.add(ip, f"duplicate index {idx}")
            indices.add(idx)
        if not n.rack:
            c.add(f"{p}.rack", "must not be empty")
        c.positive(f"{p}.network_bandwidth_gbps", n.network_bandwidth_gbps)
    nodes.pop("", None)
    return nodes


def _check_power(c: _Collector, cluster: pb.ClusterSnapshot, racks: set[str]) -> None:
    if cluster.HasField("power_budget_watts"):
        c.positive("cluster.power_budget_watts", cluster.power_budget_watts)
    seen: dict[str, str] = {}
    for i, b in enumerate(cluster.rack_power_budgets):
        p = f"cluster.rack_power_budgets[{i}]"
        if not b.rack:
            c.add(f"{p}.rack", "must not be empty")
        elif b.rack in seen:
            c.add(f"{p}.rack", f"duplicate budget for rack {_q(b.rack)} (also {seen[b.rack]})")
        elif b.rack not in racks:
            c.add(f"{p}.rack", f"unknown rack {_q(b.rack)}: no node is in it")
        seen.setdefault(b.rack, p)
        c.positive(f"{p}.watts", b.watts)


def _check_power_above_idle(
    c: _Collector,
    cluster: pb.ClusterSnapshot,
    types: dict[str, pb.GpuType],
    nodes: dict[str, pb.Node],
) -> None:
    """A budget below what the GPUs draw idle can't be met by any plan: a snapshot error."""
    idle: dict[str, float] = {}
    for n in nodes.values():
        gpu = types.get(n.gpu_type)
        if gpu is not None and n.gpu_count > 0:
            idle[n.rack] = idle.get(n.rack, 0.0) + n.gpu_count * gpu.idle_watts
    total = sum(idle.values())
    budget = cluster.power_budget_watts
    if cluster.HasField("power_budget_watts") and math.isfinite(budget) and 0 < budget < total:
        c.add(
            "cluster.power_budget_watts",
            f"{budget:g} W is below the idle power of the cluster's GPUs ({total:g} W)",
        )
    for i, b in enumerate(cluster.rack_power_budgets):
        rack_idle = idle.get(b.rack, 0.0)
        if math.isfinite(b.watts) and 0 < b.watts < rack_idle:
            c.add(
                f"cluster.rack_power_budgets[{i}].watts",
                f"{b.watts:g} W is below the idle power of rack {_q(b.rack)}'s GPUs "
                f"({rack_idle:g} W)",
            )


def _check_job(
    c: _Collector, p: str, job: pb.Job, types: dict[str, pb.GpuType], limits: Limits
) -> None:
    """Everything about one job except its name and current allocation."""
    if job.HasField("weight") and not (math.isfinite(job.weight) and job.weight > 0):
        c.add(f"{p}.weight", f"must be > 0 and finite, got {job.weight:g}")
    kind = job.WhichOneof("workload")
    if kind is None:
        c.add(f"{p}.workload", "one of model or profile is required")
    elif kind == "model":
        _check_model(c, f"{p}.model", job.model)
    else:
        _check_profile(c, f"{p}.profile", job.profile, types, limits)
    c.at_least(f"{p}.min_gpus", job.min_gpus, 1)
    if job.max_gpus < max(job.min_gpus, 1):
        c.add(f"{p}.max_gpus", f"must be >= min_gpus ({max(job.min_gpus, 1)}), got {job.max_gpus}")
    for k, name in enumerate(job.allowed_gpu_types):
        if name not in types and types:
            c.add(f"{p}.allowed_gpu_types[{k}]", f"unknown gpu type {_q(name)}")
    c.non_negative(f"{p}.remaining_samples", job.remaining_samples)
    if job.HasField("time_to_deadline"):
        if not _positive_duration(job.time_to_deadline):
            secs = duration_seconds(job.time_to_deadline)
            c.add(f"{p}.time_to_deadline", f"must be > 0, got {secs:g}s")
        if not job.remaining_samples > 0:
            c.add(f"{p}.remaining_samples", "must be > 0 when time_to_deadline is set")


def _check_model(c: _Collector, p: str, m: pb.ModelSpec) -> None:
    c.positive(f"{p}.parameters", m.parameters)
    c.at_least(f"{p}.layers", m.layers, 1)
    ok_hidden = c.at_least(f"{p}.hidden_size", m.hidden_size, 1)
    ok_heads = c.at_least(f"{p}.attention_heads", m.attention_heads, 1)
    c.at_least(f"{p}.sequence_length", m.sequence_length, 1)
    c.at_least(f"{p}.global_batch_size", m.global_batch_size, 1)
    if ok_hidden and ok_heads and m.hidden_size % m.attention_heads:
        c.add(
            f"{p}.hidden_size",
            f"must be divisible by attention_heads ({m.attention_heads}), got {m.hidden_size}",
        )


def _check_profile(
    c: _Collector,
    p: str,
    prof: pb.ThroughputProfile,
    types: dict[str, pb.GpuType],
    limits: Limits,
) -> None:
    if not prof.points:
        c.add(f"{p}.points", "must not be empty")
    if len(prof.points) > limits.max_profile_points_per_job:
        c.add(
            f"{p}.points",
            f"{len(prof.points)} points exceed the limit of "
            f"{limits.max_profile_points_per_job} (max_profile_points_per_job)",
        )
    first: dict[tuple[str, int, int, int, int], tuple[int, tuple[float, float, float]]] = {}
    for k, pt in enumerate(prof.points):
        pp = f"{p}.points[{k}]"
        gpu = types.get(pt.gpu_type)
        if gpu is None and types:
            c.add(f"{pp}.gpu_type", f"unknown gpu type {_q(pt.gpu_type)}")
        ok = c.at_least(f"{pp}.num_gpus", pt.num_gpus, 1)
        ok = c.at_least(f"{pp}.tensor_parallel", pt.tensor_parallel, 1) and ok
        ok = c.at_least(f"{pp}.pipeline_parallel", pt.pipeline_parallel, 1) and ok
        group = pt.tensor_parallel * pt.pipeline_parallel
        if ok and pt.num_gpus % group:
            c.add(
                f"{pp}.num_gpus",
                "must be divisible by tensor_parallel*pipeline_parallel "
                f"({group}), got {pt.num_gpus}",
            )
        if gpu is not None and pt.sm_clock_mhz not in gpu.sm_clocks_mhz:
            c.add(f"{pp}.sm_clock_mhz", _unsupported_clock(gpu, pt.sm_clock_mhz))
        c.positive(f"{pp}.samples_per_second", pt.samples_per_second)
        c.positive(f"{pp}.watts", pt.watts)
        c.positive(f"{pp}.memory_per_gpu_gib", pt.memory_per_gpu_gib)
        key = (pt.gpu_type, pt.num_gpus, pt.tensor_parallel, pt.pipeline_parallel, pt.sm_clock_mhz)
        values = (pt.samples_per_second, pt.watts, pt.memory_per_gpu_gib)
        if key not in first:
            first[key] = (k, values)
        elif first[key][1] != values:
            c.add(
                pp,
                f"contradicts points[{first[key][0]}]: same gpu_type, num_gpus, "
                "tensor_parallel, pipeline_parallel and sm_clock_mhz, different values",
            )


def _unsupported_clock(gpu: pb.GpuType, mhz: int) -> str:
    clocks = ", ".join(str(x) for x in sorted(gpu.sm_clocks_mhz, reverse=True))
    return f"{mhz} is not a supported clock of {_q(gpu.name)} ({clocks})"


def _check_kept_shape_profiled(c: _Collector, i: int, job: pb.Job) -> None:
    """A job that may not be moved must run in a shape its profile measured."""
    if (
        job.preemptible
        or not job.HasField("preemptible")
        or job.WhichOneof("workload") != "profile"
    ):
        return
    a = job.current_allocation
    shape = (
        a.gpu_type,
        a.data_parallel * a.tensor_parallel * a.pipeline_parallel,
        a.tensor_parallel,
        a.pipeline_parallel,
    )
    measured = {
        (q.gpu_type, q.num_gpus, q.tensor_parallel, q.pipeline_parallel) for q in job.profile.points
    }
    if shape not in measured:
        c.add(
            f"jobs[{i}].current_allocation",
            f"the job is not preemptible, so it keeps this shape, but its profile has no point "
            f"for {a.gpu_type} with {shape[1]} GPUs (tp {a.tensor_parallel}, "
            f"pp {a.pipeline_parallel})",
        )


def _check_allocation(
    c: _Collector,
    i: int,
    job: pb.Job,
    types: dict[str, pb.GpuType],
    nodes: dict[str, pb.Node],
    claims: dict[tuple[str, int], tuple[int, str]],
) -> None:
    """A job's current allocation; ``claims`` maps (node, gpu) to the job that holds it."""
    p = f"jobs[{i}].current_allocation"
    a = job.current_allocation
    gpu = types.get(a.gpu_type)
    if gpu is None:
        if types:
            c.add(f"{p}.gpu_type", f"unknown gpu type {_q(a.gpu_type)}")
    elif job.allowed_gpu_types and a.gpu_type not in job.allowed_gpu_types:
        c.add(f"{p}.gpu_type", f"gpu type {_q(a.gpu_type)} is not in allowed_gpu_types")
    ok = c.at_least(f"{p}.data_parallel", a.data_parallel, 1)
    ok = c.at_least(f"{p}.tensor_parallel", a.tensor_parallel, 1) and ok
    ok = c.at_least(f"{p}.pipeline_parallel", a.pipeline_parallel, 1) and ok
    if gpu is not None and a.sm_clock_mhz not in gpu.sm_clocks_mhz:
        c.add(f"{p}.sm_clock_mhz", _unsupported_clock(gpu, a.sm_clock_mhz))
    per_node: dict[str, tuple[int, int]] = {}  # node -> (first slice index, GPU count)
    mine: set[tuple[str, int]] = set()
    for k, s in enumerate(a.placement):
        sp = f"{p}.placement[{k}]"
        node = nodes.get(s.node)
        if node is None:
            if nodes:
                c.add(f"{sp}.node", f"unknown node {_q(s.node)}")
        elif gpu is not None and node.gpu_type != a.gpu_type:
            c.add(
                f"{sp}.node",
                f"node {_q(s.node)} has gpu type {_q(node.gpu_type)}, not {_q(a.gpu_type)}",
            )
        if not s.gpu_indices:
            c.add(f"{sp}.gpu_indices", "must not be empty")
        first, count = per_node.get(s.node, (k, 0))
        per_node[s.node] = (first, count + len(s.gpu_indices))
        for m, idx in enumerate(s.gpu_indices):
            ip = f"{sp}.gpu_indices[{m}]"
            gpu_id = f"GPU {idx} of node {_q(s.node)}"
            if node is not None and not 0 <= idx < node.gpu_count:
                c.add(ip, f"must be in [0, {node.gpu_count}) for node {_q(s.node)}, got {idx}")
                continue
            if node is not None and idx in node.unavailable_gpu_indices:
                c.add(ip, f"{gpu_id} is unavailable")
            if (s.node, idx) in mine:
                c.add(ip, f"{gpu_id} appears twice in this allocation")
                continue
            mine.add((s.node, idx))
            other = claims.get((s.node, idx))
            if other is not None:
                c.add(
                    ip,
                    f"{gpu_id} is also in the current allocation of job "
                    f"{_q(other[1])} (jobs[{other[0]}])",
                )
            else:
                claims[(s.node, idx)] = (i, job.name)
    total = sum(n for _, n in per_node.values())
    if ok:
        want = a.data_parallel * a.tensor_parallel * a.pipeline_parallel
        if total != want:
            c.add(
                f"{p}.placement",
                f"holds {total} GPUs, but data_parallel*tensor_parallel*pipeline_parallel = {want}",
            )
        for node_name, (k, n) in per_node.items():
            if n % a.tensor_parallel:
                c.add(
                    f"{p}.placement[{k}].gpu_indices",
                    f"{n} GPUs on node {_q(node_name)} is not a multiple of tensor_parallel "
                    f"({a.tensor_parallel}): tensor groups must stay inside a node",
                )


def _check_weights(c: _Collector, req: pb.SolveRequest) -> None:
    w = req.weights
    fields = (
        ("throughput", w.HasField("throughput"), w.throughput),
        ("energy", w.HasField("energy"), w.energy),
        ("migration", w.HasField("migration"), w.migration),
        ("locality", w.HasField("locality"), w.locality),
        ("deadline", w.HasField("deadline"), w.deadline),
    )
    for name, is_set, value in fields:
        if is_set:
            c.non_negative(f"weights.{name}", value)


def _check_options(c: _Collector, req: pb.SolveRequest, limits: Limits) -> None:
    o = req.options
    if o.HasField("time_budget"):
        secs = duration_seconds(o.time_budget)
        if not _positive_duration(o.time_budget):
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


def _check_pyomo_solver(c: _Collector, o: pb.SolveOptions) -> None:
    """pyomo_solver goes with BACKEND_PYOMO and must name a solver installed here."""
    if not o.pyomo_solver:
        return
    if o.backend != pb.BACKEND_PYOMO:
        backend: object = o.backend
        if o.backend in pb.Backend.values():
            backend = pb.Backend.Name(o.backend)
        c.add("options.pyomo_solver", f"is only used with BACKEND_PYOMO, got {backend}")
        return
    # Imported here: Pyomo takes ~0.5 s to load, and only these requests need it.
    from solver.exact.backends.pyomo_backend import available_solvers

    found = available_solvers()
    if o.pyomo_solver not in found:
        c.add(
            "options.pyomo_solver",
            f"solver {_q(o.pyomo_solver)} is not available here; available: "
            f"{', '.join(found) or 'none'}",
        )


# ---------------------------------------------------------------- plan


def validate_plan(req: pb.SolveRequest, plan: pb.Plan) -> list[FieldViolation]:
    """Malformed parts of a caller's plan: names that don't resolve, shapes that are missing.

    Whether the plan fits (capacity, power, memory, placement rules) is left to the checker,
    which reports it as plan violations rather than as invalid input.
    """
    c = _Collector()
    jobs = {j.name for j in req.jobs}
    types = {t.name: t for t in req.cluster.gpu_types}
    nodes = {n.name: n for n in req.cluster.nodes}
    seen: dict[str, str] = {}
    for i, a in enumerate(plan.assignments):
        p = f"plan.assignments[{i}]"
        if not a.job:
            c.add(f"{p}.job", "must not be empty")
        elif a.job not in jobs:
            c.add(f"{p}.job", f"unknown job {_q(a.job)}")
        elif a.job in seen:
            c.add(f"{p}.job", f"duplicate assignment for job {_q(a.job)} (also {seen[a.job]})")
        else:
            seen[a.job] = p
        if a.state == pb.JOB_STATE_QUEUED:
            if a.placement:
                c.add(f"{p}.placement", "must be empty for a JOB_STATE_QUEUED assignment")
        elif a.state == pb.JOB_STATE_RUNNING:
            _check_running(c, p, a, types, nodes)
        else:
            c.add(f"{p}.state", f"must be JOB_STATE_RUNNING or JOB_STATE_QUEUED, got {a.state}")
    for j in req.jobs:
        if j.name and j.name not in seen:
            c.add("plan.assignments", f"no assignment for job {_q(j.name)}")
    return c.out


def _check_running(
    c: _Collector,
    p: str,
    a: pb.JobAssignment,
    types: dict[str, pb.GpuType],
    nodes: dict[str, pb.Node],
) -> None:
    gpu = types.get(a.gpu_type)
    if gpu is None:
        c.add(f"{p}.gpu_type", f"unknown gpu type {_q(a.gpu_type)}")
    ok = c.at_least(f"{p}.data_parallel", a.data_parallel, 1)
    ok = c.at_least(f"{p}.tensor_parallel", a.tensor_parallel, 1) and ok
    ok = c.at_least(f"{p}.pipeline_parallel", a.pipeline_parallel, 1) and ok
    want = a.data_parallel * a.tensor_parallel * a.pipeline_parallel
    if ok and a.num_gpus and a.num_gpus != want:
        c.add(
            f"{p}.num_gpus",
            f"must equal data_parallel*tensor_parallel*pipeline_parallel "
            f"({want}) when set, got {a.num_gpus}",
        )
    if gpu is not None and a.sm_clock_mhz not in gpu.sm_clocks_mhz:
        c.add(f"{p}.sm_clock_mhz", _unsupported_clock(gpu, a.sm_clock_mhz))
    if not a.placement:
        c.add(f"{p}.placement", "must not be empty for a JOB_STATE_RUNNING assignment")
    for k, s in enumerate(a.placement):
        node = nodes.get(s.node)
        if node is None:
            c.add(f"{p}.placement[{k}].node", f"unknown node {_q(s.node)}")
            continue
        for m, idx in enumerate(s.gpu_indices):
            if not 0 <= idx < node.gpu_count:
                c.add(
                    f"{p}.placement[{k}].gpu_indices[{m}]",
                    f"must be in [0, {node.gpu_count}) for node {_q(s.node)}, got {idx}",
                )
