"""The joint MIG model (solver.exact.mig_model) assembled, and plans in and out of it.

``build_mig`` is ``formulation.build`` with the MIG families (the cluster power budget with
slice watts in place of ``add_power_budget``); ``hint_mig`` maps a plan with slices (the
heuristic packing's) onto its variables, ``extract_mig`` reads a solution back as a plan with
its instances and layout changes, scored by ``score_plan``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from solver.domain import GpuSlice, JobAssignment, JobState, Plan, Problem
from solver.exact import formulation
from solver.exact.budgets import add_power_budget
from solver.exact.constraints import add_choice_vars, set_objective
from solver.exact.index import Values, dense
from solver.exact.mig_model import (
    WHOLE,
    Layout,
    MigFormulation,
    SliceVar,
    add_gpu_in_use,
    add_instance_capacity,
    add_layout_choice,
    add_mig_power_budget,
    add_shared_clock,
    add_slice_choice,
    add_slice_vars,
    add_whole_on_unpartitioned,
    layout_instances,
    placed,
    set_mig_objective,
)
from solver.mig import GpuLayout, LayoutChange, MigInstance
from solver.perfmodel.configs import ConfigSet
from solver.scoring.objective import is_migrated, score_plan

MigFamily = Callable[[MigFormulation], None]

MIG_FAMILIES: tuple[MigFamily, ...] = (
    add_layout_choice,
    add_slice_vars,
    add_slice_choice,
    add_instance_capacity,
    add_shared_clock,
    add_gpu_in_use,
    add_whole_on_unpartitioned,
    add_mig_power_budget,
)


def build_mig(
    problem: Problem, configs: ConfigSet, families: Sequence[MigFamily] = MIG_FAMILIES
) -> MigFormulation:
    """The full model with slices; `families` lets tests leave one MIG family out."""
    f = MigFormulation(problem, configs)
    add_choice_vars(f)
    for family in formulation.CONSTRAINT_FAMILIES:
        # Its own power budget; and no node floor: its busy and free would not see the slice
        # jobs (left out, the floor only loosens the bound).
        if family is not add_power_budget and family is not formulation.add_node_floor:
            family(f)
    for mig_family in families:
        mig_family(f)
    set_objective(f)
    set_mig_objective(f)
    return f


def _whole_only(problem: Problem, partitioned: set[tuple[str, int]]) -> Problem:
    """The problem with the GPUs a plan partitions unavailable (whole-GPU jobs go elsewhere)."""
    nodes = tuple(
        dataclasses.replace(
            n,
            unavailable_gpu_indices=n.unavailable_gpu_indices
            | {g for m, g in partitioned if m == n.name},
            mig_layouts=(),
        )
        for n in problem.cluster.nodes
    )
    return dataclasses.replace(problem, cluster=dataclasses.replace(problem.cluster, nodes=nodes))


def extract_mig(f: MigFormulation, values: Sequence[float] | Mapping[int, float]) -> Plan:
    """The plan of a solution: whole-GPU jobs on the GPUs left whole, slice jobs on the
    instances of their GPU's layout (own instance first), and every changed layout."""
    v = dense(values, f.num_variables)
    layouts = {gpu.key: placed(gpu, v.tolist()) for gpu in f.mig.gpus}
    partitioned = {k for k, x in layouts.items() if x != WHOLE}
    whole = formulation.extract(_with(f, _whole_only(f.problem, partitioned)), v.tolist())
    on = [s for s in f.mig.slices if v[s.var] > 0.5]
    places = _instances(f, layouts, on)
    assignments = []
    by_job = {s.job: s for s in on}
    for a in whole.assignments:
        s = by_job.get(a.job)
        if s is None:
            assignments.append(a)
            continue
        gpu = f.mig.gpus[s.gpu]
        inst = places[s.job]
        run = JobAssignment(
            a.job, JobState.RUNNING, s.config, (GpuSlice(gpu.node, (gpu.index,)),), mig=inst
        )
        job = next(j for j in f.problem.jobs if j.name == a.job)
        if is_migrated(job, run):
            run = dataclasses.replace(run, migrated=True)
        assignments.append(run)
    changes = tuple(
        LayoutChange(gpu.node, GpuLayout(gpu.index, layout_instances(layouts[gpu.key])))
        for gpu in f.mig.gpus
        if layouts[gpu.key] != gpu.now
    )
    best = f.configs.best_samples_per_second
    objective = score_plan(f.problem, assignments, best, changes, f.configs.least_joules_per_sample)
    return Plan(tuple(assignments), objective, changes)


def _with(f: MigFormulation, problem: Problem) -> formulation.Formulation:
    """A view of `f` whose plans are materialized on `problem` (same layout and indices)."""
    view = formulation.Formulation.__new__(formulation.Formulation)
    view.__dict__.update(f.__dict__)
    view.problem = problem
    return view


def _instances(
    f: MigFormulation, layouts: Mapping[tuple[str, int], Layout], on: Sequence[SliceVar]
) -> dict[str, MigInstance]:
    """Each slice job's instance: its own first, then free ones of its profile by start."""
    free = {k: sorted(x, key=lambda p: (p[1], p[0])) for k, x in layouts.items()}
    out: dict[str, MigInstance] = {}
    for s in sorted(on, key=lambda s: (s.own is None, s.job)):
        key = f.mig.gpus[s.gpu].key
        place = s.own if s.own is not None else next(
            (p for p in free[key] if p[0] == s.config.mig_profile), None
        )  # fmt: skip
        if place is None or place not in free[key]:
            raise ValueError(f"{s.job}: no free {s.config.mig_profile} instance on {key}")
        free[key].remove(place)
        out[s.job] = MigInstance(*place)
    return out


def hint_mig(f: MigFormulation, plan: Plan) -> Values:
    """A plan with slices as values of every variable (a warm start): a changed layout goes
    to the first candidate that contains it."""
    out = dense(formulation.hint(f, plan), f.num_variables).copy()
    layouts: dict[tuple[str, int], Layout] = {g.key: g.now for g in f.mig.gpus}
    for c in plan.layout_changes:
        layouts[c.node, c.layout.gpu_index] = c.layout.places()
    mig = {a.job: a for a in plan.assignments if a.mig is not None}
    jobs = {j.name: j for j in f.problem.jobs}
    for k, gpu in enumerate(f.mig.gpus):
        want = layouts[gpu.key]
        at = next((i for i, x in enumerate(gpu.layouts) if x == want), None)
        if at is None:
            at = next((i for i, x in enumerate(gpu.layouts) if want <= x), 0)
        out[gpu.choice] = 0.0
        out[gpu.choice[at]] = 1.0
        clock = None
        for s in f.mig.slices:
            a = mig.get(s.job)
            if s.gpu != k or a is None or a.config != s.config:
                continue
            if [(x.node, i) for x in a.placement for i in x.gpu_indices] != [gpu.key]:
                continue
            stays = not a.migrated and jobs[s.job].current is not None
            if (s.own is not None) == stays:
                out[s.var] = 1.0
                clock = s.config.sm_clock_mhz
        if gpu.in_use >= 0:
            out[gpu.in_use] = float(clock is not None)
        for mhz, var in gpu.clocks.items():
            out[var] = float(mhz == clock)
    return Values(out)
