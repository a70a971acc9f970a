"""Validation of each job: limits, model or profile, and the allocation it runs in now."""

from __future__ import annotations

import math
from collections.abc import Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import (
    MAX_BATCH_TOKENS,
    MAX_DEADLINE_SECONDS,
    MAX_GPU_MEMORY_GIB,
    MAX_HIDDEN_SIZE,
    MAX_JOB_AGE_SECONDS,
    MAX_MODEL_PARAMETERS,
    MAX_POWER_WATTS,
    MAX_SAMPLES,
    MAX_SAMPLES_PER_SECOND,
    MAX_SEQUENCE_LENGTH,
    MIN_DEADLINE_SAMPLES,
    MIN_MODEL_PARAMETERS,
    Limits,
    weight_problem,
)
from solver.app.validation.common import Collector, duration_seconds, positive_duration, quoted


def supported_clocks(types: dict[str, pb.GpuType]) -> dict[str, frozenset[int]]:
    """Each GPU type's clocks as a set, made once a request (a type lists up to 4,096)."""
    return {name: frozenset(t.sm_clocks_mhz) for name, t in types.items()}


def check_job(
    c: Collector,
    p: str,
    job: pb.Job,
    types: dict[str, pb.GpuType],
    limits: Limits,
    clocks: dict[str, frozenset[int]] | None = None,
) -> None:
    """Everything about one job except its name and current allocation; `clocks`: the
    request's ``supported_clocks`` (made here when not given)."""
    if job.HasField("weight") and (problem := weight_problem(job.weight)):
        c.add(f"{p}.weight", problem)
    if job.tenant:
        c.text(f"{p}.tenant", job.tenant, limits.max_name_length)
    kind = job.WhichOneof("workload")
    if kind is None:
        c.add(f"{p}.workload", "one of model or profile is required")
    elif kind == "model":
        check_model(c, f"{p}.model", job.model)
    else:
        known = supported_clocks(types) if clocks is None else clocks
        _check_profile(c, f"{p}.profile", job.profile, types, known, limits)
    c.at_least(f"{p}.min_gpus", job.min_gpus, 1)
    if job.max_gpus < max(job.min_gpus, 1):
        c.add(f"{p}.max_gpus", f"must be >= min_gpus ({max(job.min_gpus, 1)}), got {job.max_gpus}")
    allowed: Sequence[str] = job.allowed_gpu_types
    if not c.count(f"{p}.allowed_gpu_types", len(allowed), limits.max_gpu_types, "max_gpu_types"):
        allowed = []
    for k, name in enumerate(allowed):
        if name not in types and types:
            c.add(f"{p}.allowed_gpu_types[{k}]", f"unknown gpu type {quoted(name)}")
    c.non_negative(f"{p}.remaining_samples", job.remaining_samples, MAX_SAMPLES)
    if job.HasField("age"):
        age = duration_seconds(job.age)
        if not (math.isfinite(age) and 0 <= age <= MAX_JOB_AGE_SECONDS):
            c.add(f"{p}.age", f"must be in [0, {MAX_JOB_AGE_SECONDS:g}]s, got {age:g}s")
    if job.HasField("time_to_deadline"):
        secs = duration_seconds(job.time_to_deadline)
        if not positive_duration(job.time_to_deadline):
            c.add(f"{p}.time_to_deadline", f"must be > 0, got {secs:g}s")
        elif secs > MAX_DEADLINE_SECONDS:
            c.add(f"{p}.time_to_deadline", f"must be <= {MAX_DEADLINE_SECONDS:g}s, got {secs:g}s")
        if not job.remaining_samples > 0:
            c.add(f"{p}.remaining_samples", "must be > 0 when time_to_deadline is set")
        elif job.remaining_samples < MIN_DEADLINE_SAMPLES:
            c.add(
                f"{p}.remaining_samples",
                f"must be >= {MIN_DEADLINE_SAMPLES:g} when time_to_deadline is set, "
                f"got {job.remaining_samples:g}",
            )


def check_excluded_nodes(
    c: Collector, p: str, job: pb.Job, nodes: dict[str, pb.Node], limits: Limits
) -> None:
    """Each of the job's excluded nodes a node of the snapshot: a misspelt name would
    exclude nothing, silently."""
    excluded: Sequence[str] = job.excluded_nodes
    if not c.count(f"{p}.excluded_nodes", len(excluded), limits.max_nodes, "max_nodes"):
        return
    for k, name in enumerate(excluded):
        if name not in nodes:
            c.add(f"{p}.excluded_nodes[{k}]", f"unknown node {quoted(name)}")


def check_model(c: Collector, p: str, m: pb.ModelSpec) -> None:
    c.positive(f"{p}.parameters", m.parameters, MAX_MODEL_PARAMETERS, MIN_MODEL_PARAMETERS)
    c.at_least(f"{p}.layers", m.layers, 1)
    ok_hidden = c.at_least(f"{p}.hidden_size", m.hidden_size, 1) and c.at_most(
        f"{p}.hidden_size", m.hidden_size, MAX_HIDDEN_SIZE
    )
    ok_heads = c.at_least(f"{p}.attention_heads", m.attention_heads, 1)
    ok_sequence = c.at_least(f"{p}.sequence_length", m.sequence_length, 1) and c.at_most(
        f"{p}.sequence_length", m.sequence_length, MAX_SEQUENCE_LENGTH
    )
    ok_batch = c.at_least(f"{p}.global_batch_size", m.global_batch_size, 1)
    if ok_hidden and ok_heads and m.hidden_size % m.attention_heads:
        c.add(
            f"{p}.hidden_size",
            f"must be divisible by attention_heads ({m.attention_heads}), got {m.hidden_size}",
        )
    tokens = m.global_batch_size * m.sequence_length
    if ok_sequence and ok_batch and tokens > MAX_BATCH_TOKENS:
        c.add(
            f"{p}.global_batch_size",
            f"{m.global_batch_size} samples of {m.sequence_length} tokens are {tokens} tokens "
            f"per step, above the limit of {MAX_BATCH_TOKENS} (global_batch_size x "
            "sequence_length)",
        )


def _check_profile(
    c: Collector,
    p: str,
    prof: pb.ThroughputProfile,
    types: dict[str, pb.GpuType],
    clocks: dict[str, frozenset[int]],
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
    first: dict[tuple[str, int, int, int, int, str], tuple[int, tuple[float, float, float]]] = {}
    for k, pt in enumerate(prof.points):
        if not _point_ok(pt, clocks, bool(types)):
            _check_point(c, f"{p}.points[{k}]", pt, types)
        key_mig = (
            pt.gpu_type,
            pt.num_gpus,
            pt.tensor_parallel,
            pt.pipeline_parallel,
            pt.sm_clock_mhz,
            pt.mig_profile,
        )
        values = (pt.samples_per_second, pt.watts, pt.memory_per_gpu_gib)
        if key_mig not in first:
            first[key_mig] = (k, values)
        elif first[key_mig][1] != values:
            c.add(
                f"{p}.points[{k}]",
                f"contradicts points[{first[key_mig][0]}]: same gpu_type, num_gpus, "
                "tensor_parallel, pipeline_parallel and sm_clock_mhz, different values",
            )


def _point_ok(pt: pb.ProfilePoint, clocks: dict[str, frozenset[int]], typed: bool) -> bool:
    """Whether `_check_point` would find nothing: the checks without their paths and messages,
    which a request of 500,000 points spent most of its 1.9 s of validation building."""
    supported = clocks.get(pt.gpu_type)
    if supported is None and typed:
        return False
    tp, pp, n = pt.tensor_parallel, pt.pipeline_parallel, pt.num_gpus
    if n < 1 or tp < 1 or pp < 1 or n % (tp * pp):
        return False
    if supported is not None and pt.sm_clock_mhz not in supported:
        return False
    return (
        0 < pt.samples_per_second <= MAX_SAMPLES_PER_SECOND
        and 0 < pt.watts <= MAX_POWER_WATTS
        and 0 < pt.memory_per_gpu_gib <= MAX_GPU_MEMORY_GIB
    )


def _check_point(c: Collector, pp: str, pt: pb.ProfilePoint, types: dict[str, pb.GpuType]) -> None:
    """Every problem of one profile point, named by its path `pp`."""
    gpu = types.get(pt.gpu_type)
    if gpu is None and types:
        c.add(f"{pp}.gpu_type", f"unknown gpu type {quoted(pt.gpu_type)}")
    ok = c.at_least(f"{pp}.num_gpus", pt.num_gpus, 1)
    ok = c.at_least(f"{pp}.tensor_parallel", pt.tensor_parallel, 1) and ok
    ok = c.at_least(f"{pp}.pipeline_parallel", pt.pipeline_parallel, 1) and ok
    group = pt.tensor_parallel * pt.pipeline_parallel
    if ok and pt.num_gpus % group:
        c.add(
            f"{pp}.num_gpus",
            f"must be divisible by tensor_parallel*pipeline_parallel ({group}), got {pt.num_gpus}",
        )
    if gpu is not None and pt.sm_clock_mhz not in gpu.sm_clocks_mhz:
        c.add(f"{pp}.sm_clock_mhz", unsupported_clock(gpu, pt.sm_clock_mhz))
    c.positive(f"{pp}.samples_per_second", pt.samples_per_second, MAX_SAMPLES_PER_SECOND)
    c.positive(f"{pp}.watts", pt.watts, MAX_POWER_WATTS)
    c.positive(f"{pp}.memory_per_gpu_gib", pt.memory_per_gpu_gib, MAX_GPU_MEMORY_GIB)


_CLOCKS_SHOWN = 16
"""Supported clocks listed in a description, highest first: details travel in metadata."""


def unsupported_clock(gpu: pb.GpuType, mhz: int) -> str:
    clocks = sorted(gpu.sm_clocks_mhz, reverse=True)
    shown = ", ".join(str(x) for x in clocks[:_CLOCKS_SHOWN])
    if len(clocks) > _CLOCKS_SHOWN:
        shown += f", ... {len(clocks) - _CLOCKS_SHOWN} more"
    return f"{mhz} is not a supported clock of {quoted(gpu.name)} ({shown})"


def check_kept_shape_profiled(c: Collector, i: int, job: pb.Job) -> None:
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
        (q.gpu_type, q.num_gpus, q.tensor_parallel, q.pipeline_parallel)
        for q in job.profile.points
        if not q.mig_profile
    }
    if shape not in measured:
        c.add(
            f"jobs[{i}].current_allocation",
            f"the job is not preemptible, so it keeps this shape, but its profile has no point "
            f"for {a.gpu_type} with {shape[1]} GPUs (tp {a.tensor_parallel}, "
            f"pp {a.pipeline_parallel})",
        )


def check_allocation(
    c: Collector,
    i: int,
    job: pb.Job,
    types: dict[str, pb.GpuType],
    nodes: dict[str, pb.Node],
    claims: dict[tuple[str, int], tuple[int, str]],
    limits: Limits,
) -> None:
    """A job's current allocation; ``claims`` maps (node, gpu) to the job that holds it."""
    p = f"jobs[{i}].current_allocation"
    a = job.current_allocation
    gpu = types.get(a.gpu_type)
    if gpu is None:
        if types:
            c.add(f"{p}.gpu_type", f"unknown gpu type {quoted(a.gpu_type)}")
    elif job.allowed_gpu_types and a.gpu_type not in job.allowed_gpu_types:
        c.add(f"{p}.gpu_type", f"gpu type {quoted(a.gpu_type)} is not in allowed_gpu_types")
    ok = c.at_least(f"{p}.data_parallel", a.data_parallel, 1)
    ok = c.at_least(f"{p}.tensor_parallel", a.tensor_parallel, 1) and ok
    ok = c.at_least(f"{p}.pipeline_parallel", a.pipeline_parallel, 1) and ok
    if gpu is not None and a.sm_clock_mhz not in gpu.sm_clocks_mhz:
        c.add(f"{p}.sm_clock_mhz", unsupported_clock(gpu, a.sm_clock_mhz))
    if a.HasField("observed_watts"):
        c.positive(f"{p}.observed_watts", a.observed_watts, MAX_POWER_WATTS)
    per_node: dict[str, tuple[int, int]] = {}  # node -> (first slice index, GPU count)
    mine: set[tuple[str, int]] = set()
    if not placement_sizes(c, p, a.placement, limits):
        return
    for k, s in enumerate(a.placement):
        sp = f"{p}.placement[{k}]"
        node = nodes.get(s.node)
        if node is None:
            if nodes:
                c.add(f"{sp}.node", f"unknown node {quoted(s.node)}")
        elif gpu is not None and node.gpu_type != a.gpu_type:
            c.add(
                f"{sp}.node",
                f"node {quoted(s.node)} has gpu type {quoted(node.gpu_type)}, "
                f"not {quoted(a.gpu_type)}",
            )
        if not s.gpu_indices:
            c.add(f"{sp}.gpu_indices", "must not be empty")
        first, count = per_node.get(s.node, (k, 0))
        per_node[s.node] = (first, count + len(s.gpu_indices))
        for m, idx in enumerate(s.gpu_indices):
            ip = f"{sp}.gpu_indices[{m}]"
            gpu_id = f"GPU {idx} of node {quoted(s.node)}"
            if node is not None and not 0 <= idx < node.gpu_count:
                c.add(ip, f"must be in [0, {node.gpu_count}) for node {quoted(s.node)}, got {idx}")
                continue
            if node is not None and idx in node.unavailable_gpu_indices:
                c.add(ip, f"{gpu_id} is unavailable")
            if (s.node, idx) in mine:
                c.add(ip, f"{gpu_id} appears twice in this allocation")
                continue
            mine.add((s.node, idx))
            other = claims.get((s.node, idx))
            if a.HasField("mig_instance"):
                continue  # slices share GPUs: validation.mig checks them against the layouts
            if other is not None:
                c.add(
                    ip,
                    f"{gpu_id} is also in the current allocation of job "
                    f"{quoted(other[1])} (jobs[{other[0]}])",
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
                    f"{n} GPUs on node {quoted(node_name)} is not a multiple of tensor_parallel "
                    f"({a.tensor_parallel}): tensor groups must stay inside a node",
                )


def placement_sizes(c: Collector, p: str, placement: Sequence[pb.GpuSlice], limits: Limits) -> bool:
    """The number of slices, and of GPU indices in each slice, within the limits."""
    ok = c.count(
        f"{p}.placement", len(placement), limits.max_placement_slices, "max_placement_slices"
    )
    if ok:
        for k, s in enumerate(placement):
            ok = (
                c.count(
                    f"{p}.placement[{k}].gpu_indices",
                    len(s.gpu_indices),
                    limits.max_gpus_per_node,
                    "max_gpus_per_node",
                )
                and ok
            )
    return ok
