"""Slice jobs packed onto MIG instances around a whole-GPU plan (docs/mig.md, "How a plan gets
its slices").

The whole-GPU plan comes first (every path solves the snapshot with the partitioned GPUs that
hold a job left out; one it uses whole is changed back to whole), so whole GPUs go to the jobs
that need them; then the slice jobs it leaves queued are packed,
most valuable first, each on the first place that takes it: its own instance, a free instance
that exists (smallest profile first: best fit), a new instance on a partitioned GPU (free
instances the plan does not use may go), a GPU no job uses (on the node with the fewest such
GPUs, keeping fuller nodes whole for large jobs). Last, a GPU whose whole-GPU job could run on a
slice is partitioned when its job and the queued slice jobs on it are worth more than the job
alone. Every gain is the objective's (solver.scoring.objective): a changed layout costs a
reconfiguration, a GPU's first instance its idle power; all jobs of one GPU share its clock;
power budgets and quotas hold at every step.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Mapping, Sequence

from solver.domain import (
    Config,
    GpuSlice,
    Job,
    JobAssignment,
    JobState,
    Plan,
    Problem,
    gpus_per_node,
)
from solver.mig import MigInstance
from solver.perfmodel import budgets
from solver.perfmodel.configs import ConfigSet
from solver.perfmodel.quotas import QuotaLedger
from solver.preferences import dislike_of, least_disliked
from solver.scoring.objective import (
    is_migrated,
    migration_cost,
    reconfiguration_cost,
    running_gain,
    score_plan,
)
from solver.scoring.plans import queued_assignment
from solver.search.mig_gpus import MigGpu, cluster_mig_gpus, on_own

EPSILON = 1e-9
CONVERT_MISSES = 16
"""A conversion stops trying waiting jobs after this many in a row that go on none of the GPU's
new instances (the budgets or its clock keep them out): a packing heuristic's limit, which the
joint model and the bound do not share; without it a power-bound snapshot of 1,000 jobs spent
0.9 s on conversions that could not pay."""
KeptSlice = tuple[Config, tuple[str, int], MigInstance]
"""A slice job that stays on its instance whatever the plan: config, (node, GPU), instance."""
Kept = Mapping[str, KeptSlice]


class Packer:
    """The packing state: MIG GPUs, watts and quotas drawn, slice jobs placed."""

    def __init__(
        self,
        problem: Problem,
        configs: ConfigSet,
        base: Sequence[JobAssignment],
        kept: Kept,
        stop_at: float | None = None,
    ) -> None:
        self.problem = problem
        self.configs = configs
        self.stop_at = stop_at
        """A time.monotonic() instant after which no job is packed and no conversion starts
        (None: no limit)."""
        cluster = problem.cluster
        self.jobs = {j.name: j for j in problem.jobs}
        self.max_watts = cluster.max_gpu_watts()
        self._by_profile: dict[tuple[str, str, str], tuple[Config, ...]] = {}
        self._profile_order: dict[tuple[str, str], list[str]] = {}
        self.assignments = {a.job: a for a in base}
        self.quotas = QuotaLedger(cluster)
        self.job_watts = 0.0
        self.rack_watts: dict[str, float] = {}
        self.rack_of = {n.name: n.rack for n in cluster.nodes}
        self.type_of = {n.name: n.gpu_type for n in cluster.nodes}
        used: set[tuple[str, int]] = set()
        for a in base:
            if a.state is JobState.RUNNING and a.config is not None:
                self._draw(a.config, gpus_per_node(a.placement), 1.0)
                self.quotas.take(self.jobs[a.job], a.config)
                used.update((s.node, i) for s in a.placement for i in s.gpu_indices)
        self.gpus, self.spare, self.merged = cluster_mig_gpus(cluster, used)
        """MIG GPUs by (node, index); whole GPUs no job uses, per type, in the order they are
        partitioned; partitioned GPUs the whole-GPU plan uses whole, changed back to whole."""
        self.packed: dict[str, tuple[Config, tuple[str, int], MigInstance]] = {}
        for name, (config, gpu, inst) in kept.items():
            mig = self.gpus[gpu]
            mig.assign(name, inst.place)
            mig.clock = config.sm_clock_mhz
            self.take_slice(name, config, gpu, inst)

    @functools.cached_property
    def top(self) -> dict[str, float]:
        """Each slice job's best gain on any slice (no reconfiguration, no idle power); on first
        use: a plan that only places the kept slices (the first plan) does not pay for it."""
        return _best_slice_gains(self.problem, self.configs, self.max_watts)

    @functools.cached_property
    def by_value(self) -> list[Job]:
        """Every slice job, most valuable slice first."""
        return [self.jobs[n] for n in sorted(self.top, key=lambda n: (-self.top[n], n))]

    # ------------------------------------------------------------ ledgers

    def _draw(self, config: Config, counts: Mapping[str, int], sign: float) -> None:
        cluster = self.problem.cluster
        self.job_watts += sign * budgets.extra_watts(cluster, config)
        per_gpu = budgets.extra_watts_per_gpu(cluster, config)
        for node, k in counts.items():
            rack = self.rack_of[node]
            self.rack_watts[rack] = self.rack_watts.get(rack, 0.0) + sign * per_gpu * k

    def fits(self, job: Job, config: Config, node: str) -> bool:
        """Whether one more slice of `config` on `node` keeps the budgets and quotas."""
        cluster = self.problem.cluster
        if self.quotas.active and not self.quotas.fits(job, config):
            return False
        if cluster.power_budget_watts is not None:
            drawn = budgets.floor_watts(cluster) + self.job_watts + config.watts
            if drawn > cluster.power_budget_watts:
                return False
        rack = self.rack_of[node]
        budget = cluster.rack_power_budgets_watts.get(rack)
        if budget is None:
            return True
        drawn = budgets.rack_floor_watts(cluster)[rack] + self.rack_watts.get(rack, 0.0)
        return drawn + config.watts <= budget

    def take_slice(
        self, name: str, config: Config, gpu: tuple[str, int], inst: MigInstance
    ) -> None:
        self._draw(config, {gpu[0]: 1}, 1.0)
        self.quotas.take(self.jobs[name], config)
        self.packed[name] = (config, gpu, MigInstance(inst.profile, inst.start))

    # ------------------------------------------------------------ gains

    def gain(self, job: Job, config: Config, gpu: MigGpu, inst: MigInstance, new: bool) -> float:
        """What running `job` so adds to the objective against leaving it queued: its value,
        the migration it avoids by staying, its GPU's idle power if it is the first job there,
        and a reconfiguration if it changes the GPU's layout first."""
        w = self.problem.weights
        best = self.configs.best_samples_per_second[job.name]
        value = running_gain(job, config, best, w, self.max_watts)  # a slice: its draw
        cur = job.current
        if (
            on_own(job, gpu, inst.profile)
            and cur is not None
            and cur.mig is not None
            and cur.mig.place == inst.place
        ):
            value += migration_cost(job, w)
        if not gpu.jobs():
            idle = self.problem.cluster.gpu_types[self.problem.cluster.node(gpu.node).gpu_type]
            value -= w.energy * idle.idle_watts / self.max_watts
        if new and not gpu.changed():
            value -= reconfiguration_cost(w)
        return value

    def _choose(
        self, job: Job, gpu: MigGpu, inst: MigInstance, new: bool
    ) -> tuple[float, Config] | None:
        """The job's configuration on the instance's profile at the GPU's clock (or its most
        valuable that the budgets allow, on a GPU without jobs), with its gain, if it gains
        and may use the node."""
        if not job.may_use(gpu.node):
            return None
        node = self.problem.cluster.node(gpu.node)
        profile = inst.profile
        best: tuple[float, Config] | None = None
        for c in self._on_profile(job, node.gpu_type, profile):
            if gpu.clock is not None and c.sm_clock_mhz != gpu.clock:
                continue
            if c.kept_only and not on_own(job, gpu, profile):
                continue
            if not self.fits(job, c, gpu.node):
                continue
            g = self.gain(job, c, gpu, inst, new)
            if best is None or g > best[0]:
                best = (g, c)
        return best if best is not None and best[0] > EPSILON else None

    def _on_profile(self, job: Job, gpu_type: str, profile: str) -> tuple[Config, ...]:
        """The job's slice configurations on one profile of a type (remembered)."""
        key = (job.name, gpu_type, profile)
        got = self._by_profile.get(key)
        if got is None:
            got = tuple(
                c
                for c in self.configs.slices.get(job.name, ())
                if c.mig_profile == profile and c.gpu_type == gpu_type
            )
            self._by_profile[key] = got
        return got

    # ------------------------------------------------------------ placing

    def _place(self, job: Job, gpu: MigGpu, config: Config, layout: list[MigInstance] | None,
               inst: MigInstance) -> None:  # fmt: skip
        if layout is not None:
            gpu.instances = layout
        placed = gpu.assign(job.name, inst.place)
        gpu.clock = config.sm_clock_mhz
        self.take_slice(job.name, config, gpu.key, placed)

    def _profiles(self, job: Job, gpu_type: str) -> list[str]:
        """The job's profiles on a type, smallest first (best fit; remembered)."""
        key = (job.name, gpu_type)
        got = self._profile_order.get(key)
        if got is not None:
            return got
        geometry = self.problem.cluster.mig[gpu_type]
        names = {
            c.mig_profile for c in self.configs.slices.get(job.name, ()) if c.gpu_type == gpu_type
        }
        sizes = {
            p: (geometry.profiles[p].compute_slices, geometry.profiles[p].memory_slices)
            for p in names
        }
        got = self._profile_order[key] = sorted(names, key=lambda p: (sizes[p], p))
        return got

    def _types(self, job: Job) -> list[str]:
        return sorted({c.gpu_type for c in self.configs.slices.get(job.name, ())})

    def try_own(self, job: Job) -> bool:
        """Back on the instance it runs on now, if the plan keeps it free."""
        cur = job.current
        if cur is None or cur.mig is None or len(cur.placement) != 1:
            return False
        s = cur.placement[0]
        gpu = self.gpus.get((s.node, s.gpu_indices[0])) if len(s.gpu_indices) == 1 else None
        if gpu is None or cur.mig.place not in {i.place for i in gpu.free_instances()}:
            return False
        own = MigInstance(*cur.mig.place)
        got = self._choose(job, gpu, own, False)
        if got is None:
            return False
        self._place(job, gpu, got[1], None, own)
        return True

    def try_existing(self, job: Job) -> bool:
        """On a free instance that exists: smallest profile, liked nodes, fullest GPU first."""
        liked = functools.partial(dislike_of, job.preference)
        for t in self._types(job):
            for profile in self._profiles(job, t):
                holding = [
                    g
                    for g in self._of_type(t)
                    if any(i.profile == profile for i in g.free_instances())
                ]
                gpus = sorted(
                    holding, key=lambda g: (liked(g.node), len(g.free_instances()), g.key)
                )
                for gpu in gpus:
                    inst = next(i for i in gpu.free_instances() if i.profile == profile)
                    got = self._choose(job, gpu, inst, False)
                    if got is None:
                        continue
                    self._place(job, gpu, got[1], None, inst)
                    return True
        return False

    def try_new(self, job: Job) -> bool:
        """On a new instance, liked nodes first: of a partitioned GPU (jobs there first), else of
        a spare GPU."""
        liked = functools.partial(dislike_of, job.preference)
        for t in self._types(job):
            for profile in self._profiles(job, t):
                for gpu in sorted(
                    self._of_type(t), key=lambda g: (liked(g.node), not g.jobs(), g.key)
                ):
                    if self._try_new_on(job, gpu, profile) is not None:
                        return True
                spare = self.spare.get(t, [])
                usable = ((k, node) for k, (node, _) in enumerate(spare) if job.may_use(node))
                k = least_disliked(job.preference, usable)
                if k is not None:
                    node, g = spare[k]
                    geometry = self.problem.cluster.mig[t]
                    gpu = MigGpu.of(node, g, self.rack_of[node], geometry, ())
                    if self._try_new_on(job, gpu, profile) is not None:
                        spare.pop(k)
                        self.gpus[gpu.key] = gpu
                        return True
        return False

    def _try_new_on(self, job: Job, gpu: MigGpu, profile: str) -> float | None:
        """The job on a new instance of `profile` on `gpu`; its gain, None if it does not go."""
        layout = gpu.new_layout(profile)
        if layout is None:
            return None
        got = self._choose(job, gpu, layout[1], True)
        if got is None:
            return None
        self._place(job, gpu, got[1], layout[0], layout[1])
        return got[0]

    def _of_type(self, gpu_type: str) -> Iterator[MigGpu]:
        return (g for g in self.gpus.values() if self.type_of[g.node] == gpu_type)

    # ------------------------------------------------------------ the passes

    def waiting(self) -> list[Job]:
        """Slice jobs the plan leaves queued, most valuable slice first."""
        out = []
        for job in self.by_value:
            a = self.assignments.get(job.name)
            if job.name in self.packed or (a is not None and a.state is JobState.RUNNING):
                continue
            out.append(job)
        return out

    def pack(self) -> None:
        """Every waiting slice job on the first place that takes it (module docstring), until
        `stop_at`: the jobs not reached stay queued."""
        for job in self.waiting():
            if self.stop_at is not None and time.monotonic() > self.stop_at:
                return
            _ = self.try_own(job) or self.try_existing(job) or self.try_new(job)

    def convert(self) -> None:
        """Whole GPUs of one-GPU slice jobs partitioned, each when its job and the waiting
        slice jobs on its new instances are worth more than the job alone (smallest gain
        first); a conversion that does not pay is undone."""
        cluster, w = self.problem.cluster, self.problem.weights
        candidates = []
        for a in self.assignments.values():
            job, c = self.jobs[a.job], a.config
            if a.state is not JobState.RUNNING or c is None or a.mig is not None:
                continue
            node = a.placement[0].node if len(a.placement) == 1 else ""
            geometry = cluster.mig.get(c.gpu_type)
            if c.num_gpus != 1 or not self.configs.slices.get(job.name) or geometry is None:
                continue
            if job.current is not None and not job.preemptible:
                continue
            best = self.configs.best_samples_per_second[job.name]
            held = running_gain(job, c, best, w, self.max_watts, self.configs.least_joules(a.job))
            if job.current is not None and not a.migrated:
                held += migration_cost(job, w)
            candidates.append((held, job.name, node, a.placement[0].gpu_indices[0], geometry))
        for held, name, node, g, geometry in sorted(candidates, key=lambda x: x[:4]):
            waiting = self.waiting()
            if not waiting or (self.stop_at is not None and time.monotonic() > self.stop_at):
                return
            others = [self.top[j.name] for j in waiting if j.name != name]
            most = self.top[name] + sum(others[: geometry.compute_slices - 1])
            if most <= held + EPSILON:  # cannot pay: no GPU holds more instances than SM slices
                continue
            self._convert(self.jobs[name], (node, g), held)

    def _convert(self, job: Job, key: tuple[str, int], held: float) -> None:
        a = self.assignments[job.name]
        assert a.config is not None
        saved = (dict(self.packed), self.job_watts, dict(self.rack_watts), dict(self.quotas.used))
        self._draw(a.config, {key[0]: 1}, -1.0)
        self.quotas.release(job, a.config)
        self.assignments[job.name] = queued_assignment(self.problem, self.configs, job)
        geometry = self.problem.cluster.mig[a.config.gpu_type]
        gpu = self.gpus[key] = MigGpu.of(key[0], key[1], self.rack_of[key[0]], geometry, ())
        gained = 0.0
        full: set[str] = set()
        """Profiles with no room left on the GPU: its layout only grows while it fills."""
        plannable = {p.name for p in geometry.plannable()}
        misses = 0
        for j in [job, *(x for x in self.waiting() if x.name != job.name)]:
            if plannable <= full or misses >= CONVERT_MISSES:
                break
            misses += 1
            for profile in self._profiles(j, a.config.gpu_type):
                if profile in full:
                    continue
                if gpu.new_layout(profile) is None:
                    full.add(profile)
                    continue
                got = self._try_new_on(j, gpu, profile)
                if got is not None:
                    gained += got
                    misses = 0
                    break
        if gained > held + EPSILON:
            return
        self.packed, self.job_watts, self.rack_watts, self.quotas.used = saved
        del self.gpus[key]
        self.assignments[job.name] = a

    def plan(self) -> Plan:
        """The whole-GPU plan with the packed slice jobs and the layout changes."""
        assignments = []
        for job in self.problem.jobs:
            got = self.packed.get(job.name)
            if got is None:
                assignments.append(self.assignments[job.name])
                continue
            config, (node, g), inst = got
            a = JobAssignment(job.name, JobState.RUNNING, config, (GpuSlice(node, (g,)),), mig=inst)
            if is_migrated(job, a):
                a = JobAssignment(a.job, a.state, a.config, a.placement, True, mig=inst)
            assignments.append(a)
        changes = tuple(sorted(
            [*self.merged, *(c for gpu in self.gpus.values() if (c := gpu.change()) is not None)],
            key=lambda c: (c.node, c.layout.gpu_index),
        ))  # fmt: skip
        best, least = self.configs.best_samples_per_second, self.configs.least_joules_per_sample
        objective = score_plan(self.problem, assignments, best, changes, least)
        return Plan(tuple(assignments), objective, changes)


def _best_slice_gains(problem: Problem, configs: ConfigSet, max_watts: float) -> dict[str, float]:
    """Each job with slice configurations: its best gain on a slice."""
    w = problem.weights
    out = {}
    for job in problem.jobs:
        options = configs.slices.get(job.name, ())
        if options:
            best = configs.best_samples_per_second[job.name]
            out[job.name] = max(running_gain(job, c, best, w, max_watts) for c in options)
    return out


def pack_slices(
    problem: Problem,
    configs: ConfigSet,
    base: Sequence[JobAssignment],
    kept: Kept,
    *,
    pack: bool = True,
    stop_at: float | None = None,
) -> Plan:
    """The whole-GPU plan `base` (every job of `problem` but the `kept` ones) with the kept slice
    jobs on their instances and, with `pack`, the waiting slice jobs packed (module docstring);
    no GPU is converted after `stop_at` (a time.monotonic() instant)."""
    packer = Packer(problem, configs, base, kept, stop_at)
    if pack:
        packer.pack()
        packer.convert()
        packer.pack()
    return packer.plan()
