"""Protobuf <-> domain conversion, at the edge of the service and the CLI.

Enums map by name, the wire name carrying its enum's prefix (domain ``Backend.CPSAT`` <-> wire
``BACKEND_CPSAT``; ``wire_name`` and ``enum_label``).

Only this module (with validation) reads the wire types: solvers see ``solver.domain`` only.
Requests are converted after validation, so the converters assume names resolve and numbers
are in range; defaults of unset fields are applied here, in one place.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import TYPE_CHECKING, Any, TypeVar, cast

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import convert_grid, convert_mig, convert_power
from solver.app.convert_workload import model_spec_to_proto as model_spec_to_proto
from solver.app.convert_workload import workload_from_proto
from solver.app.convert_workload import workload_to_proto as workload_to_proto
from solver.app.energy_budget import capped_budget
from solver.app.limits import Limits
from solver.app.node_preferences import Preferences
from solver.app.node_rules import Exclusions, NodeRules
from solver.app.validation.common import duration_seconds
from solver.domain import (
    Allocation,
    AttainedService,
    Backend,
    Cluster,
    EnergyBasis,
    Fairness,
    FairnessMode,
    FairnessScope,
    GpuSlice,
    GpuType,
    Job,
    JobAssignment,
    JobState,
    Node,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    Problem,
    QueueReason,
    Quota,
    Shape,
    SolveOptions,
    SolveResult,
    SolveStats,
    TenantQueue,
    Termination,
)
from solver.perfmodel import quotas
from solver.preferences import NodePreference
from solver.wire import RequestFileError as RequestFileError
from solver.wire import duration_to_proto as duration_to_proto
from solver.wire import load_request_json as load_request_json
from solver.wire import message_to_json as message_to_json

if TYPE_CHECKING:
    from solver.perfmodel.guard_params import GuardParams
    from solver.scoring.power import PowerMarginReport

T = TypeVar("T")

_WIRE_PREFIX = {
    Backend.__name__: "BACKEND_",
    EnergyBasis.__name__: "ENERGY_BASIS_",
    FairnessMode.__name__: "FAIRNESS_MODE_",
    FairnessScope.__name__: "FAIRNESS_SCOPE_",
    JobState.__name__: "JOB_STATE_",
    QueueReason.__name__: "QUEUE_REASON_",
    Termination.__name__: "TERMINATION_",
}
"""Prefix of the wire value names of each enum; domain and wire enums share their type names."""


def wire_name(value: enum.Enum) -> str:
    """The wire value name of a domain enum member: ``Backend.CPSAT`` -> ``BACKEND_CPSAT``."""
    return _WIRE_PREFIX[type(value).__name__] + value.name


def enum_label(enum_type: EnumTypeWrapper, number: int) -> str:
    """A wire value's name without its enum's prefix, for tables: ``OPTIMAL``, ``CPSAT``."""
    name: str = enum_type.Name(number)
    return name.removeprefix(_WIRE_PREFIX[enum_type.DESCRIPTOR.name])


# ---------------------------------------------------------------- request -> domain


def problem_from_proto(req: pb.SolveRequest, limits: Limits) -> Problem:
    """The domain problem of a validated request, with every default applied."""
    c = req.cluster
    budget, energy_cap = capped_budget(req)
    cluster = Cluster(
        gpu_types={t.name: _gpu_type(t) for t in c.gpu_types},
        nodes=tuple(_node(n) for n in c.nodes),
        power_budget_watts=budget,
        energy_cap_watts=energy_cap,
        power_saving=convert_power.power_saving_from_proto(c),
        rack_power_budgets_watts={b.rack: b.watts for b in c.rack_power_budgets},
        queues=tuple(_queue(q) for q in c.queues),
        mig=convert_mig.geometries(req),
        grid=convert_grid.grid_from_proto(c),
    )
    rules = NodeRules(c.nodes)
    excluded, preferred = Exclusions(rules), Preferences(c.nodes, rules)
    weights = _weights(req.weights)
    priced = weights.node_preference > 0  # unpriced, preferences are not resolved
    return Problem(
        cluster=cluster,
        jobs=tuple(_job(j, excluded.of(j), preferred.of(j) if priced else None) for j in req.jobs),
        weights=weights,
        options=_options(req.options, limits),
        fairness=fairness_from_proto(req.fairness),
    )


def fairness_from_proto(f: pb.Fairness) -> Fairness:
    """The domain fairness policy; unspecified values mean WEIGHTED_SUM, JOB and 300 s."""
    d = Fairness()
    return Fairness(
        mode=(
            d.mode
            if f.mode == pb.FAIRNESS_MODE_UNSPECIFIED
            else FairnessMode[enum_label(pb.FairnessMode, f.mode)]
        ),
        scope=(
            d.scope
            if f.scope == pb.FAIRNESS_SCOPE_UNSPECIFIED
            else FairnessScope[enum_label(pb.FairnessScope, f.scope)]
        ),
        horizon_seconds=duration_seconds(f.horizon) if f.HasField("horizon") else d.horizon_seconds,
        mean_weight=f.mean_weight,
    )


def fairness_to_proto(f: Fairness) -> pb.Fairness:
    return pb.Fairness(
        mode=cast("pb.FairnessMode", pb.FairnessMode.Value(wire_name(f.mode))),
        scope=cast("pb.FairnessScope", pb.FairnessScope.Value(wire_name(f.scope))),
        horizon=duration_to_proto(f.horizon_seconds),
        mean_weight=f.mean_weight,
    )


def _same_fields(cls: type[T], message: Any) -> T:
    """A domain dataclass from the message fields of the same names (scalars only)."""
    return cls(**{f.name: getattr(message, f.name) for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


def _gpu_type(t: pb.GpuType) -> GpuType:
    gpu = _same_fields(GpuType, t)
    return dataclasses.replace(gpu, sm_clocks_mhz=tuple(sorted(t.sm_clocks_mhz)))


def gpu_type_to_proto(t: GpuType) -> pb.GpuType:
    return pb.GpuType(**dataclasses.asdict(t))


def allocation_to_proto(a: Allocation) -> pb.Allocation:
    s = a.shape
    return pb.Allocation(
        gpu_type=s.gpu_type,
        data_parallel=s.data_parallel,
        tensor_parallel=s.tensor_parallel,
        pipeline_parallel=s.pipeline_parallel,
        sm_clock_mhz=a.sm_clock_mhz,
        placement=[pb.GpuSlice(node=g.node, gpu_indices=g.gpu_indices) for g in a.placement],
        mig_instance=convert_mig.instance_to_proto(a.mig) if a.mig is not None else None,
        observed_watts=a.observed_watts,
    )


def _node(n: pb.Node) -> Node:
    return Node(
        name=n.name,
        gpu_type=n.gpu_type,
        gpu_count=n.gpu_count,
        unavailable_gpu_indices=frozenset(n.unavailable_gpu_indices),
        rack=n.rack,
        network_bandwidth_gbps=n.network_bandwidth_gbps,
        mig_layouts=convert_mig.layouts_from_proto(n),
        power=convert_power.node_power_from_proto(n),
    )


def _queue(q: pb.TenantQueue) -> TenantQueue:
    return TenantQueue(
        name=q.name,
        cohort=q.cohort,
        weight=q.weight if q.HasField("weight") else 1.0,
        quotas={
            r.resource: Quota(
                nominal=r.nominal,
                borrowing_limit=r.borrowing_limit if r.HasField("borrowing_limit") else None,
                lending_limit=r.lending_limit if r.HasField("lending_limit") else None,
            )
            for r in q.quotas
        },
        attained=_attained(q.attained),
    )


def _attained(a: pb.AttainedService) -> AttainedService:
    return AttainedService(gpu_seconds=a.gpu_seconds, normalized_seconds=a.normalized_seconds)


def _job(j: pb.Job, excluded: frozenset[str], preference: NodePreference | None) -> Job:
    """`excluded`: the nodes the job's exclusions, selector and taints rule out; `preference`:
    those it would rather not use (its preferred terms and PreferNoSchedule taints)."""
    return Job(
        name=j.name,
        tenant=j.tenant,
        weight=j.weight if j.HasField("weight") else 1.0,
        workload=workload_from_proto(j),
        min_gpus=j.min_gpus,
        max_gpus=j.max_gpus,
        allowed_gpu_types=frozenset(j.allowed_gpu_types),
        remaining_samples=j.remaining_samples,
        deadline_seconds=(
            duration_seconds(j.time_to_deadline) if j.HasField("time_to_deadline") else None
        ),
        current=(
            allocation_from_proto(j.current_allocation)
            if j.HasField("current_allocation")
            else None
        ),
        preemptible=j.preemptible if j.HasField("preemptible") else True,
        attained=_attained(j.attained),
        age_seconds=duration_seconds(j.age) if j.HasField("age") else 0.0,
        slices=convert_mig.slices_from_proto(j),
        max_deferral_seconds=convert_grid.max_deferral_seconds(j),
        excluded_nodes=excluded,
        preference=preference,
    )


def _slices(placement: Any) -> tuple[GpuSlice, ...]:
    """Domain slices of a repeated GpuSlice field (of an Allocation or a JobAssignment)."""
    return tuple(GpuSlice(node=s.node, gpu_indices=tuple(s.gpu_indices)) for s in placement)


def allocation_from_proto(a: pb.Allocation) -> Allocation:
    shape = Shape(a.gpu_type, a.data_parallel, a.tensor_parallel, a.pipeline_parallel)
    mig = convert_mig.instance_from_proto(a.mig_instance) if a.HasField("mig_instance") else None
    observed = a.observed_watts if a.HasField("observed_watts") else None
    return Allocation(shape, a.sm_clock_mhz, _slices(a.placement), mig, observed)


def _weights(w: pb.ObjectiveWeights) -> ObjectiveWeights:
    """Each numeric weight the request sets, the default for the others (by field name)."""
    d = ObjectiveWeights()
    numbers = {
        f.name: getattr(w if w.HasField(f.name) else d, f.name)
        for f in dataclasses.fields(d)
        if f.name != "energy_basis"
    }
    unset = w.energy_basis == pb.ENERGY_BASIS_UNSPECIFIED
    basis = d.energy_basis if unset else EnergyBasis[enum_label(pb.EnergyBasis, w.energy_basis)]
    return ObjectiveWeights(**numbers, energy_basis=basis)


def energy_basis_to_proto(basis: EnergyBasis) -> pb.EnergyBasis:
    """The wire value of a domain energy basis (profiles and the simulator set it)."""
    return cast("pb.EnergyBasis", pb.EnergyBasis.Value(wire_name(basis)))


def requested_time_budget(o: pb.SolveOptions) -> float | None:
    """The time budget the request asks for, in seconds; None: it sets none."""
    return duration_seconds(o.time_budget) if o.HasField("time_budget") else None


def _options(o: pb.SolveOptions, limits: Limits) -> SolveOptions:
    return SolveOptions(
        time_budget_seconds=limits.time_budget(requested_time_budget(o)),
        backend=backend_from_proto(o.backend),
        relative_gap=o.relative_gap,
        seed=o.seed,
        threads=o.threads,
        pyomo_solver=o.pyomo_solver,
    )


def backend_to_proto(backend: Backend) -> pb.Backend:
    """The wire value of a domain backend: ``Backend.CPSAT`` -> ``BACKEND_CPSAT``."""
    # The stubs type Value() as a plain int; at run time it is the enum's number.
    return cast("pb.Backend", pb.Backend.Value(wire_name(backend)))


def backend_from_proto(value: int) -> Backend:
    """Domain backend of a wire value; BACKEND_UNSPECIFIED means AUTO."""
    if value == pb.BACKEND_UNSPECIFIED:
        return Backend.AUTO
    return Backend[enum_label(pb.Backend, value)]


def allocations_from_proto(plan: pb.Plan) -> dict[str, Allocation | None]:
    """What a caller's (validated) plan gives each job; None for a queued job."""
    out: dict[str, Allocation | None] = {}
    for a in plan.assignments:
        if a.state != pb.JOB_STATE_RUNNING:
            out[a.job] = None
            continue
        shape = Shape(a.gpu_type, a.data_parallel, a.tensor_parallel, a.pipeline_parallel)
        mig = (
            convert_mig.instance_from_proto(a.mig_instance) if a.HasField("mig_instance") else None
        )
        out[a.job] = Allocation(shape, a.sm_clock_mhz, _slices(a.placement), mig)
    return out


# ---------------------------------------------------------------- domain -> response


def objective_to_proto(o: ObjectiveBreakdown) -> pb.ObjectiveBreakdown:
    return pb.ObjectiveBreakdown(
        total=o.total,
        throughput=o.throughput,
        energy=o.energy,
        migration=o.migration,
        locality=o.locality,
        deadline=o.deadline,
        fairness=o.fairness,
        aging=o.aging,
        completion=o.completion,
        node_preference=o.node_preference,
    )


def assignment_to_proto(a: JobAssignment) -> pb.JobAssignment:
    out = pb.JobAssignment(
        job=a.job,
        state=wire_name(a.state),
        queue_reason=wire_name(a.queue_reason) if a.queue_reason is not None else None,
        queue_detail=a.queue_detail,
        migrated=a.migrated,
    )
    c = a.config
    if a.state is JobState.RUNNING and c is not None:
        out.gpu_type = c.gpu_type
        out.num_gpus = c.num_gpus
        out.data_parallel = c.shape.data_parallel
        out.tensor_parallel = c.shape.tensor_parallel
        out.pipeline_parallel = c.shape.pipeline_parallel
        out.sm_clock_mhz = c.sm_clock_mhz
        out.samples_per_second = c.samples_per_second
        out.watts = c.watts
        out.memory_per_gpu_gib = c.memory_per_gpu_gib
        if a.power_limit_watts is not None:
            out.power_limit_watts = a.power_limit_watts
    for s in a.placement:
        out.placement.add(node=s.node, gpu_indices=s.gpu_indices)
    if a.state is JobState.RUNNING:
        convert_mig.set_assignment_instance(out, a.mig)
    return out


def plan_to_proto(
    plan: Plan, problem: Problem | None = None, guard: GuardParams | None = None
) -> pb.Plan:
    """The plan on the wire; with its `problem`, its power margin (the checker's, sized by
    `guard`, default parameters when None), what each declared queue uses and which jobs run
    on borrowed quota."""
    out = pb.Plan(
        assignments=[assignment_to_proto(a) for a in plan.assignments],
        objective=objective_to_proto(plan.objective),
        layout_changes=convert_mig.changes_to_proto(plan.layout_changes),
        power_actions=convert_power.actions_to_proto(plan.power_actions),
    )
    # Imported here: the client install reads plans without numpy, which the margin needs.
    from solver.scoring.power import power_margin

    if problem is not None and (m := power_margin(problem, plan.assignments, guard)) is not None:
        out.power_margin.CopyFrom(margin_to_proto(m))
    if problem is None or not problem.cluster.queues:
        return out
    cluster = problem.cluster
    borrowed = quotas.borrowed_jobs(cluster, problem.jobs, plan.assignments)
    for a in out.assignments:
        a.borrowed = a.job in borrowed
    for name, usage in quotas.queue_usage(cluster, problem.jobs, plan.assignments).items():
        out.queues.add(
            queue=name,
            resources=[
                pb.ResourceUsage(
                    resource=u.resource, used=u.used, nominal=u.nominal, borrowed=u.borrowed
                )
                for u in usage
            ],
        )
    return out


def stats_to_proto(s: SolveStats) -> pb.SolveStats:
    out = pb.SolveStats(
        termination=wire_name(s.termination),
        backend_used=wire_name(s.backend_used),
        objective=s.objective,
        wall_time=duration_to_proto(s.wall_seconds),
        time_to_first_plan=duration_to_proto(s.first_plan_seconds),
        num_configurations=s.num_configurations,
        num_configurations_enumerated=s.num_configurations_enumerated,
        detail=s.detail,
    )
    if s.best_bound is not None:
        out.best_bound = s.best_bound
    if s.relative_gap is not None:
        out.relative_gap = s.relative_gap
    return out


def result_to_proto(
    result: SolveResult, problem: Problem | None = None, guard: GuardParams | None = None
) -> pb.SolveResponse:
    """The response; with the `problem`, the plan's power margin, queue usage and borrowed
    jobs too."""
    return pb.SolveResponse(
        plan=plan_to_proto(result.plan, problem, guard), stats=stats_to_proto(result.stats)
    )


def margin_to_proto(m: PowerMarginReport) -> pb.PowerMargin:
    """The report on the wire; no ``limited_watts`` without a bound (no infinity in answers)."""
    out = pb.PowerMargin(
        budget_watts=m.budget,
        predicted_watts=m.predicted,
        margin_watts=m.margin,
        slack_watts=m.slack,
        z=m.z,
    )
    if math.isfinite(m.limited):
        out.limited_watts = m.limited
    return out
