"""The whole problem as one CP-SAT model: configuration choice, placement, power, migration.

build -> solve -> extract, with one function per constraint family (``add_*``), each tested on
its own. Objective coefficients are scaled to integers; the rounding error is bounded and added
to the reported bound, so the gap stays a proven one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from solver.configs import ConfigSet
from solver.domain import JobState, Node, Plan, Problem
from solver.objective import config_value, migration_cost, queued_value
from solver.plans import Choice, materialize

SCALE = 1_000_000
"""Objective units per integer step."""

DETERMINISTIC_TIME_PER_SECOND = 0.5
"""CP-SAT deterministic-time units allowed per second of budget: a limit independent of
machine load, so the same request and seed give the same plan. The wall clock still caps it."""


class BuildTimeout(Exception):
    """Building the model took longer than the time left."""


@dataclass
class CpSatModel:
    """The model and its variables, indexed by job name and node or configuration index."""

    problem: Problem
    configs: ConfigSet
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    y: dict[tuple[str, int], cp_model.IntVar] = field(default_factory=dict)
    """y[j, i]: job j runs in its configuration i."""
    x: dict[tuple[str, str], cp_model.IntVar] = field(default_factory=dict)
    """x[j, n]: GPUs of node n given to job j."""
    z: dict[tuple[str, str], cp_model.IntVar] = field(default_factory=dict)
    """z[j, n]: job j uses node n (only with a locality weight)."""
    r: dict[tuple[str, str], cp_model.IntVar] = field(default_factory=dict)
    """r[j, k]: job j uses rack k (only with a locality weight)."""
    keep: dict[str, cp_model.IntVar] = field(default_factory=dict)
    """keep[j]: running job j stays on its GPUs in its shape."""
    q: dict[tuple[str, str], cp_model.IntVar] = field(default_factory=dict)
    """q[j, n]: tensor-parallel groups of job j on node n."""
    candidates: dict[str, list[Node]] = field(default_factory=dict)
    """Nodes each job may use: of a type one of its configurations runs on."""
    offset: float = 0.0
    """Constant part of the objective (queued values, migration charges)."""
    rounding_slack: float = 0.0
    """Largest total error of the integer-rounded objective, in objective units."""

    def jobs_with_configs(self) -> list[str]:
        return [j.name for j in self.problem.jobs if self.configs.by_job[j.name]]


def add_config_choice(m: CpSatModel) -> None:
    """Each job runs in at most one configuration."""
    for job in m.problem.jobs:
        options = m.configs.by_job[job.name]
        for i in range(len(options)):
            m.y[job.name, i] = m.model.new_bool_var(f"y[{job.name},{i}]")
        if options:
            m.model.add_at_most_one(m.y[job.name, i] for i in range(len(options)))


def add_placement_vars(m: CpSatModel) -> None:
    """x[j, n] on the nodes of the types the job's configurations use."""
    for name in m.jobs_with_configs():
        types = {c.gpu_type for c in m.configs.by_job[name]}
        nodes = [n for n in m.problem.cluster.nodes if n.gpu_type in types and n.available_gpus > 0]
        m.candidates[name] = nodes
        for n in nodes:
            m.x[name, n.name] = m.model.new_int_var(0, n.available_gpus, f"x[{name},{n.name}]")


def add_gang_size(m: CpSatModel) -> None:
    """All or nothing: the GPUs placed equal the chosen configuration's GPU count."""
    for name in m.jobs_with_configs():
        options = m.configs.by_job[name]
        m.model.add(
            sum(m.x[name, n.name] for n in m.candidates[name])
            == sum(c.num_gpus * m.y[name, i] for i, c in enumerate(options))
        )


def add_gpu_type_match(m: CpSatModel) -> None:
    """A job uses only nodes of its chosen configuration's GPU type."""
    for name in m.jobs_with_configs():
        options = m.configs.by_job[name]
        for n in m.candidates[name]:
            same_type = [m.y[name, i] for i, c in enumerate(options) if c.gpu_type == n.gpu_type]
            m.model.add(m.x[name, n.name] <= n.available_gpus * sum(same_type))


def add_tensor_groups_in_node(m: CpSatModel) -> None:
    """Tensor-parallel groups never cross nodes: x[j, n] is a multiple of the chosen tp."""
    for name in m.jobs_with_configs():
        options = m.configs.by_job[name]
        degrees = sorted({c.shape.tensor_parallel for c in options if c.shape.tensor_parallel > 1})
        if not degrees:
            continue
        chosen = {}
        for tp in degrees:
            chosen[tp] = m.model.new_bool_var(f"tp[{name},{tp}]")
            m.model.add(
                chosen[tp]
                == sum(m.y[name, i] for i, c in enumerate(options) if c.shape.tensor_parallel == tp)
            )
        for n in m.candidates[name]:
            q = m.model.new_int_var(0, n.available_gpus, f"q[{name},{n.name}]")
            m.q[name, n.name] = q
            for tp in degrees:
                m.model.add(m.x[name, n.name] == tp * q).only_enforce_if(chosen[tp])


def add_gpu_capacity(m: CpSatModel) -> None:
    """No node gives out more GPUs than it has available."""
    per_node: dict[str, list[cp_model.IntVar]] = {}
    for (_, node), var in m.x.items():
        per_node.setdefault(node, []).append(var)
    for n in m.problem.cluster.nodes:
        if len(per_node.get(n.name, [])) > 1:
            m.model.add(sum(per_node[n.name]) <= n.available_gpus)


def add_locality(m: CpSatModel) -> None:
    """z and r mark the nodes and racks a job uses; the objective charges w_L per each."""
    if m.problem.weights.locality <= 0:
        return
    for name in m.jobs_with_configs():
        racks: dict[str, cp_model.IntVar] = {}
        for n in m.candidates[name]:
            z = m.model.new_bool_var(f"z[{name},{n.name}]")
            m.z[name, n.name] = z
            m.model.add(m.x[name, n.name] <= n.available_gpus * z)
            if n.rack not in racks:
                racks[n.rack] = m.model.new_bool_var(f"r[{name},{n.rack}]")
                m.r[name, n.rack] = racks[n.rack]
            m.model.add_implication(z, racks[n.rack])


def add_migration(m: CpSatModel) -> None:
    """keep[j] holds a running job on its GPUs in its shape; non-preemptible jobs must keep."""
    for job in m.problem.jobs:
        if job.current is None:
            continue
        options = m.configs.by_job[job.name]
        same_shape = [
            m.y[job.name, i] for i, c in enumerate(options) if c.shape == job.current.shape
        ]
        counts = job.current.gpus_per_node()
        if not same_shape or any((job.name, node) not in m.x for node in counts):
            if not job.preemptible:
                m.model.add_bool_or(
                    []
                )  # cannot keep it: the model is infeasible, as is the request
            continue
        keep = m.model.new_bool_var(f"keep[{job.name}]")
        m.keep[job.name] = keep
        m.model.add(sum(same_shape) >= 1).only_enforce_if(keep)
        for n in m.candidates[job.name]:
            m.model.add(m.x[job.name, n.name] == counts.get(n.name, 0)).only_enforce_if(keep)
        if not job.preemptible:
            m.model.add(keep == 1)


def _idle(m: CpSatModel, nodes: list[Node]) -> float:
    types = m.problem.cluster.gpu_types
    return sum(n.gpu_count * types[n.gpu_type].idle_watts for n in nodes)


def add_power_budget(m: CpSatModel) -> None:
    """Assigned GPUs at their configuration's power, all others idle, within the budget."""
    budget = m.problem.cluster.power_budget_watts
    if budget is None:
        return
    types = m.problem.cluster.gpu_types
    terms = []
    for name in m.jobs_with_configs():
        for i, c in enumerate(m.configs.by_job[name]):
            extra = c.watts - types[c.gpu_type].idle_watts * c.num_gpus
            terms.append(math.ceil(extra) * m.y[name, i])
    m.model.add(sum(terms) <= math.floor(budget - _idle(m, list(m.problem.cluster.nodes))))


def add_rack_power_budget(m: CpSatModel) -> None:
    """Per rack: w[j, k, i] = GPUs of job j in rack k when in configuration i, at its power."""
    cluster = m.problem.cluster
    for rack, budget in cluster.rack_power_budgets_watts.items():
        rack_nodes = [n for n in cluster.nodes if n.rack == rack]
        terms = []
        for name in m.jobs_with_configs():
            in_rack = [m.x[name, n.name] for n in m.candidates[name] if n.rack == rack]
            if not in_rack:
                continue
            cap = sum(n.available_gpus for n in m.candidates[name] if n.rack == rack)
            parts = []
            for i, c in enumerate(m.configs.by_job[name]):
                per_gpu = c.watts / c.num_gpus - cluster.gpu_types[c.gpu_type].idle_watts
                w = m.model.new_int_var(0, cap, f"w[{name},{rack},{i}]")
                m.model.add(w <= cap * m.y[name, i])
                parts.append(w)
                terms.append(math.ceil(per_gpu * 1000) * w)
            m.model.add(sum(parts) == sum(in_rack))
        if terms:
            m.model.add(sum(terms) <= math.floor((budget - _idle(m, rack_nodes)) * 1000))


def set_objective(m: CpSatModel) -> None:
    """Maximise the objective of docs/objective.md, scaled to integers."""
    p = m.problem
    w = p.weights
    max_watts = p.cluster.max_gpu_watts()
    terms: list[tuple[int, cp_model.IntVar]] = []
    slack = 0.0
    for job in p.jobs:
        m.offset += queued_value(job, w) - migration_cost(job, w)
        best = m.configs.best_samples_per_second[job.name]
        worst = 0.0
        for i, c in enumerate(m.configs.by_job[job.name]):
            v = config_value(job, c, best, w, max_watts) - queued_value(job, w)
            coef = round(v * SCALE)
            worst = max(worst, abs(coef - v * SCALE))
            terms.append((coef, m.y[job.name, i]))
        slack += worst
        if job.name in m.keep:
            v = migration_cost(job, w)
            terms.append((round(v * SCALE), m.keep[job.name]))
            slack += abs(round(v * SCALE) - v * SCALE)
    loc = w.locality * SCALE
    loc_err = abs(round(loc) - loc)
    for var in (*m.z.values(), *m.r.values()):
        terms.append((-round(loc), var))
    slack += loc_err * 2 * sum(n.available_gpus for n in p.cluster.nodes)
    m.rounding_slack = slack / SCALE
    m.model.maximize(sum(c * v for c, v in terms if c))


CONSTRAINT_FAMILIES = (
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
    families: Sequence[Callable[[CpSatModel], None]] = CONSTRAINT_FAMILIES,
) -> CpSatModel:
    """The full model; `families` lets tests leave one constraint family out."""
    m = CpSatModel(problem, configs)
    for family in families:
        family(m)
    set_objective(m)
    return m


def add_hint(m: CpSatModel, plan: Plan) -> None:
    """Seed the search with a plan (the heuristic's)."""
    for job in m.problem.jobs:
        a = plan.assignment(job.name)
        options = m.configs.by_job[job.name]
        running = a.state is JobState.RUNNING and a.config in options
        for i, c in enumerate(options):
            m.model.add_hint(m.y[job.name, i], running and c == a.config)
        counts = a.gpus_per_node() if running else {}
        for n in m.candidates.get(job.name, []):
            k = counts.get(n.name, 0)
            m.model.add_hint(m.x[job.name, n.name], k)
            if (job.name, n.name) in m.z:
                m.model.add_hint(m.z[job.name, n.name], k > 0)
            if (job.name, n.name) in m.q and a.config is not None:
                m.model.add_hint(m.q[job.name, n.name], k // a.config.shape.tensor_parallel)
        if job.name in m.keep:
            m.model.add_hint(m.keep[job.name], running and not a.migrated)
    racks_used = {
        (a.job, m.problem.cluster.node(s.node).rack) for a in plan.assignments for s in a.placement
    }
    for key, var in m.r.items():
        m.model.add_hint(var, key in racks_used)


@dataclass(frozen=True)
class CpSatOutcome:
    status: str
    """CP-SAT's status name: OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, MODEL_INVALID."""
    plan: Plan | None
    best_bound: float | None
    """Proven upper bound on the objective, rounding error included."""
    wall_seconds: float
    deterministic_time: float


def solve(
    m: CpSatModel,
    *,
    time_limit: float,
    seed: int,
    threads: int,
    relative_gap: float,
    deterministic_limit: float | None = None,
) -> CpSatOutcome:
    solver = cp_model.CpSolver()
    params = solver.parameters
    params.max_time_in_seconds = max(time_limit, 0.001)
    if deterministic_limit is not None:
        params.max_deterministic_time = deterministic_limit
    params.random_seed = seed
    params.num_workers = max(threads, 1)
    params.interleave_search = threads > 1
    params.relative_gap_limit = relative_gap
    params.log_search_progress = False
    status = solver.solve(m.model)
    name = solver.status_name(status)
    plan = extract(m, solver) if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None
    bound = None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        bound = solver.best_objective_bound / SCALE + m.offset + m.rounding_slack
    return CpSatOutcome(name, plan, bound, solver.wall_time, solver.deterministic_time)


def extract(m: CpSatModel, solver: cp_model.CpSolver) -> Plan:
    choices: dict[str, Choice | None] = {}
    for job in m.problem.jobs:
        for i, c in enumerate(m.configs.by_job[job.name]):
            if solver.boolean_value(m.y[job.name, i]):
                counts: Mapping[str, int] = {
                    n.name: solver.value(m.x[job.name, n.name])
                    for n in m.candidates[job.name]
                    if solver.value(m.x[job.name, n.name]) > 0
                }
                choices[job.name] = (c, counts)
    return materialize(m.problem, m.configs, choices)


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
