"""The full model, described once: configuration choice, placement, power and migration.

A ``Formulation`` is backend-neutral data: variables with bounds and integrality, linear
constraints with integer coefficients (some enforced only when a binary is 1: indicator
constraints), and a linear objective to maximise (``solver.exact.model``).
``solver.exact.backends`` translates it for CP-SAT, HiGHS and Pyomo; none of them knows the
scheduling problem. One function per constraint family (``add_*``, in
``solver.exact.constraints``) builds it, and each family is tested on its own by leaving it
out. This module assembles the model and maps plans into it (a warm start) and out of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from solver.domain import JobState, Plan, Problem
from solver.exact.constraints import (
    add_choice_vars,
    add_config_choice,
    add_gang_size,
    add_gpu_capacity,
    add_gpu_type_match,
    add_locality,
    add_migration,
    add_placement_vars,
    add_power_budget,
    add_rack_power_budget,
    add_tensor_groups_in_node,
    set_objective,
)
from solver.exact.model import Constraint, Formulation, ObjectiveGroup, Variable
from solver.model.configs import ConfigSet
from solver.scoring.plans import Choice, materialize

__all__ = [
    "CONSTRAINT_FAMILIES",
    "Constraint",
    "Family",
    "Formulation",
    "ObjectiveGroup",
    "Variable",
    "add_config_choice",
    "add_gang_size",
    "add_gpu_capacity",
    "add_gpu_type_match",
    "add_locality",
    "add_migration",
    "add_placement_vars",
    "add_power_budget",
    "add_rack_power_budget",
    "add_tensor_groups_in_node",
    "build",
    "estimate_size",
    "extract",
    "hint",
]

Family = Callable[[Formulation], None]

CONSTRAINT_FAMILIES: tuple[Family, ...] = (
    add_config_choice,
    add_placement_vars,
    add_gang_size,
    add_gpu_type_match,
    add_tensor_groups_in_node,
    add_gpu_capacity,
    add_locality,
    add_migration,
    add_power_budget,
    add_rack_power_budget,
)


def build(
    problem: Problem,
    configs: ConfigSet,
    families: Sequence[Family] = CONSTRAINT_FAMILIES,
) -> Formulation:
    """The full model; `families` lets tests leave one constraint family out."""
    f = Formulation(problem, configs)
    add_choice_vars(f)
    for family in families:
        family(f)
    set_objective(f)
    return f


# ---------------------------------------------------------------- plans in and out


def hint(f: Formulation, plan: Plan) -> dict[int, float]:
    """A plan (the heuristic's) as values of the formulation's variables: a warm start."""
    out: dict[int, float] = {}
    for job in f.problem.jobs:
        a = plan.assignment(job.name)
        options = f.configs.by_job[job.name]
        running = a.state is JobState.RUNNING and a.config in options
        chosen = options.index(a.config) if running and a.config is not None else None
        for i in range(len(options)):
            out[f.y[job.name, i]] = float(i == chosen)
        counts = a.gpus_per_node() if running else {}
        tp = a.config.tensor_parallel if running and a.config is not None else 1
        for (name, t), var in f.tp.items():
            if name == job.name:
                out[var] = float(running and t == tp)
        racks: dict[str, int] = {}
        for n in f.candidates.get(job.name, []):
            k = counts.get(n.name, 0)
            racks[n.rack] = racks.get(n.rack, 0) + k
            out[f.x[job.name, n.name]] = k
            if (job.name, n.name) in f.z:
                out[f.z[job.name, n.name]] = float(k > 0)
            if (job.name, n.name) in f.q:
                out[f.q[job.name, n.name]] = k // tp if tp > 1 else 0
        for rack, k in racks.items():
            if (job.name, rack) in f.r:
                out[f.r[job.name, rack]] = float(k > 0)
            for i in range(len(options)):
                if (job.name, rack, i) in f.w:
                    out[f.w[job.name, rack, i]] = k if i == chosen else 0
        if job.name in f.keep:
            out[f.keep[job.name]] = float(running and not a.migrated)
    return out


def extract(f: Formulation, values: Sequence[float] | Mapping[int, float]) -> Plan:
    """The plan of a solution (values by variable index): configuration and GPUs per node."""
    choices: dict[str, Choice | None] = {}
    for job in f.problem.jobs:
        for i, c in enumerate(f.configs.by_job[job.name]):
            if values[f.y[job.name, i]] > 0.5:
                counts: dict[str, int] = {}
                for n in f.candidates[job.name]:
                    k = round(values[f.x[job.name, n.name]])
                    if k > 0:
                        counts[n.name] = k
                choices[job.name] = (c, counts)
                break
    return materialize(f.problem, f.configs, choices)


def estimate_size(problem: Problem, configs: ConfigSet) -> int:
    """Rough variable count of the full model: configurations plus placement variables."""
    per_type: dict[str, int] = {}
    for n in problem.cluster.nodes:
        per_type[n.gpu_type] = per_type.get(n.gpu_type, 0) + 1
    placement = sum(
        sum(per_type.get(t, 0) for t in {c.gpu_type for c in options})
        for options in configs.by_job.values()
    )
    factor = 3 if problem.weights.locality > 0 else 2
    return configs.num_configurations + factor * placement
