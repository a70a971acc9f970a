"""MIG in the full model (docs/mig.md, "The joint model"): layouts, slices, clocks, power.

Per GPU that may hold instances (a layout now, or a type some slice job can use), a choice
``layout[g, l]`` among: whole, its layout now, and the maximal valid layouts of the profiles its
slice jobs use (a changed layout with fewer free instances is worth no more than a maximal one
containing it; layouts without an instance a non-preemptible job keeps are left out). Per slice
job, ``slice[j, g, profile, i]``: one instance of that profile on `g` in its slice
configuration `i`, counted against the layout's instances of the profile; ``own[j, i]`` keeps it
on its instance now (no migration). One SM clock per GPU (``clock[g, mhz]``), a GPU's idle power
once (``in_use[g]``), whole-GPU jobs only on GPUs whose layout is whole, a changed layout priced
as a migration of weight 1 (``solver.scoring.objective``, the single definition).
Identical idle whole GPUs of a node are symmetry-broken (layout order).

The model covers snapshots without quotas, fairness or rack budgets (``supports``); elsewhere
the heuristic packing answers alone (solver.core.mig).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from solver.domain import Config, Problem
from solver.exact.budgets import MILLIWATTS
from solver.exact.formulation import estimate_size as formulation_size
from solver.exact.milp import Formulation
from solver.exact.rows import IntArray, ints
from solver.mig import MigGeometry, MigInstance, valid_layouts
from solver.perfmodel import budgets as rooms
from solver.perfmodel.configs import ConfigSet
from solver.preferences import preference_cost
from solver.scoring.objective import migration_cost, reconfiguration_cost, running_gain

Place = tuple[str, int]
Layout = frozenset[Place]
WHOLE: Layout = frozenset()


@dataclass
class MigGpuVars:
    """One GPU of the joint model: its candidate layouts (0: whole) and their variables."""

    node: str
    index: int
    gpu_type: str
    current: tuple[MigInstance, ...]
    layouts: list[Layout]
    choice: IntArray = field(default_factory=lambda: ints([]))
    in_use: int = -1
    clocks: dict[int, int] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.index)

    @property
    def now(self) -> Layout:
        return frozenset(i.place for i in self.current)


@dataclass(frozen=True)
class SliceVar:
    """A slice job on an instance of `profile` of GPU `gpu` (``MigIndex.gpus``) in `config`;
    `own`: on its instance now (at `place`)."""

    var: int
    job: str
    gpu: int
    config: Config
    own: Place | None = None


@dataclass
class MigIndex:
    gpus: list[MigGpuVars] = field(default_factory=list)
    slices: list[SliceVar] = field(default_factory=list)


class MigFormulation(Formulation):
    """The full model with the MIG variables of this module."""

    def __init__(self, problem: Problem, configs: ConfigSet) -> None:
        super().__init__(problem, configs)
        self.mig = MigIndex()


def slice_profiles(configs: ConfigSet) -> dict[str, set[str]]:
    """Per GPU type, the MIG profiles some slice job may run on."""
    profiles: dict[str, set[str]] = {}
    for options in configs.slices.values():
        for c in options:
            profiles.setdefault(c.gpu_type, set()).add(c.mig_profile)
    return profiles


def estimate_size(problem: Problem, configs: ConfigSet) -> int:
    """Roughly how many variables the joint model has, without building it (its build is
    Python, about 26 us a variable here: 0.77 s for 29,524): the whole-GPU model's estimate,
    a slice variable per slice configuration on every GPU of its type, and per MIG GPU its
    candidate layouts (as add_layout_choice enumerates them, once per type) and clocks."""
    gpus: dict[str, int] = {}
    for n in problem.cluster.nodes:
        gpus[n.gpu_type] = gpus.get(n.gpu_type, 0) + len(n.available_gpu_indices)
    profiles = slice_profiles(configs)
    slices = sum(gpus.get(c.gpu_type, 0) for options in configs.slices.values() for c in options)
    per_gpu = {
        t: len(candidate_layouts(geometry, profiles.get(t, set()), frozenset(), set()))
        + 1
        + PER_GPU_MORE
        for t, geometry in problem.cluster.mig.items()
    }
    layouts = sum(gpus.get(t, 0) * k for t, k in per_gpu.items())
    return formulation_size(problem, configs) + slices + layouts


PER_GPU_MORE = 8
"""Besides its layouts, a MIG GPU's variables: its clock choices and whether it is in use, 4-5
on the examples and generated snapshots (mig-slices: 60 clock and 15 in-use variables on 15
GPUs); 8 keeps the estimate above the model built."""


def supports(problem: Problem) -> str:
    """Why the joint model does not cover the snapshot; "" when it does."""
    c = problem.cluster
    if c.queues:
        return "queue quotas"
    if problem.fairness.active:
        return "a fairness term"
    if c.rack_power_budgets_watts:
        return "rack power budgets"
    return ""


def pinned(problem: Problem) -> dict[tuple[str, int], set[Place]]:
    """Per GPU, the instances non-preemptible jobs keep."""
    out: dict[tuple[str, int], set[Place]] = {}
    for job in problem.jobs:
        cur = job.current
        if job.preemptible or cur is None or cur.mig is None or len(cur.placement) != 1:
            continue
        s = cur.placement[0]
        if len(s.gpu_indices) == 1:
            out.setdefault((s.node, s.gpu_indices[0]), set()).add(cur.mig.place)
    return out


def candidate_layouts(
    geometry: MigGeometry, profiles: set[str], now: Layout, keep: set[Place]
) -> list[Layout]:
    """Whole, the layout now, and the maximal valid layouts of `profiles` with the kept places
    (whole and any layout without them left out when some are kept)."""
    use = [geometry.profiles[p] for p in sorted(profiles | {p for p, _ in keep})]
    every = [frozenset(i.place for i in x) for x in valid_layouts(geometry, use)] if use else []
    every = [x for x in every if keep <= x]
    maximal = sorted((x for x in every if not any(x < o for o in every)), key=sorted)
    out: list[Layout] = [] if keep else [WHOLE]
    for x in [now, *maximal]:
        if x not in out and keep <= x:
            out.append(x)
    return out


def add_layout_choice(f: MigFormulation) -> None:
    """layout[g, l]: each MIG-capable GPU takes exactly one candidate layout."""
    p, cfg = f.problem, f.configs
    keep = pinned(p)
    profiles = slice_profiles(cfg)
    for n in p.cluster.nodes:
        geometry = p.cluster.mig.get(n.gpu_type)
        if geometry is None:
            continue
        layouts = {x.gpu_index: x.instances for x in n.mig_layouts if x.instances}
        for g in n.available_gpu_indices:
            now = layouts.get(g, ())
            if not now and n.gpu_type not in profiles:
                continue
            gpu = MigGpuVars(n.name, g, n.gpu_type, now, [])
            gpu.layouts = candidate_layouts(
                geometry, profiles.get(n.gpu_type, set()), gpu.now, keep.get(gpu.key, set())
            )
            k = len(gpu.layouts)
            names = [f"{n.name},{g},{i}" for i in range(k)]
            gpu.choice = f.add_vars("layout", np.zeros(k), np.ones(k), _keys(names))
            f.add_row("mig_layout", f"one_layout[{n.name},{g}]", [(v, 1) for v in gpu.choice], 1, 1)
            f.mig.gpus.append(gpu)
    _break_symmetry(f)


def _keys(names: list[str]) -> Callable[[], list[str]]:
    return lambda: names


def _break_symmetry(f: MigFormulation) -> None:
    """Idle whole GPUs of one node (no job on them now) are alike: the lower index takes a
    layout of at least as high a rank (whole is rank 0), so whole ones come last."""
    held = {
        (s.node, i)
        for j in f.problem.jobs
        if j.current is not None
        for s in j.current.placement
        for i in s.gpu_indices
    }
    alike: dict[tuple[str, tuple[Layout, ...]], list[MigGpuVars]] = {}
    for gpu in f.mig.gpus:
        if not gpu.current and gpu.key not in held:
            alike.setdefault((gpu.node, tuple(gpu.layouts)), []).append(gpu)
    for group in alike.values():
        for a, b in itertools.pairwise(group):
            terms = [(int(v), r) for r, v in enumerate(a.choice.tolist())]
            terms += [(int(v), -r) for r, v in enumerate(b.choice.tolist())]
            f.add_row("mig_layout", f"symmetry[{a.node},{a.index},{b.index}]", terms, lo=0)


def add_slice_vars(f: MigFormulation) -> None:
    """slice[j, g, profile, i] on the GPUs of the job's types whose layouts offer the profile,
    on nodes it may use; own[j, i] on its instance now, when a layout keeps it."""
    for name, options in sorted(f.configs.slices.items()):
        job = next(j for j in f.problem.jobs if j.name == name)
        cur = job.current
        own_gpu = None
        if cur is not None and cur.mig is not None and len(cur.placement) == 1:
            s = cur.placement[0]
            own_gpu = (s.node, s.gpu_indices[0]) if len(s.gpu_indices) == 1 else None
        for k, gpu in enumerate(f.mig.gpus):
            offered = {p for x in gpu.layouts for p, _ in x}
            for i, c in enumerate(options):
                if c.gpu_type != gpu.gpu_type or c.mig_profile not in offered:
                    continue
                own = cur.mig.place if cur is not None and cur.mig is not None else None
                mine = gpu.key == own_gpu and own is not None and own[0] == c.mig_profile
                if mine and any(own in x for x in gpu.layouts):
                    v = f.add_var(f"own[{name},{i}]", 0, 1)
                    f.mig.slices.append(SliceVar(v, name, k, c, own))
                if c.kept_only or not job.may_use(gpu.node):
                    continue
                v = f.add_var(f"slice[{name},{gpu.node},{gpu.index},{i}]", 0, 1)
                f.mig.slices.append(SliceVar(v, name, k, c))


def add_slice_choice(f: MigFormulation) -> None:
    """A slice job runs in at most one configuration, whole or on one instance; a
    non-preemptible job on an instance stays on it."""
    lay = f.layout
    by_job: dict[str, list[SliceVar]] = {}
    for s in f.mig.slices:
        by_job.setdefault(s.job, []).append(s)
    for j, job in enumerate(lay.jobs):
        mine = by_job.get(job.name, [])
        if job.name not in f.configs.slices:
            continue
        cur = job.current
        if cur is not None and cur.mig is not None and not job.preemptible:
            own = [(s.var, 1) for s in mine if s.own is not None]
            f.add_row("mig_slices", f"stays_on_instance[{job.name}]", own, lo=1)
        ys = f.index.y[int(lay.cfg_start[j]) : int(lay.cfg_start[j + 1])].tolist()
        terms = [(int(v), 1) for v in ys] + [(s.var, 1) for s in mine]
        f.add_row("mig_slices", f"one_run[{job.name}]", terms, hi=1)


def add_instance_capacity(f: MigFormulation) -> None:
    """Per GPU and profile, no more jobs than the layout has instances of it; a job stays on
    its own instance only if the layout keeps it."""
    per: dict[tuple[int, str], list[int]] = {}
    for s in f.mig.slices:
        per.setdefault((s.gpu, s.config.mig_profile), []).append(s.var)
        if s.own is not None:
            gpu = f.mig.gpus[s.gpu]
            terms = [(s.var, 1)] + [
                (int(v), -1) for x, v in zip(gpu.layouts, gpu.choice.tolist(), strict=True)
                if s.own in x
            ]  # fmt: skip
            f.add_row("mig_instances", f"own_kept[{s.job},{gpu.node},{gpu.index}]", terms, hi=0)
    for (k, profile), vs in per.items():
        gpu = f.mig.gpus[k]
        terms = [(v, 1) for v in vs]
        for x, v in zip(gpu.layouts, gpu.choice.tolist(), strict=True):
            count = sum(1 for p, _ in x if p == profile)
            if count:
                terms.append((int(v), -count))
        f.add_row("mig_instances", f"instances[{gpu.node},{gpu.index},{profile}]", terms, hi=0)


def add_shared_clock(f: MigFormulation) -> None:
    """clock[g, mhz]: all the jobs on one GPU's instances run at one SM clock."""
    per: dict[tuple[int, int, str], list[int]] = {}
    for s in f.mig.slices:
        per.setdefault((s.gpu, s.config.sm_clock_mhz, s.config.mig_profile), []).append(s.var)
    for k, gpu in enumerate(f.mig.gpus):
        mhz = sorted({c for g, c, _ in per if g == k})
        for c in mhz:
            gpu.clocks[c] = f.add_var(f"clock[{gpu.node},{gpu.index},{c}]", 0, 1)
        if len(mhz) > 1:
            terms = [(v, 1) for v in gpu.clocks.values()]
            f.add_row("mig_clock", f"one_clock[{gpu.node},{gpu.index}]", terms, hi=1)
    geometry = f.problem.cluster.mig
    for (k, c, profile), vs in per.items():
        gpu = f.mig.gpus[k]
        most = geometry[gpu.gpu_type].profiles[profile].max_count
        terms = [(v, 1) for v in vs] + [(gpu.clocks[c], -most)]
        f.add_row("mig_clock", f"at_clock[{gpu.node},{gpu.index},{profile},{c}]", terms, hi=0)


def add_gpu_in_use(f: MigFormulation) -> None:
    """in_use[g] is 1 when a job runs on one of its instances (its idle power, once)."""
    on: dict[int, list[int]] = {}
    for s in f.mig.slices:
        on.setdefault(s.gpu, []).append(s.var)
    for k, gpu in enumerate(f.mig.gpus):
        vs = on.get(k, [])
        if not vs:
            continue
        gpu.in_use = f.add_var(f"in_use[{gpu.node},{gpu.index}]", 0, 1)
        most = f.problem.cluster.mig[gpu.gpu_type].compute_slices
        terms = [(v, 1) for v in vs] + [(gpu.in_use, -most)]
        f.add_row("mig_in_use", f"in_use[{gpu.node},{gpu.index}]", terms, hi=0)


def add_whole_on_unpartitioned(f: MigFormulation) -> None:
    """Whole-GPU jobs only on GPUs whose layout is whole; a whole-GPU job kept on its GPUs
    keeps them whole."""
    lay = f.layout
    x = f.index.x
    by_node: dict[str, list[MigGpuVars]] = {}
    for gpu in f.mig.gpus:
        by_node.setdefault(gpu.node, []).append(gpu)
    for n, node in enumerate(lay.node_names):
        gpus = by_node.get(node, [])
        if not gpus or x is None:
            continue
        pairs = np.flatnonzero(lay.pair_node == n)
        terms = [(int(x[p]), 1) for p in pairs.tolist()]
        terms += [(int(g.choice[0]), -1) for g in gpus if g.layouts[0] == WHOLE]
        cap = int(lay.node_avail[n]) - len(gpus)
        f.add_row("mig_whole", f"whole_gpus[{node}]", terms, hi=cap)
    keep = f.index.keep
    where = {g.key: g for g in f.mig.gpus}
    for j, job in enumerate(lay.jobs):
        if keep is None or keep[j] < 0 or job.current is None:
            continue
        for s in job.current.placement:
            for i in s.gpu_indices:
                held = where.get((s.node, i))
                if held is None:
                    continue
                terms = [(int(keep[j]), 1)]
                if held.layouts[0] == WHOLE:
                    terms.append((int(held.choice[0]), -1))
                f.add_row("mig_whole", f"kept_whole[{job.name},{s.node},{i}]", terms, hi=0)


def add_mig_power_budget(f: MigFormulation) -> None:
    """The cluster budget (mW) with slice watts: every GPU's idle power is in the room once,
    so a slice adds its watts above idle (budgets.extra_watts); replaces add_power_budget."""
    budget = f.problem.cluster.power_budget_watts
    if budget is None:
        return
    lay = f.layout
    extra = lay.cfg_watts - lay.type_idle[lay.cfg_type] * lay.cfg_gpus
    coef = np.ceil(extra * MILLIWATTS).astype(np.int64)
    terms = [(int(f.index.y[k]), int(coef[k])) for k in np.flatnonzero(coef).tolist()]
    for s in f.mig.slices:
        watts = rooms.extra_watts(f.problem.cluster, s.config)
        terms.append((s.var, int(np.ceil(watts * MILLIWATTS))))
    room = rooms.power_room(f.problem.cluster)
    assert room is not None
    f.add_row("power_budget", "power_budget[cluster]", terms, hi=int(np.floor(room * MILLIWATTS)))


def set_mig_objective(f: MigFormulation) -> None:
    """Slice gains (running_gain less the node preference, own instance: its migration back),
    each used GPU's idle power once, a reconfiguration per GPU whose layout changes."""
    p = f.problem
    w, cluster = p.weights, p.cluster
    max_watts = cluster.max_gpu_watts()
    jobs = {j.name: j for j in p.jobs}
    best = f.configs.best_samples_per_second
    variables: list[int] = []
    coefs: list[float] = []
    for s in f.mig.slices:
        job = jobs[s.job]
        gain = running_gain(job, s.config, best[s.job], w, max_watts)
        node = f.mig.gpus[s.gpu].node
        gain -= w.node_preference * preference_cost(job.preference, job.max_gpus, {node: 1})
        variables.append(s.var)
        coefs.append(gain + (migration_cost(job, w) if s.own is not None else 0.0))
    for gpu in f.mig.gpus:
        if gpu.in_use >= 0:
            variables.append(gpu.in_use)
            coefs.append(-w.energy * cluster.gpu_types[gpu.gpu_type].idle_watts / max_watts)
        at = gpu.layouts.index(gpu.now) if gpu.now in gpu.layouts else -1
        f.offset -= reconfiguration_cost(w)
        if at >= 0:
            variables.append(int(gpu.choice[at]))
            coefs.append(reconfiguration_cost(w))
    f.add_objective(ints(variables), np.asarray(coefs, dtype=float))


def layout_instances(layout: Layout) -> tuple[MigInstance, ...]:
    return tuple(MigInstance(p, s) for p, s in sorted(layout, key=lambda x: (x[1], x[0])))


def placed(gpu: MigGpuVars, values: Sequence[float]) -> Layout:
    """The layout a solution gives the GPU."""
    on = [k for k, v in enumerate(gpu.choice.tolist()) if values[v] > 0.5]
    return gpu.layouts[on[0]] if on else gpu.now
