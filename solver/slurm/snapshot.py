"""Slurm's state -> a DSFRO SolveRequest, and the index back from the request's jobs to
Slurm's.

- Nodes: those of the partition with one known GPU GRES type that are up; a drained node is
  in the snapshot with its free GPUs unavailable (its running jobs may stay), a down one is
  left out. GPUs in use by anything but a DSFRO job the adapter placed are unavailable.
- Waiting jobs: pending, held, with a demand. Running jobs: with a demand and placed by the
  adapter (their record says the shape), on nodes in the snapshot; DSFRO may keep or move
  them. A job DSFRO released and Slurm has not started yet holds its planned GPUs (marked
  unavailable). Everything else is Slurm's: its GPUs count as taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from solver.slurm.constraint import ConstraintError, selector_terms
from solver.slurm.demand import Demand, DemandError, has_demand, parse_demand
from solver.slurm.record import Record, Target, decode
from solver.slurm.reservations import Reservation, barred_nodes, reserved_later
from solver.slurm.rules import screen
from solver.slurm.site import GridSite, Site
from solver.slurm.state import SlurmJob, SlurmNode, in_partition
from solver.wire import (
    Allocation,
    ClusterSnapshot,
    GpuSlice,
    GpuType,
    Job,
    ModelSpec,
    Node,
    NodePowerState,
    RackPowerBudget,
    SolveRequest,
    ThroughputProfile,
    duration_to_proto,
    grid_forecast_at,
    message_from_dict,
)


@dataclass(frozen=True)
class Tracked:
    """A DSFRO job in the request (its name there is the Slurm job id)."""

    job: SlurmJob
    demand: Demand
    record: Record
    running: Target | None = None
    """Where it runs now (None: waiting)."""
    evacuating: bool = False
    """Running on a drained node and planned as if waiting (``--evacuate-drained``)."""


@dataclass
class Snapshot:
    """One round's request and what each of its jobs is in Slurm."""

    request: SolveRequest
    tracked: dict[str, Tracked] = field(default_factory=dict)
    reserved: list[tuple[SlurmJob, Record]] = field(default_factory=list)
    """Released by the adapter, not started yet: their planned GPUs are held for them."""
    crowded: set[int] = field(default_factory=set)
    """Released jobs some of whose planned GPUs another job holds now: held again at once."""
    malformed: list[tuple[SlurmJob, str]] = field(default_factory=list)
    unplaceable: list[tuple[SlurmJob, str]] = field(default_factory=list)
    """Waiting DSFRO jobs not sent: no node of a GPU type they allow."""
    ineligible: list[tuple[SlurmJob, str]] = field(default_factory=list)
    """Waiting DSFRO jobs not sent yet: their --begin has not come or a --dependency holds."""
    returned: list[tuple[SlurmJob, str, str]] = field(default_factory=list)
    """Waiting DSFRO jobs given back to Slurm as submitted, the reason and why: a --constraint
    beyond a selector (``constraint``), a --nodelist of several nodes (``nodelist``), a
    --reservation (``reservation``)."""
    nodes: dict[str, SlurmNode] = field(default_factory=dict)
    node_types: dict[str, str] = field(default_factory=dict)
    """Node -> its DSFRO GPU type."""
    ignored_nodes: dict[str, str] = field(default_factory=dict)
    """Nodes left out, and why."""

    @property
    def waiting(self) -> list[Tracked]:
        return [t for t in self.tracked.values() if t.running is None]


def _current_target(
    job: SlurmJob, record: Record, nodes: dict[str, SlurmNode], nodes_types: dict[str, str]
) -> Target | None:
    """Where a placed, running job runs, if it is as its record says (on nodes of its GPU
    type; else None: it is left to Slurm, its GPUs taken)."""
    planned = record.target
    if planned is None or not job.allocation:
        return None
    counts = set()
    for name, gres in job.allocation:
        node = nodes.get(name)
        if node is None or gres is None or nodes_types.get(name) != planned.gpu_type:
            return None
        counts.add(len(gres.indices) or gres.count)
    if len(counts) != 1:
        return None
    per_node = counts.pop()
    shape = planned.data_parallel * planned.tensor_parallel * planned.pipeline_parallel
    if per_node * len(job.allocation) != shape:
        return None
    return Target(
        gpu_type=planned.gpu_type,
        gres_type=planned.gres_type,
        nodes=tuple(n for n, _ in job.allocation),
        gpus_per_node=per_node,
        data_parallel=planned.data_parallel,
        tensor_parallel=planned.tensor_parallel,
        pipeline_parallel=planned.pipeline_parallel,
        sm_clock_mhz=planned.sm_clock_mhz,
        power_limit_watts=planned.power_limit_watts,
    )


def as_submitted(job: SlurmJob, record: Record) -> SlurmJob:
    """The job with its own request (GRES per node, node count, node list) where the adapter
    changed it:
    the demand's defaults (GPU limits, GPU type) come from what the job asked for, not from
    the shape it was last placed in."""
    o = record.original
    if o is None:
        return job
    return replace(
        job,
        tres_per_node=o.tres_per_node,
        node_count=o.node_count,
        required_nodes=o.required_nodes,
    )


def submitted(job: SlurmJob, record: Record) -> float:
    """When the job was submitted: Slurm's SubmitTime, or its first one (in the record) once
    a requeue has rewritten it."""
    first = record.original.submit_time if record.original is not None else 0.0
    return first or float(job.submit_time)


def _job(
    t: Tracked,
    site: Site,
    types: dict[str, GpuType],
    nodes: Mapping[str, object],
    busy: frozenset[str],
    now: float,
    later: Sequence[Reservation] = (),
) -> Job:
    """The job as DSFRO sees it; `nodes`: the snapshot's (an excluded node elsewhere is none
    of its concern); `busy`: nodes where a job runs (an exclusive waiting job goes elsewhere);
    `later`: reservations still to come (a job started now must end before theirs begin)."""
    job, d = as_submitted(t.job, t.record), t.demand
    since = submitted(job, t.record)
    out = Job(
        name=str(job.job_id), tenant=d.tenant if d.tenant is not None else queue_of(job, site)
    )
    if d.workload == "model":
        out.model.CopyFrom(message_from_dict(d.spec, ModelSpec, "model"))
    else:
        out.profile.CopyFrom(message_from_dict(d.spec, ThroughputProfile, "profile"))
    asked = max(job.requested_gpus_per_node() * max(job.node_count, 1), 1)
    out.min_gpus = d.min_gpus or 1
    out.max_gpus = d.max_gpus or max(out.min_gpus, asked)
    if d.weight is not None:
        out.weight = d.weight
    out.allowed_gpu_types.extend(g for g in allowed_types(d, job, site) if g in types)
    excluded = {*job.excluded_nodes, *t.record.avoid, *barred_nodes(job, later, now)}
    if job.exclusive and t.running is None:
        excluded.update(busy)
    if job.required_nodes:  # its own --nodelist, one node (more go back to Slurm): only there
        excluded.update(n for n in nodes if n not in job.required_nodes)
    try:
        out.node_selector.extend(selector_terms(job.constraint))
    except ConstraintError:  # running, placed before its constraint changed: it stays put
        held = set(t.running.nodes) if t.running is not None else set()
        excluded.update(n for n in nodes if n not in held)
    out.excluded_nodes.extend(sorted(n for n in excluded if n in nodes))
    if d.remaining_samples is not None:
        out.remaining_samples = d.remaining_samples
    # A deadline means something to DSFRO only with the work left (the demand's own deadline
    # needs remaining_samples; Slurm's --deadline without them stays Slurm's to enforce).
    deadline = since + d.deadline_seconds if d.deadline_seconds else job.deadline
    if deadline and d.remaining_samples:
        out.time_to_deadline.CopyFrom(duration_to_proto(max(deadline - now, 1.0)))
    out.preemptible = (d.preemptible is not False) and job.requeue
    out.age.CopyFrom(duration_to_proto(max(now - since, 0.0)))
    if t.running is not None:
        out.current_allocation.CopyFrom(_allocation(t.job, t.running, types))
    return out


def _not_per_node(tres: str) -> str:
    return (
        f"the job asks for GPUs as {tres} (--gpus or --gpus-per-task); DSFRO places GPUs per "
        "node: submit it with --gres=gpu[:type]:N or --gpus-per-node=N"
    )


def gpu_request(job: SlurmJob) -> tuple[bool, str | None]:
    """(whether the job asks for GPUs per node, the GRES type it names or None)."""
    for entry in job.tres_per_node.split(","):
        parts = entry.removeprefix("gres:").removeprefix("gres/").split(":")
        if parts[0] == "gpu" and len(parts) in (2, 3):
            return True, parts[1] if len(parts) == 3 else None
    return False, None


def allowed_types(demand: Demand, job: SlurmJob, site: Site) -> tuple[str, ...]:
    """The GPU types a job may run on: the type its ``--gres`` names (Slurm 22.05 refuses to
    change a job's GRES type by ``scontrol update``: the job would never start), within the
    demand's when it gives some (none left: the job can't be placed); else the demand's, else
    () (any)."""
    asks, named = gpu_request(job)
    if asks and named is not None:
        gpu = site.gpu_type(named)
        own = gpu.name if gpu is not None else named
        wanted = demand.allowed_gpu_types
        return (own,) if not wanted or own in wanted else ()
    return demand.allowed_gpu_types


def typed_only(demand: Demand, job: SlurmJob, site: Site) -> str:
    """Why the job can't be placed although it names GPU types, or "": its ``--gres`` type is
    not among its demand's allowed types (``allowed_types`` leaves none)."""
    if not demand.allowed_gpu_types or allowed_types(demand, job, site):
        return ""
    return (
        f"its --gres names {gpu_request(job)[1]}, which its demand's allowed_gpu_types leave "
        "out; Slurm can't change a job's GRES type: submit it with --gres=gpu:N (untyped) to "
        "let DSFRO choose the type"
    )


def _allocation(job: SlurmJob, target: Target, types: dict[str, GpuType]) -> Allocation:
    clocks = list(types[target.gpu_type].sm_clocks_mhz)
    mhz = target.sm_clock_mhz if target.sm_clock_mhz in clocks else max(clocks)
    return Allocation(
        gpu_type=target.gpu_type,
        data_parallel=target.data_parallel,
        tensor_parallel=target.tensor_parallel,
        pipeline_parallel=target.pipeline_parallel,
        sm_clock_mhz=mhz,
        placement=[
            GpuSlice(node=name, gpu_indices=sorted(gres.indices))
            for name, gres in job.allocation
            if gres is not None
        ],
    )


def _nodes(
    nodes: Iterable[SlurmNode], site: Site, partition: str | None, out: Snapshot
) -> dict[str, GpuType]:
    types: dict[str, GpuType] = {}
    for node in nodes:
        if partition is not None and partition not in node.partitions:
            continue
        if node.gpu_type is None or node.gpu_count == 0:
            out.ignored_nodes[node.name] = "no GPUs of one GRES type"
            continue
        gpu = site.gpu_type(node.gpu_type)
        if gpu is None:
            out.ignored_nodes[node.name] = f"GRES type {node.gpu_type!r} is not in the site file"
            continue
        if not (node.usable or node.draining or node.powered_down):
            out.ignored_nodes[node.name] = f"{node.state} {'+'.join(sorted(node.flags))}".strip()
            continue
        out.nodes[node.name] = node
        types[gpu.name] = gpu
        out.node_types[node.name] = gpu.name
    return types


def build_snapshot(
    nodes: Sequence[SlurmNode],
    jobs: Sequence[SlurmJob],
    site: Site,
    *,
    now: float,
    budget_seconds: float,
    partition: str | None = None,
    evacuate_drained: bool = False,
    seed: int = 0,
    reservations: Sequence[Reservation] = (),
) -> Snapshot:
    """The request of one round and the index of its jobs."""
    out = Snapshot(request=SolveRequest())
    types = _nodes(nodes, site, partition, out)
    used: dict[str, set[int]] = {n: set(node.used_indices) for n, node in out.nodes.items()}
    for job in jobs:  # any partition: a job elsewhere may share the nodes
        if job.active:
            for name, gres in job.allocation:
                if name in used and job.exclusive:  # no other job there while it runs
                    held = set(gres.indices) if gres is not None else set()
                    used[name].update(set(range(out.nodes[name].gpu_count)) - held)
                if gres is not None and name in used:
                    used[name].update(gres.indices)
    busy = frozenset(n for n, indices in used.items() if indices)
    later = reserved_later(reservations, now)
    mine: dict[str, set[int]] = {n: set() for n in out.nodes}
    by_id = {j.job_id: j for j in jobs}
    for job in in_partition(jobs, partition):
        if not (job.pending or job.state in ("RUNNING", "CONFIGURING")):
            continue
        record = decode(job.admin_comment)
        if (job.pending and not job.held) or (not job.pending and record.state != "placed"):
            # Slurm's to schedule and run, its demand ignored (never reported in its
            # AdminComment); the adapter's only where it released the job itself.
            if job.pending and record.state == "placed" and has_demand(job.comment):
                out.reserved.append((job, record))
            continue
        try:
            demand = parse_demand(job.comment, site)
        except DemandError as e:
            out.malformed.append((job, str(e)))
            continue
        if demand is None:
            continue
        if job.pending:
            own = as_submitted(job, record)
            allowed = allowed_types(demand, own, site)
            if other := job.gpus_not_per_node():
                out.malformed.append((job, _not_per_node(other)))
            elif why := typed_only(demand, own, site):
                out.unplaceable.append((job, why))
            elif allowed and not set(allowed) & set(types):
                out.unplaceable.append((job, f"no node in the snapshot has {', '.join(allowed)}"))
            elif refusal := screen(job, own, allowed, out.nodes, out.node_types, by_id, now):
                if refusal.kind == "ineligible":
                    out.ineligible.append((job, refusal.why))
                elif refusal.kind == "returned":
                    out.returned.append((job, refusal.reason, refusal.why))
                else:
                    out.unplaceable.append((job, refusal.why))
            else:
                out.tracked[str(job.job_id)] = Tracked(job, demand, record)
            continue
        current = _current_target(job, record, out.nodes, out.node_types)
        if current is None:
            continue
        movable = job.requeue and demand.preemptible is not False
        if evacuate_drained and movable and any(out.nodes[n].draining for n in current.nodes):
            out.tracked[str(job.job_id)] = Tracked(job, demand, record, evacuating=True)
            continue
        out.tracked[str(job.job_id)] = Tracked(job, demand, record, running=current)
        for name, gres in job.allocation:
            if gres is not None:
                mine[name].update(gres.indices)
    cluster = ClusterSnapshot(gpu_types=[types[k] for k in sorted(types)])
    for name, node in out.nodes.items():
        everything = set(range(node.gpu_count))
        taken = (everything - mine[name]) if node.draining else (used[name] - mine[name])
        free = sorted(everything - taken - mine[name])
        for job, record in out.reserved:
            if record.target is not None and name in record.target.nodes:
                k = record.target.gpus_per_node
                if len(free) < k:  # another job took them since the release
                    out.crowded.add(job.job_id)
                taken.update(free[:k])
                free = free[k:]
        cluster.nodes.append(
            Node(
                name=name,
                gpu_type=out.node_types[name],
                gpu_count=node.gpu_count,
                unavailable_gpu_indices=sorted(taken),
                rack=site.rack(name),
                network_bandwidth_gbps=site.network_bandwidth_gbps,
                labels=dict.fromkeys(node.features, ""),
            )
        )
        if name in site.base_watts:
            cluster.nodes[-1].base_watts = site.base_watts[name]
        if node.powered_down:  # Slurm's power saving: used last, resumed by Slurm when used
            cluster.nodes[-1].power_state = NodePowerState.NODE_POWER_STATE_SUSPENDED
    if site.power_budget_watts is not None:
        cluster.power_budget_watts = site.power_budget_watts
    racks = {n.rack for n in cluster.nodes}
    for rack, watts in sorted(site.rack_power_budgets.items()):
        if rack in racks:
            cluster.rack_power_budgets.append(RackPowerBudget(rack=rack, watts=watts))
    if site.grid is not None:
        _add_grid(cluster, site.grid, now)
    out.request.cluster.CopyFrom(cluster)
    for name, t in list(out.tracked.items()):
        try:
            out.request.jobs.append(_job(t, site, types, out.nodes, busy, now, later))
        except (ValueError, OverflowError) as e:  # one job's figures can't stop the round
            out.malformed.append((t.job, f"comment: {e}"))
            del out.tracked[name]
    out.request.options.time_budget.CopyFrom(duration_to_proto(budget_seconds))
    out.request.options.seed = seed
    if site.weights is not None:
        out.request.weights.CopyFrom(site.weights)
    if site.fairness is not None:
        out.request.fairness.CopyFrom(site.fairness)
    out.request.cluster.queues.extend(site.queues)
    return out


def queue_of(job: SlurmJob, site: Site) -> str:
    """The job's queue: its account's, where the site declares queues and one for it; else
    the default queue (no tenant). Without declared queues the account is the tenant (for
    fairness per tenant)."""
    if not site.queues or job.account in site.queue_names:
        return job.account
    return ""


def _add_grid(cluster: ClusterSnapshot, grid: GridSite, now: float) -> None:
    """The schedule's hours from `now` (Unix time) as the snapshot's forecast; none when the
    schedule has no row in force now (the round is then carbon-blind)."""
    at = datetime.fromtimestamp(now, tz=UTC).replace(tzinfo=None)
    forecast = grid_forecast_at(grid.schedule, at, grid.hours)
    if forecast is None:
        return
    if grid.min_saving is not None:
        forecast.min_saving = grid.min_saving
    if grid.saving_per_delay is not None:
        forecast.saving_per_delay = grid.saving_per_delay
    forecast.scale_energy = grid.scale_energy
    cluster.grid.CopyFrom(forecast)
