"""The full model, described once: configuration choice, placement, power and migration.

A ``Formulation`` is backend-neutral data: variables with bounds and integrality, linear
constraints with integer coefficients (some enforced only when a binary is 1: indicator
constraints), and a linear objective to maximise (``solver.exact.milp``).
``solver.exact.backends`` translates it for CP-SAT, HiGHS and Pyomo; none of them knows the
scheduling problem. One function per constraint family (``add_*``, in
``solver.exact.constraints``) builds it, and each family is tested on its own by leaving it
out. This module assembles the model and maps plans into it (a warm start) and out of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from solver.domain import JobAssignment, JobState, Plan, Problem
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
from solver.exact.index import Values, dense
from solver.exact.milp import Formulation
from solver.exact.milp_parts import Constraint, ObjectiveGroup, Variable
from solver.exact.node_floor import add_node_floor, hint_node_floor
from solver.exact.quotas import add_queue_quotas
from solver.exact.rows import IntArray, ints
from solver.perfmodel.configs import ConfigSet
from solver.scoring.plans import Choice, materialize

__all__ = [
    "CONSTRAINT_FAMILIES",
    "Constraint",
    "Family",
    "Formulation",
    "ObjectiveGroup",
    "Values",
    "Variable",
    "add_config_choice",
    "add_gang_size",
    "add_gpu_capacity",
    "add_gpu_type_match",
    "add_locality",
    "add_migration",
    "add_node_floor",
    "add_placement_vars",
    "add_power_budget",
    "add_queue_quotas",
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
    add_queue_quotas,
    add_node_floor,
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


def hint(f: Formulation, plan: Plan) -> Values:
    """A plan (the heuristic's) as values of every variable of the formulation: a warm start."""
    lay, ix = f.layout, f.index
    lb, _, _ = f.bounds()
    out = lb.copy()  # variables no plan speaks of (contradiction markers) at their bound
    chosen = np.full(lay.num_jobs, -1, dtype=np.int64)
    tensor = np.ones(lay.num_jobs, dtype=np.int64)
    kept = np.zeros(lay.num_jobs, dtype=bool)
    held_job: list[int] = []
    held_node: list[int] = []
    held_count: list[int] = []
    node_index = {n: k for k, n in enumerate(lay.node_names)}
    by_job: dict[str, JobAssignment] = {}
    for given in plan.assignments:
        by_job.setdefault(given.job, given)
    for j, job in enumerate(lay.jobs):
        a = by_job[job.name]
        options = f.configs.by_job.get(job.name, ())
        if a.state is not JobState.RUNNING or a.config is None or a.config not in options:
            continue
        chosen[j] = lay.cfg_start[j] + options.index(a.config)
        tensor[j] = a.config.tensor_parallel
        kept[j] = not a.migrated
        for node, k in a.gpus_per_node().items():
            held_job.append(j)
            held_node.append(node_index.get(node, -1))
            held_count.append(k)
    running = chosen >= 0
    out[ix.y] = 0.0
    out[ix.y[chosen[running]]] = 1.0
    count = np.zeros(lay.num_pairs, dtype=np.int64)
    nodes = ints(held_node)
    pairs = lay.pair_of(ints(held_job), np.maximum(nodes, 0))
    on = (pairs >= 0) & (nodes >= 0)
    np.add.at(count, pairs[on], ints(held_count)[on])
    if ix.x is not None:
        out[ix.x] = count
    out[ix.tp] = running[ix.tp_job] & (tensor[ix.tp_job] == ix.tp_degree)
    if ix.q is not None:
        has_q = ix.q >= 0
        t = tensor[lay.pair_job[has_q]]
        out[ix.q[has_q]] = np.where(t > 1, count[has_q] // t, 0)
    if ix.z is not None:
        out[ix.z] = count > 0
    hint_node_floor(f, out, count)
    racks = len(lay.rack_names)
    rack_key = lay.pair_job * racks + lay.node_rack[lay.pair_node]
    if ix.r.size or ix.w.size:
        in_rack = _sum_by_key(rack_key, count)
        out[ix.r] = in_rack(ix.r_job * racks + ix.r_rack) > 0
        w_count = in_rack(ix.w_job * racks + ix.w_rack)
        out[ix.w] = np.where(chosen[ix.w_job] == ix.w_config, w_count, 0)
    if ix.keep is not None:
        has_keep = ix.keep >= 0
        out[ix.keep[has_keep]] = running[has_keep] & kept[has_keep]
    for claim, cols, coef in ix.quota_claims:  # at least what the plan's queue uses
        out[claim] = max(out[claim], float(coef @ out[cols]))
    _, ub, _ = f.bounds()
    for picks, held in ix.drf_rows:  # the resource of the largest share
        shares = [[float(coef @ out[cols]) for cols, coef in parts] for _, parts in held]
        best = int(np.argmax(shares[0])) if held and shares[0] else -1
        out[picks[picks >= 0]] = np.arange(picks.size)[picks >= 0] == best
        for (var, _), values in zip(held, shares, strict=True):
            out[var] = min(ub[var], values[best]) if best >= 0 else 0.0
    for var, rows in ix.epigraphs:  # as high as its rows allow
        out[var] = min([ub[var], *(rhs + float(coef @ out[cols]) for rhs, cols, coef in rows)])
    return Values(out)


def _sum_by_key(keys: IntArray, values: IntArray) -> Callable[[IntArray], IntArray]:
    """Sum of values per key, looked up for given keys (0 where a key has no values)."""
    unique, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=values, minlength=unique.size)

    def lookup(wanted: IntArray) -> IntArray:
        if not unique.size:
            return np.zeros(wanted.size, dtype=np.int64)
        at = np.minimum(np.searchsorted(unique, wanted), unique.size - 1)
        return ints(np.where(unique[at] == wanted, sums[at], 0))

    return lookup


def extract(f: Formulation, values: Sequence[float] | Mapping[int, float]) -> Plan:
    """The plan of a solution (values by variable index): configuration and GPUs per node."""
    lay, ix = f.layout, f.index
    v = dense(values, f.num_variables)
    on = np.flatnonzero(v[ix.y] > 0.5)
    first = on[np.unique(lay.cfg_job[on], return_index=True)[1]]  # each job's first chosen
    counts = np.rint(v[ix.x]).astype(np.int64) if ix.x is not None else ints([])
    placed = np.flatnonzero(counts > 0)
    per_job: dict[int, dict[str, int]] = {}
    for p, k in zip(placed.tolist(), counts[placed].tolist(), strict=True):
        per_job.setdefault(int(lay.pair_job[p]), {})[lay.node_names[lay.pair_node[p]]] = k
    choices: dict[str, Choice | None] = {}
    for k in first.tolist():
        j = int(lay.cfg_job[k])
        choices[lay.job_names[j]] = (lay.configs[k], per_job.get(j, {}))
    return materialize(f.problem, f.configs, choices)


def estimate_size(problem: Problem, configs: ConfigSet) -> int:
    """Rough variable count of the full model, from above: configurations, placement variables
    (a job's candidate nodes), and with rack budgets one per configuration and budgeted rack of
    its GPU type (``add_rack_power_budget``: without them, a 64-node snapshot of 24,045
    variables was estimated at 15,795 and solved in process, where HiGHS's presolve ran 0.27 s
    past a 0.12 s limit)."""
    per_type: dict[str, int] = {}
    budgeted: dict[str, set[str]] = {}
    rack_budgets = problem.cluster.rack_power_budgets_watts
    for n in problem.cluster.nodes:
        per_type[n.gpu_type] = per_type.get(n.gpu_type, 0) + 1
        if n.rack in rack_budgets:
            budgeted.setdefault(n.gpu_type, set()).add(n.rack)
    placement = 0
    rack_shares = 0
    for options in configs.by_job.values():
        types = {c.gpu_type for c in options}
        placement += sum(per_type.get(t, 0) for t in types)
        racks = set().union(*(budgeted.get(t, set()) for t in types)) if budgeted else set()
        rack_shares += len(racks) * len(options)
    factor = 3 if problem.weights.locality > 0 else 2
    return configs.num_configurations + factor * placement + rack_shares
