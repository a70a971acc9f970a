"""An instance from its spec (``generate``) and its file text (``to_json``)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import gpu_type_to_proto, problem_from_proto
from solver.app.limits import MAX_TIME_BUDGET_SECONDS, Limits
from solver.domain import GpuType
from solver.offline.generate.cluster import build_instance_cluster
from solver.offline.generate.data import gavel_workloads, load_philly, pollux_workloads
from solver.offline.generate.jobs import _model_job, _profile_job
from solver.offline.generate.slice_jobs import fill_slice_job
from solver.offline.generate.spec import InstanceSpec, SpecError
from solver.perfmodel.catalog import load_gpu_catalog
from solver.perfmodel.configs import build_config_set

DEADLINE_TIGHTNESS = (0.1, 0.6)
"""Remaining samples = U(lo, hi) x reference rate x time to deadline (a generator choice)."""


def generate(spec: InstanceSpec) -> pb.SolveRequest:
    """Build the instance that ``spec`` describes; deterministic in ``spec`` (seed included)."""
    rng = np.random.default_rng(spec.seed)
    catalog = load_gpu_catalog()
    philly = load_philly()
    cluster = build_instance_cluster(spec, catalog, rng)
    types = cluster.types()
    if spec.num_jobs and not any(cluster.pool(t) for t in types):
        raise SpecError(
            "unavailable_share", f"{spec.unavailable_share} leaves no GPU available for the jobs"
        )
    workloads = gavel_workloads(types)
    t4 = [k for k in spec.node_kinds if k.gpu_type == "T4"]
    if t4 and "T4" in types:
        workloads += pollux_workloads(t4[0].gpus_per_node, sorted(philly.jobs))
    workloads = [
        w for w in workloads if any(p.num_gpus <= cluster.pool(p.gpu_type) for p in w.points)
    ]
    num_profile = round(spec.profile_share * spec.num_jobs)
    if num_profile and not workloads:
        raise SpecError(
            "profile_share",
            f"{spec.profile_share} asks for jobs with measured profiles, and none is measured at "
            f"a GPU count the cluster's available GPUs of types {types} hold; give 0",
        )
    is_profile = rng.permutation(spec.num_jobs) < num_profile
    is_slice = _slice_jobs(spec)

    request = pb.SolveRequest()
    request.cluster.gpu_types.extend(gpu_type_to_proto(catalog[t]) for t in types)
    request.cluster.nodes.extend(cluster.nodes)
    if spec.power_budget_fraction is not None:
        full = sum(n.gpu_count * catalog[n.gpu_type].tdp_watts for n in cluster.nodes)
        request.cluster.power_budget_watts = round(spec.power_budget_fraction * full, 1)
    request.cluster.rack_power_budgets.extend(rack_power_budgets(spec, cluster.nodes, catalog, rng))
    for i in range(spec.num_jobs):
        job = request.jobs.add()
        job.name = f"j{i:04d}"
        job.tenant = f"vc-{philly.draw_tenant(rng)}"
        job.weight = float(rng.integers(1, 5))
        if i in is_slice:
            rate = fill_slice_job(rng, spec.running_share, cluster, catalog, job)
        elif is_profile[i]:
            rate = _profile_job(rng, spec, cluster, catalog, philly, workloads, job)
        else:
            rate = _model_job(rng, spec, cluster, catalog, philly, job)
        if rng.random() < spec.deadline_share:
            seconds = max(1, round(philly.draw_duration(rng, job.max_gpus)))
            tightness = rng.uniform(*DEADLINE_TIGHTNESS)
            job.time_to_deadline.seconds = seconds
            job.remaining_samples = float(math.ceil(tightness * rate * seconds))
    running = [j for j in request.jobs if j.HasField("current_allocation")]
    if running and spec.non_preemptible_share > 0:
        k = max(1, round(spec.non_preemptible_share * len(running)))
        for i in sorted(int(x) for x in rng.choice(len(running), size=k, replace=False)):
            running[i].preemptible = False
    keep_fixed_jobs_feasible(request)
    request.options.time_budget.FromNanoseconds(round(spec.time_budget_seconds * 1e9))
    request.options.seed = spec.seed
    return request


def _slice_jobs(spec: InstanceSpec) -> frozenset[int]:
    """Indices of the slice jobs, drawn apart from the main stream so that an instance without
    slice jobs keeps its bytes."""
    k = round(spec.slice_share * spec.num_jobs)
    if k == 0:
        return frozenset()
    rng = np.random.default_rng([spec.seed, 20])
    return frozenset(int(i) for i in rng.choice(spec.num_jobs, size=k, replace=False))


def keep_fixed_jobs_feasible(request: pb.SolveRequest) -> None:
    """Raise any rack budget below what its idle GPUs and its non-preemptible jobs draw at the
    least (their running shape at its lowest-power configuration, as the solver enumerates
    them), plus RACK_MARGIN_WATTS: those jobs must keep running, so a lower budget would make
    the instance infeasible whatever the solver does (a tight rack holds few GPUs, and one such
    job can exceed it). Every other budget keeps its bytes."""
    if not request.cluster.rack_power_budgets or not any(
        not j.preemptible and j.HasField("current_allocation") for j in request.jobs
    ):
        return
    problem = problem_from_proto(request, Limits(max_time_budget_seconds=MAX_TIME_BUDGET_SECONDS))
    configs = build_config_set(problem)
    cluster = problem.cluster
    need: dict[str, float] = defaultdict(float)
    for n in cluster.nodes:
        need[n.rack] += n.gpu_count * cluster.gpu_types[n.gpu_type].idle_watts
    for job in problem.jobs:
        if job.preemptible or job.current is None:
            continue
        shape = job.current.shape
        options = [c for c in configs.by_job[job.name] if c.shape == shape]
        if not options:
            continue
        idle = cluster.gpu_types[shape.gpu_type].idle_watts
        per_gpu = min(c.watts / c.num_gpus for c in options) - idle
        for node, k in job.current.gpus_per_node().items():
            need[cluster.node(node).rack] += per_gpu * k
    for budget in request.cluster.rack_power_budgets:
        floor = need[budget.rack] + RACK_MARGIN_WATTS
        if budget.watts < floor:
            budget.watts = math.ceil(floor)


RACK_MARGIN_WATTS = 1.0
"""Kept above a raised rack budget's least draw: the solver's model rounds each draw up to the
milliwatt, so a budget at the exact sum could still be refused."""


def rack_power_budgets(
    spec: InstanceSpec,
    nodes: Sequence[pb.Node],
    catalog: Mapping[str, GpuType],
    rng: np.random.Generator,
) -> list[pb.RackPowerBudget]:
    """Each rack's budget: a fraction of its GPUs at TDP, the tighter fraction for a uniformly
    drawn share of the racks (at least one if that share is above 0). Draws from ``rng`` only
    when rack budgets are asked for, so instances without them keep their bytes."""
    if spec.rack_power_budget_fraction is None:
        return []
    tdp: dict[str, float] = defaultdict(float)
    for n in nodes:
        tdp[n.rack] += n.gpu_count * catalog[n.gpu_type].tdp_watts
    racks = sorted(tdp)
    tight: set[str] = set()
    if spec.tight_rack_share > 0:
        k = max(1, round(spec.tight_rack_share * len(racks)))
        tight = {racks[int(i)] for i in rng.choice(len(racks), size=k, replace=False)}
    out = []
    for rack in racks:
        fraction = spec.rack_power_budget_fraction
        if rack in tight:
            assert spec.tight_rack_power_budget_fraction is not None
            fraction = spec.tight_rack_power_budget_fraction
        out.append(pb.RackPowerBudget(rack=rack, watts=round(fraction * tdp[rack], 1)))
    return out


def to_json(request: pb.SolveRequest) -> str:
    """The instance file text: canonical JSON with the proto's field names, indent 1."""
    return json_format.MessageToJson(request, preserving_proto_field_name=True, indent=1) + "\n"
