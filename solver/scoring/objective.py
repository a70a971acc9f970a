"""The objective of docs/objective.md: per-configuration constants and the score of a plan.

Every backend maximises the same function; this module is its single definition. Backends use
``config_value`` and the placement coefficients below; ``score_plan`` recomputes a plan's
value from scratch, independently of how the plan was found.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from solver.domain import (
    Cluster,
    Config,
    EnergyBasis,
    Job,
    JobAssignment,
    JobState,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Problem,
)
from solver.mig import LayoutChange
from solver.preferences import preference_cost
from solver.scoring.fairness import fairness_value
from solver.scoring.node_floor import node_floor_watts

AGING_SECONDS = 3600.0
"""tau: the age (``Job.age``) at which leaving a job queued costs as much as the energy term can
ever charge a running job (docs/objective.md, "Aging": from then on every job is worth running,
whatever the weights)."""
AGING_STEP_SECONDS = 300.0
"""Aging grows in whole steps of this (a scheduling round at the default interval): jobs that
arrived within one step are not ranked by seconds of age, and a round redone within a step (a
restarted scheduler) sees the same values."""


def aging(job: Job) -> float:
    """a_j in [0, 1]: the job's age in whole AGING_STEP_SECONDS over AGING_SECONDS, at most 1."""
    steps = math.floor(max(job.age_seconds, 0.0) / AGING_STEP_SECONDS)
    return min(1.0, steps * AGING_STEP_SECONDS / AGING_SECONDS)


def utility(config: Config, best_samples_per_second: float) -> float:
    """u_j: throughput relative to the job's best configuration on an empty cluster."""
    if best_samples_per_second <= 0:
        return 0.0
    return config.samples_per_second / best_samples_per_second


def deadline_shortfall(job: Job, config: Config | None) -> float:
    """s_j in [0, 1]: share of the deadline rate the job misses (1 when queued)."""
    required = job.required_samples_per_second
    if required is None:
        return 0.0
    if config is None:
        return 1.0
    return max(0.0, 1.0 - config.samples_per_second / required)


def energy_watts(config: Config, least_joules: float | None, basis: EnergyBasis) -> float:
    """The watts the energy term charges `config` (docs/objective.md, "Energy basis").

    DRAW: its draw. WASTE: the draw above the job's most efficient configuration at the same
    throughput, ``watts - samples_per_second * e*_j`` (>= 0, 0 at the most efficient one),
    `least_joules` being e*_j (ConfigSet.least_joules). A MIG slice configuration keeps its
    draw: its watts are above the GPU's idle, not comparable with whole-GPU draws."""
    if config.mig_profile or basis is EnergyBasis.DRAW:
        return config.watts
    if least_joules is None:  # loud: a caller that forgot e*_j would charge the wrong thing
        raise ValueError(f"the WASTE energy basis needs job {config.job}'s least joules per sample")
    return charged_watts(config.watts, config.samples_per_second, least_joules, basis)


def charged_watts(
    watts: float, samples_per_second: float, least_joules: float, basis: EnergyBasis
) -> float:
    """``energy_watts`` of a whole-GPU configuration from its draw and throughput (the quick
    plan's rows have no Config)."""
    if basis is EnergyBasis.DRAW:
        return watts
    return max(0.0, watts - samples_per_second * least_joules)


def throughput_weight(job: Job, weights: ObjectiveWeights) -> float:
    """What one unit of the job's u_j is worth: its throughput weight and, with the completion
    priority on, its priority's share (docs/objective.md, "Completion priority")."""
    w = weights
    return w.throughput * job.weight + w.completion * job.weight * job.completion_priority


def config_value(
    job: Job,
    config: Config,
    best_samples_per_second: float,
    weights: ObjectiveWeights,
    max_gpu_watts: float,
    least_joules: float | None = None,
) -> float:
    """Objective contribution of running `job` in `config`, less its placement terms.

    Includes +w_L (min_nodes + min_racks): the locality penalty of a placement is
    w_L (nodes + racks used), so together they charge only the spread beyond the minimum.
    """
    return (
        throughput_weight(job, weights) * utility(config, best_samples_per_second)
        - weights.energy * energy_watts(config, least_joules, weights.energy_basis) / max_gpu_watts
        - weights.deadline * job.weight * deadline_shortfall(job, config)
        + weights.locality * (config.min_nodes + config.min_racks)
    )


def running_gain(
    job: Job,
    config: Config,
    best_samples_per_second: float,
    weights: ObjectiveWeights,
    max_gpu_watts: float,
    least_joules: float | None = None,
) -> float:
    """What running `job` in `config` adds over leaving it queued, placed as tightly as the
    configuration allows (no locality penalty) and migration aside."""
    return (
        config_value(job, config, best_samples_per_second, weights, max_gpu_watts, least_joules)
        - weights.locality * (config.min_nodes + config.min_racks)
        - queued_value(job, weights)
    )


def running_gains(
    job: Job,
    configs: Sequence[Config],
    best_samples_per_second: float,
    weights: ObjectiveWeights,
    max_gpu_watts: float,
    least_joules: float | None = None,
) -> list[float]:
    """``running_gain`` of each configuration of `job`, in one loop (the search's tables of
    thousands of configurations): the same terms, in the same order of operations."""
    w = weights
    best = best_samples_per_second
    required = job.required_samples_per_second
    queued = queued_value(job, w)
    per_utility = throughput_weight(job, w)
    out = []
    for c in configs:
        sps = c.samples_per_second
        utility_term = per_utility * (sps / best if best > 0 else 0.0)
        short = 0.0 if required is None else max(0.0, 1.0 - sps / required)
        value = (
            utility_term
            - w.energy * energy_watts(c, least_joules, w.energy_basis) / max_gpu_watts
            - w.deadline * job.weight * short
            + w.locality * (c.min_nodes + c.min_racks)
        )
        out.append(value - w.locality * (c.min_nodes + c.min_racks) - queued)
    return out


def queued_value(job: Job, weights: ObjectiveWeights) -> float:
    """Objective contribution of leaving `job` queued, migration aside: its deadline shortfall
    and its aging (docs/objective.md, "Aging"). A constant of the job: every path adds it to
    the offset and takes it off each configuration's gain, so bounds stay bounds."""
    shortfall = deadline_shortfall(job, None)
    return -weights.deadline * job.weight * shortfall - weights.energy * aging(job)


def migration_cost(job: Job, weights: ObjectiveWeights) -> float:
    """What moving, reshaping or stopping a running job costs (0 for a waiting job)."""
    return weights.migration * job.weight if job.current is not None else 0.0


def reconfiguration_cost(weights: ObjectiveWeights) -> float:
    """What changing one GPU's MIG layout costs: a migration of weight 1 (the GPU is drained
    and its instances made anew; docs/objective.md)."""
    return weights.migration


def reconfigured_gpus(cluster: Cluster, changes: Iterable[LayoutChange]) -> int:
    """GPUs whose layout the plan changes: a change to the layout a GPU has is none."""
    count = 0
    for change in changes:
        node = cluster.node(change.node)
        now = next((x for x in node.mig_layouts if x.gpu_index == change.layout.gpu_index), None)
        if (now.places() if now is not None else frozenset()) != change.layout.places():
            count += 1
    return count


def is_migrated(job: Job, assignment: JobAssignment) -> bool:
    """A running job moved (to another GPU or MIG instance), changed shape, or stopped; clock
    changes alone are free."""
    if job.current is None:
        return False
    if assignment.state is not JobState.RUNNING or assignment.config is None:
        return True
    if assignment.config.shape != job.current.shape or assignment.mig != job.current.mig:
        return True
    old = {(s.node, i) for s in job.current.placement for i in s.gpu_indices}
    new = {(s.node, i) for s in assignment.placement for i in s.gpu_indices}
    return old != new


def nodes_and_racks(cluster: Cluster, assignment: JobAssignment) -> tuple[int, int]:
    nodes = {s.node for s in assignment.placement if s.gpu_indices}
    racks = {cluster.node(n).rack for n in nodes}
    return len(nodes), len(racks)


def partitioned_idle_watts(cluster: Cluster, gpus: Iterable[tuple[str, int]]) -> float:
    """The idle power of GPUs whose MIG instances run jobs, once per GPU: their jobs' slice
    configurations count only what each adds above it (docs/objective.md, energy)."""
    types = cluster.gpu_types
    return sum(types[cluster.node(node).gpu_type].idle_watts for node, _ in sorted(gpus))


def score_plan(
    problem: Problem,
    assignments: Iterable[JobAssignment],
    best: Mapping[str, float],
    layout_changes: Sequence[LayoutChange] = (),
    least: Mapping[str, float] | None = None,
) -> ObjectiveBreakdown:
    """The plan's objective and its terms, recomputed from the request and the plan alone
    (with its MIG layout changes: each changed GPU counts as a migration of weight 1);
    `least`: each job's e*_j (ConfigSet.least_joules_per_sample), for the WASTE basis."""
    jobs = {j.name: j for j in problem.jobs}
    basis = problem.weights.energy_basis
    if basis is EnergyBasis.WASTE and least is None:
        raise ValueError("score_plan under the WASTE energy basis needs each job's e*_j (least)")
    least = least or {}
    max_watts = problem.cluster.max_gpu_watts()
    throughput = energy = migration = locality = deadline = waiting = completion = 0.0
    preferring = 0.0
    chosen: list[tuple[str, Config]] = []
    partitioned: set[tuple[str, int]] = set()
    assignments = tuple(assignments)
    for a in assignments:
        job = jobs[a.job]
        running = a.state is JobState.RUNNING and a.config is not None
        config = a.config if running else None
        if config is not None:
            chosen.append((job.name, config))
            u = utility(config, best.get(job.name, 0.0))
            throughput += job.weight * u
            completion += job.weight * job.completion_priority * u
            energy += energy_watts(config, least.get(job.name), basis) / max_watts
            if a.mig is not None:
                partitioned.update((s.node, i) for s in a.placement for i in s.gpu_indices)
            nodes, racks = nodes_and_racks(problem.cluster, a)
            locality += (nodes - config.min_nodes) + (racks - config.min_racks)
            if job.preference is not None:
                preferring += preference_cost(job.preference, job.max_gpus, a.gpus_per_node())
        else:
            waiting += aging(job)
        deadline += job.weight * deadline_shortfall(job, config)
        if is_migrated(job, a):
            migration += job.weight
    energy += partitioned_idle_watts(problem.cluster, partitioned) / max_watts
    energy += node_floor_watts(problem.cluster, assignments) / max_watts
    migration += reconfigured_gpus(problem.cluster, layout_changes)
    w = problem.weights
    fairness = fairness_value(problem, best, chosen)
    total = (
        w.throughput * throughput
        + w.completion * completion
        - w.energy * (energy + waiting)
        - w.migration * migration
        - w.locality * locality
        - w.deadline * deadline
        - w.node_preference * preferring
        + (w.fairness * fairness if problem.fairness.active else 0.0)
    )
    return ObjectiveBreakdown(
        total=total,
        throughput=throughput,
        energy=energy,
        migration=migration,
        locality=locality,
        deadline=deadline,
        fairness=fairness,
        aging=waiting,
        completion=completion,
        node_preference=preferring,
    )
