"""The pure-Python reference builder of the full model: the formulation as it was written
before it became array-based (one Variable and Constraint object at a time).

For tests only: ``tests/test_formulation.py`` checks that ``solver.exact.formulation.build``
makes exactly the same model (variables, bounds, rows, objective, offset) on many problems.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from solver.domain import Node, Problem
from solver.exact.milp_parts import Constraint, ObjectiveGroup, Variable
from solver.perfmodel.configs import ConfigSet
from solver.scoring.objective import config_value, migration_cost, queued_value

INF = math.inf

Term = tuple[int, int]
"""(variable index, integer coefficient)."""


@dataclass
class RefFormulation:
    """The old object-per-variable formulation, kept as the reference."""

    problem: Problem
    configs: ConfigSet
    variables: list[Variable] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    objective: list[tuple[int, float]] = field(default_factory=list)
    """Maximised: sum(coef * var) + offset."""
    offset: float = 0.0
    """Constant part of the objective (queued values, migration charges)."""
    objective_groups: list[ObjectiveGroup] = field(default_factory=list)

    y: dict[tuple[str, int], int] = field(default_factory=dict)
    """y[j, i]: job j runs in its configuration i."""
    x: dict[tuple[str, str], int] = field(default_factory=dict)
    """x[j, n]: GPUs of node n given to job j."""
    z: dict[tuple[str, str], int] = field(default_factory=dict)
    """z[j, n]: job j uses node n (only with a locality weight)."""
    r: dict[tuple[str, str], int] = field(default_factory=dict)
    """r[j, k]: job j uses rack k (only with a locality weight)."""
    keep: dict[str, int] = field(default_factory=dict)
    """keep[j]: running job j stays on its GPUs in its shape."""
    tp: dict[tuple[str, int], int] = field(default_factory=dict)
    """tp[j, t]: job j runs with tensor degree t (t > 1 only)."""
    q: dict[tuple[str, str], int] = field(default_factory=dict)
    """q[j, n]: tensor-parallel groups of job j on node n."""
    w: dict[tuple[str, str, int], int] = field(default_factory=dict)
    """w[j, k, i]: GPUs of job j in rack k when it runs in configuration i (rack budgets)."""
    candidates: dict[str, list[Node]] = field(default_factory=dict)
    """Nodes each job may use: of a type one of its configurations runs on."""

    # ------------------------------------------------------------ building

    def add_var(self, name: str, lb: float, ub: float, integer: bool = True) -> int:
        self.variables.append(Variable(name, lb, ub, integer))
        return len(self.variables) - 1

    def add_row(
        self,
        family: str,
        name: str,
        terms: Sequence[Term],
        lo: float = -INF,
        hi: float = INF,
        enforce: int | None = None,
    ) -> None:
        for bound in (lo, hi):
            if math.isfinite(bound) and bound != int(bound):
                raise ValueError(f"{name}: row bounds must be integers, got {bound}")
        if not terms:  # 0 within [lo, hi], or else the request can't be met
            if lo <= 0 <= hi:
                return
            if enforce is not None:
                self.constraints.append(Constraint(family, name, ((enforce, 1),), -INF, 0))
            else:
                self.add_infeasible(family, name)
            return
        self.constraints.append(Constraint(family, name, tuple(terms), lo, hi, enforce))

    def add_infeasible(self, family: str, name: str) -> None:
        """A contradiction (a binary fixed to 1 that a row holds at 0): the request can't be met.

        Written as an ordinary variable and row so that every backend and file format takes it.
        """
        v = self.add_var(f"infeasible[{name}]", 1, 1)
        self.constraints.append(Constraint(family, f"contradiction[{name}]", ((v, 1),), -INF, 0))

    def jobs_with_configs(self) -> list[str]:
        return [j.name for j in self.problem.jobs if self.configs.by_job[j.name]]

    # ------------------------------------------------------------ reading

    @property
    def num_variables(self) -> int:
        return len(self.variables)

    def bounds_of(self, terms: Sequence[Term]) -> tuple[float, float]:
        """Smallest and largest value of sum(coef * var) over the variables' bounds."""
        lo = hi = 0.0
        for v, c in terms:
            var = self.variables[v]
            if c > 0:
                lo += c * var.lb
                hi += c * var.ub
            else:
                lo += c * var.ub
                hi += c * var.lb
        return lo, hi

    def linear_rows(self) -> Iterator[tuple[Constraint, str, tuple[Term, ...], float, float]]:
        """Every constraint as plain linear rows, indicators rewritten with big-M.

        Yields (constraint, row name, terms, lo, hi). ``enforce = b`` and ``lo <= e <= hi``
        become ``e + (U - hi) b <= U`` and ``e - (lo - L) b >= L``, where [L, U] is the range
        of ``e`` over the variable bounds: the tightest big-M that the bounds allow. A side
        the bounds already imply gives no row.
        """
        for c in self.constraints:
            if c.enforce is None:
                yield c, c.name, c.terms, c.lo, c.hi
                continue
            low, high = self.bounds_of(c.terms)
            if not (math.isfinite(low) and math.isfinite(high)):
                raise ValueError(f"{c.name}: an indicator needs bounded variables for big-M")
            if c.hi < high:
                m = math.ceil(high - c.hi)  # integer coefficients; = U - hi on integer bounds
                yield c, _tag(c.name, "ub"), _merge(c.terms, c.enforce, m), -INF, c.hi + m
            if c.lo > low:
                m = math.ceil(c.lo - low)
                yield c, _tag(c.name, "lb"), _merge(c.terms, c.enforce, -m), c.lo - m, INF

    def rounding_slack(self, scale: float) -> float:
        """Largest total error, in objective units, of the objective rounded to 1/scale steps.

        Per group: its largest coefficient error times the number of its variables that can
        be 1; any other variable: its error times its largest magnitude.
        """
        error = {v: abs(round(c * scale) - c * scale) for v, c in self.objective}
        grouped: set[int] = set()
        slack = 0.0
        for g in self.objective_groups:
            worst = max((error.get(v, 0.0) for v in g.variables), default=0.0)
            slack += worst * g.max_active
            grouped.update(g.variables)
        for v, e in error.items():
            if v not in grouped:
                var = self.variables[v]
                slack += e * max(abs(var.lb), abs(var.ub))
        return slack / scale


def _tag(name: str, side: str) -> str:
    return name[:-1] + f",{side}]" if name.endswith("]") else f"{name}[{side}]"


def _merge(terms: tuple[Term, ...], var: int, coef: int) -> tuple[Term, ...]:
    out = dict(terms)
    out[var] = out.get(var, 0) + coef
    return tuple((v, c) for v, c in out.items() if c)


def add_choice_vars(f: RefFormulation) -> None:
    """y[j, i] for every job and configuration: the model's core, made before any family."""
    for job in f.problem.jobs:
        for i in range(len(f.configs.by_job[job.name])):
            f.y[job.name, i] = f.add_var(f"y[{job.name},{i}]", 0, 1)


def add_config_choice(f: RefFormulation) -> None:
    """Each job runs in at most one configuration."""
    for job in f.problem.jobs:
        options = f.configs.by_job[job.name]
        if options:
            terms = [(f.y[job.name, i], 1) for i in range(len(options))]
            f.add_row("config_choice", f"one_config[{job.name}]", terms, hi=1)


def add_placement_vars(f: RefFormulation) -> None:
    """x[j, n] on the nodes of the types the job's configurations use."""
    for name in f.jobs_with_configs():
        types = {c.gpu_type for c in f.configs.by_job[name]}
        nodes = [n for n in f.problem.cluster.nodes if n.gpu_type in types and n.available_gpus > 0]
        f.candidates[name] = nodes
        for n in nodes:
            f.x[name, n.name] = f.add_var(f"x[{name},{n.name}]", 0, n.available_gpus)


def add_gang_size(f: RefFormulation) -> None:
    """All or nothing: the GPUs placed equal the chosen configuration's GPU count."""
    for name in f.jobs_with_configs():
        terms = [(f.x[name, n.name], 1) for n in f.candidates[name]]
        terms += [(f.y[name, i], -c.num_gpus) for i, c in enumerate(f.configs.by_job[name])]
        f.add_row("gang_size", f"gang_size[{name}]", terms, 0, 0)


def add_gpu_type_match(f: RefFormulation) -> None:
    """A job uses only nodes of its chosen configuration's GPU type."""
    for name in f.jobs_with_configs():
        options = f.configs.by_job[name]
        for n in f.candidates[name]:
            terms = [(f.x[name, n.name], 1)]
            terms += [
                (f.y[name, i], -n.available_gpus)
                for i, c in enumerate(options)
                if c.gpu_type == n.gpu_type
            ]
            f.add_row("gpu_type_match", f"type_match[{name},{n.name}]", terms, hi=0)


def add_tensor_groups_in_node(f: RefFormulation) -> None:
    """Tensor-parallel groups never cross nodes: x[j, n] = tp * q[j, n] for the chosen tp."""
    for name in f.jobs_with_configs():
        options = f.configs.by_job[name]
        degrees = sorted({c.shape.tensor_parallel for c in options if c.shape.tensor_parallel > 1})
        if not degrees:
            continue
        for t in degrees:
            f.tp[name, t] = f.add_var(f"tp[{name},{t}]", 0, 1)
            terms = [(f.tp[name, t], 1)]
            terms += [(f.y[name, i], -1) for i, c in enumerate(options) if c.tensor_parallel == t]
            f.add_row("tensor_groups_in_node", f"tp_chosen[{name},{t}]", terms, 0, 0)
        for n in f.candidates[name]:
            q = f.add_var(f"q[{name},{n.name}]", 0, n.available_gpus // degrees[0])
            f.q[name, n.name] = q
            for t in degrees:
                f.add_row(
                    "tensor_groups_in_node",
                    f"tp_groups[{name},{n.name},{t}]",
                    [(f.x[name, n.name], 1), (q, -t)],
                    0,
                    0,
                    enforce=f.tp[name, t],
                )


def add_gpu_capacity(f: RefFormulation) -> None:
    """No node gives out more GPUs than it has available."""
    per_node: dict[str, list[int]] = {}
    for (_, node), var in f.x.items():
        per_node.setdefault(node, []).append(var)
    for n in f.problem.cluster.nodes:
        if len(per_node.get(n.name, [])) > 1:
            terms = [(v, 1) for v in per_node[n.name]]
            f.add_row("gpu_capacity", f"capacity[{n.name}]", terms, hi=n.available_gpus)


def add_locality(f: RefFormulation) -> None:
    """z and r mark the nodes and racks a job uses; the objective charges w_L per each."""
    if f.problem.weights.locality <= 0:
        return
    for name in f.jobs_with_configs():
        for n in f.candidates[name]:
            z = f.add_var(f"z[{name},{n.name}]", 0, 1)
            f.z[name, n.name] = z
            f.add_row(
                "locality",
                f"node_used[{name},{n.name}]",
                [(f.x[name, n.name], 1), (z, -n.available_gpus)],
                hi=0,
            )
            if (name, n.rack) not in f.r:
                f.r[name, n.rack] = f.add_var(f"r[{name},{n.rack}]", 0, 1)
            f.add_row(
                "locality", f"rack_used[{name},{n.name}]", [(z, 1), (f.r[name, n.rack], -1)], hi=0
            )


def add_migration(f: RefFormulation) -> None:
    """keep[j] holds a running job on its GPUs in its shape; non-preemptible jobs must keep."""
    for job in f.problem.jobs:
        if job.current is None:
            continue
        options = f.configs.by_job[job.name]
        same_shape = [
            f.y[job.name, i] for i, c in enumerate(options) if c.shape == job.current.shape
        ]
        counts = job.current.gpus_per_node()
        kept_only = [f.y[job.name, i] for i, c in enumerate(options) if c.kept_only]
        if not same_shape or any((job.name, node) not in f.x for node in counts):
            if not job.preemptible:  # it cannot keep its shape: infeasible, as is the request
                f.add_infeasible("migration", f"keep_shape[{job.name}]")
            for v in kept_only:
                f.add_row("migration", f"kept_only[{f.variables[v].name}]", [(v, 1)], hi=0)
            continue
        keep = f.add_var(f"keep[{job.name}]", 0 if job.preemptible else 1, 1)
        f.keep[job.name] = keep
        for v in kept_only:  # over the memory model's limit: usable only where the job stays
            f.add_row("migration", f"kept_only[{f.variables[v].name}]", [(v, 1), (keep, -1)], hi=0)
        f.add_row(
            "migration", f"keep_shape[{job.name}]", [(v, 1) for v in same_shape], lo=1, enforce=keep
        )
        for n in f.candidates[job.name]:
            k = counts.get(n.name, 0)
            f.add_row(
                "migration",
                f"keep_gpus[{job.name},{n.name}]",
                [(f.x[job.name, n.name], 1)],
                k,
                k,
                enforce=keep,
            )


def _idle(f: RefFormulation, nodes: Sequence[Node]) -> float:
    """The nodes' floor: up, idle GPUs and base power; suspended, the policy's draw."""
    c = f.problem.cluster
    return math.fsum(
        c.power_saving.suspended_node_watts
        if n.power.state.value == "SUSPENDED"
        else n.gpu_count * c.gpu_types[n.gpu_type].idle_watts + n.power.base_watts
        for n in nodes
    )


MILLIWATTS = 1000
"""Power rows count milliwatts: each configuration's draw rounded up, each budget down, so the
model is at most 1 mW per running job stricter than the checker."""


def add_power_budget(f: RefFormulation) -> None:
    """Assigned GPUs at their configuration's power, all others idle, within the budget (mW)."""
    budget = f.problem.cluster.power_budget_watts
    if budget is None:
        return
    types = f.problem.cluster.gpu_types
    terms = []
    for name in f.jobs_with_configs():
        for i, c in enumerate(f.configs.by_job[name]):
            extra = c.watts - types[c.gpu_type].idle_watts * c.num_gpus
            terms.append((f.y[name, i], math.ceil(extra * MILLIWATTS)))
    cap = math.floor((budget - _idle(f, f.problem.cluster.nodes)) * MILLIWATTS)
    f.add_row("power_budget", "power_budget[cluster]", [t for t in terms if t[1]], hi=cap)


def add_rack_power_budget(f: RefFormulation) -> None:
    """Per rack, in mW: w[j, k, i] = GPUs of job j in rack k when in configuration i."""
    cluster = f.problem.cluster
    for rack, budget in cluster.rack_power_budgets_watts.items():
        rack_nodes = [n for n in cluster.nodes if n.rack == rack]
        terms: list[Term] = []
        for name in f.jobs_with_configs():
            in_rack = [f.x[name, n.name] for n in f.candidates[name] if n.rack == rack]
            if not in_rack:
                continue
            cap = sum(n.available_gpus for n in f.candidates[name] if n.rack == rack)
            parts: list[Term] = []
            for i, c in enumerate(f.configs.by_job[name]):
                per_gpu = c.watts / c.num_gpus - cluster.gpu_types[c.gpu_type].idle_watts
                w = f.add_var(f"w[{name},{rack},{i}]", 0, cap)
                f.w[name, rack, i] = w
                f.add_row(
                    "rack_power_budget",
                    f"rack_share_on[{name},{rack},{i}]",
                    [(w, 1), (f.y[name, i], -cap)],
                    hi=0,
                )
                parts.append((w, 1))
                terms.append((w, math.ceil(per_gpu * MILLIWATTS)))
            f.add_row(
                "rack_power_budget",
                f"rack_share[{name},{rack}]",
                parts + [(v, -1) for v in in_rack],
                0,
                0,
            )
        cap_mw = math.floor((budget - _idle(f, rack_nodes)) * MILLIWATTS)
        f.add_row("rack_power_budget", f"rack_power[{rack}]", [t for t in terms if t[1]], hi=cap_mw)


def set_objective(f: RefFormulation) -> None:
    """The objective of docs/objective.md: per-configuration values, migration, locality."""
    p = f.problem
    w = p.weights
    max_watts = p.cluster.max_gpu_watts()
    for job in p.jobs:
        f.offset += queued_value(job, w) - migration_cost(job, w)
        best = f.configs.best_samples_per_second[job.name]
        ys = []
        for i, c in enumerate(f.configs.by_job[job.name]):
            v = config_value(job, c, best, w, max_watts) - queued_value(job, w)
            f.objective.append((f.y[job.name, i], v))
            ys.append(f.y[job.name, i])
        if ys:
            f.objective_groups.append(ObjectiveGroup(tuple(ys), 1))
        if job.name in f.keep:
            f.objective.append((f.keep[job.name], migration_cost(job, w)))
            f.objective_groups.append(ObjectiveGroup((f.keep[job.name],), 1))
    used = (*f.z.values(), *f.r.values())
    for var in used:
        f.objective.append((var, -w.locality))
    if used:
        # At an optimum a node or rack is marked only where the job has a GPU.
        gpus = sum(n.available_gpus for n in p.cluster.nodes)
        f.objective_groups.append(ObjectiveGroup(tuple(used), 2 * gpus))


RefFamily = Callable[[RefFormulation], None]

REFERENCE_FAMILIES: dict[str, RefFamily] = {
    "add_config_choice": add_config_choice,
    "add_placement_vars": add_placement_vars,
    "add_gang_size": add_gang_size,
    "add_gpu_type_match": add_gpu_type_match,
    "add_tensor_groups_in_node": add_tensor_groups_in_node,
    "add_gpu_capacity": add_gpu_capacity,
    "add_locality": add_locality,
    "add_migration": add_migration,
    "add_power_budget": add_power_budget,
    "add_rack_power_budget": add_rack_power_budget,
    "add_queue_quotas": lambda f: _queue_quotas(f),
    "add_node_floor": lambda f: _node_floor(f),
}
"""By the name of the solver.exact.constraints function each one was."""


def _queue_quotas(f: RefFormulation) -> None:
    from tests.reference_quotas import add_queue_quotas  # it builds on this module

    add_queue_quotas(f)


def _node_floor(f: RefFormulation) -> None:
    from tests.reference_node_floor import add_node_floor  # it builds on this module

    add_node_floor(f)


def build_reference(
    problem: Problem, configs: ConfigSet, families: Sequence[str] = tuple(REFERENCE_FAMILIES)
) -> RefFormulation:
    f = RefFormulation(problem, configs)
    add_choice_vars(f)
    for name in families:
        REFERENCE_FAMILIES[name](f)
    set_objective(f)
    return f
