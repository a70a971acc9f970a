"""What every baseline policy needs: the round as domain data, the configuration a user would
pick, and the plan being built (free GPUs, predicted power, allocations).

Every baseline plans the whole cluster each round: it starts from all available GPUs, puts the
jobs it keeps on their current GPUs first and places the others with DSFRO's best-fit placement
(``solver.search.placement.Placer``: one node if any can hold the job, else the fewest nodes of
one rack). Predicted watts are one more resource: a job is admitted only if the plan's predicted
draw (running jobs' watts plus the idle watts of every other GPU, as ``check_power_budget``
counts it) stays within the cluster budget in force and each rack's budget. Tenant quotas are
one more (``solver.perfmodel.quotas.QuotaLedger``): a job that would take its queue above its
quota, or beyond what its cohort can lend it, is not admitted (Kueue would not admit it).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from solver.domain import (
    Allocation,
    Cluster,
    Config,
    GpuSlice,
    Job,
    Problem,
    Shape,
    ThroughputProfile,
)
from solver.perfmodel import budgets
from solver.perfmodel.configs import MAX_PIPELINE_PARALLEL, TypeFacts, resolve_config, type_facts
from solver.perfmodel.quotas import QuotaLedger
from solver.power_states import NodePowerState
from solver.search.placement import Placer
from solver.simulate.core import Decision, JobHistory, RoundInput

# ---------------------------------------------------------------- the round


@dataclass(frozen=True)
class RoundView:
    """One round as plain domain data: what every baseline reads."""

    problem: Problem
    facts: Mapping[str, TypeFacts]
    """Per GPU type with nodes: its datasheet, node sizes and offered clocks."""
    history: Mapping[str, JobHistory]
    now_s: float
    round_length_s: float

    @classmethod
    def of(cls, round_input: RoundInput) -> RoundView:
        problem = round_input.problem
        return cls(
            problem,
            type_facts(problem.cluster),
            round_input.history,
            round_input.now_s,
            round_input.round_length_s,
        )

    @property
    def cluster(self) -> Cluster:
        return self.problem.cluster

    @property
    def time_budget_s(self) -> float:
        return self.problem.options.time_budget_seconds

    def past(self, job: Job) -> JobHistory:
        """The job's history; a job the engine sent none for counts as just submitted."""
        h = self.history.get(job.name)
        return h if h is not None else JobHistory(self.now_s, job.min_gpus)

    def age_s(self, job: Job) -> float:
        """Seconds since the job was submitted."""
        return max(self.now_s - self.past(job).submit_time_s, 0.0)

    def types_for(self, job: Job) -> list[str]:
        """GPU types the job may use that have nodes, in cluster order."""
        return [t for t in self.facts if job.allows(t)]

    def available_gpus(self, gpu_type: str) -> int:
        return sum(n.available_gpus for n in self.cluster.nodes if n.gpu_type == gpu_type)

    def top_clock(self, gpu_type: str) -> int:
        return self.cluster.gpu_types[gpu_type].max_clock_mhz

    def clocks_below(self, gpu_type: str, clock: int) -> list[int]:
        """Supported clocks of the type lower than `clock`, highest first."""
        return sorted(
            (c for c in self.cluster.gpu_types[gpu_type].sm_clocks_mhz if c < clock), reverse=True
        )

    def config(self, job: Job, shape: Shape, clock: int) -> Config | None:
        """DSFRO's predicted configuration of (job, shape, clock); None where it can't run."""
        return resolve_config(self.problem, job, shape, clock, self.facts)


def submission_order(view: RoundView, jobs: Iterable[Job]) -> list[Job]:
    """Earliest submitted first (ties by name)."""
    return sorted(jobs, key=lambda j: (view.past(j).submit_time_s, j.name))


# ---------------------------------------------------------------- the user's configuration


def model_parallel_shapes(view: RoundView, job: Job, gpu_type: str, n: int) -> list[Shape]:
    """Shapes of n GPUs of a type, data parallel first, then the smallest model-parallel degree
    (tensor before pipeline at equal degree: tensor inside a node, then pipeline stages, as
    Megatron-LM users configure it). Profiles offer only their measured shapes."""
    facts = view.facts.get(gpu_type)
    if facts is None or n < 1:
        return []
    if isinstance(job.workload, ThroughputProfile):
        found = {
            Shape(
                gpu_type,
                n // (p.tensor_parallel * p.pipeline_parallel),
                p.tensor_parallel,
                p.pipeline_parallel,
            )
            for p in job.workload.points
            if p.gpu_type == gpu_type and p.num_gpus == n
        }
        shapes = list(found)
    else:
        shapes = [
            Shape(gpu_type, n // (tp * pp), tp, pp)
            for tp in range(1, min(n, facts.gpus_per_node) + 1)
            if n % tp == 0
            for pp in range(1, min(n // tp, MAX_PIPELINE_PARALLEL) + 1)
            if (n // tp) % pp == 0
        ]
    return sorted(
        shapes, key=lambda s: (s.tensor_parallel * s.pipeline_parallel, s.pipeline_parallel)
    )


def usable(job: Job, c: Config | None) -> bool:
    """A configuration the job can start in: over the memory model's limit only in the shape
    it runs in now (``kept_only``, valid where it stays)."""
    if c is None:
        return False
    return not c.kept_only or (job.current is not None and c.shape == job.current.shape)


def user_config(
    view: RoundView, job: Job, gpu_type: str, n: int, clock: int | None = None
) -> Config | None:
    """What a user asks for: n GPUs, data parallel unless the model does not fit one GPU, then
    the smallest model-parallel degree that fits; the top clock unless told."""
    clock = view.top_clock(gpu_type) if clock is None else clock
    for shape in model_parallel_shapes(view, job, gpu_type, n):
        c = view.config(job, shape, clock)
        if usable(job, c):
            return c
    return None


def fastest_config(
    view: RoundView, job: Job, gpu_type: str, n: int, clock: int | None = None
) -> Config | None:
    """The fastest predicted shape of n GPUs of the type (best tensor/pipeline split)."""
    clock = view.top_clock(gpu_type) if clock is None else clock
    fitting = [view.config(job, s, clock) for s in model_parallel_shapes(view, job, gpu_type, n)]
    found = [c for c in fitting if c is not None and usable(job, c)]
    return max(found, key=lambda c: c.samples_per_second, default=None)


def rigid_count(view: RoundView, job: Job) -> int:
    """The GPUs a rigid policy gives the job: its requested count within [min, max]; where no
    allowed type can run that count (a profile measured at other counts), the nearest count
    some type can run (fewer GPUs first), as a user would resubmit it."""
    want = min(max(view.past(job).requested_gpus, job.min_gpus), job.max_gpus)
    types = view.types_for(job)
    ordered = sorted(range(job.min_gpus, job.max_gpus + 1), key=lambda n: (abs(n - want), n))
    for n in ordered:
        if any(user_config(view, job, t, n) is not None for t in types):
            return n
    return want


def fastest_first(view: RoundView, job: Job, n: int) -> list[Config]:
    """The user's configuration of n GPUs on each allowed type, fastest predicted first (a
    user picks the fastest type that is free); ties in cluster order."""
    out = [c for t in view.types_for(job) if (c := user_config(view, job, t, n)) is not None]
    return sorted(out, key=lambda c: -c.samples_per_second)


# ---------------------------------------------------------------- power


class PowerLedger:
    """The plan's predicted draw, cluster-wide and per rack, as the checker counts it: every
    node draws its floor (up: base power and idle GPUs; suspended: the policy's draw) until a
    job takes its GPUs, which then draw the configuration's watts instead, and a suspended node
    a job is placed on is woken, its floor up (solver.perfmodel.budgets)."""

    def __init__(self, cluster: Cluster) -> None:
        self.budget = cluster.power_budget_watts
        self.rack_budgets = dict(cluster.rack_power_budgets_watts)
        self._idle = {n.name: cluster.gpu_types[n.gpu_type].idle_watts for n in cluster.nodes}
        self._rack = {n.name: n.rack for n in cluster.nodes}
        self._wake = {
            n.name: budgets.resume_watts(cluster, n)
            for n in cluster.nodes
            if n.power.state is NodePowerState.SUSPENDED
        }
        self.rack_watts: dict[str, float] = {}
        for n in cluster.nodes:
            floor = budgets.node_floor_watts(cluster, n)
            self.rack_watts[n.rack] = self.rack_watts.get(n.rack, 0.0) + floor
        self.watts = sum(self.rack_watts.values())

    def _deltas(self, c: Config, slices: Sequence[GpuSlice]) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in slices:
            rack = self._rack[s.node]
            # An instance's watts are above its GPU's idle power, which the floor keeps.
            extra = c.watts if c.mig_profile else c.watts / c.num_gpus - self._idle[s.node]
            delta = len(s.gpu_indices) * extra
            out[rack] = out.get(rack, 0.0) + delta + self._wake.get(s.node, 0.0)
        return out

    def fits(self, c: Config, slices: Sequence[GpuSlice]) -> bool:
        deltas = self._deltas(c, slices)
        if self.budget is not None and self.watts + sum(deltas.values()) > self.budget:
            return False
        return all(
            self.rack_watts[r] + d <= self.rack_budgets[r]
            for r, d in deltas.items()
            if r in self.rack_budgets
        )

    def add(self, c: Config, slices: Sequence[GpuSlice]) -> None:
        for r, d in self._deltas(c, slices).items():
            self.rack_watts[r] += d
            self.watts += d
        for s in slices:  # woken once
            self._wake.pop(s.node, None)


# ---------------------------------------------------------------- the plan


class Planner:
    """The plan being built: free GPUs (available ones not yet given), the power ledger, the
    queues' quota usage and the allocations made so far."""

    def __init__(self, view: RoundView) -> None:
        self.view = view
        cluster = view.cluster
        self.free: dict[str, list[int]] = {
            n.name: list(n.available_gpu_indices) for n in cluster.nodes
        }
        self.placer = Placer(cluster)
        self.power = PowerLedger(cluster)
        self.quotas = QuotaLedger(cluster)
        self.configs: dict[str, Config] = {}
        self.allocations: dict[str, Allocation] = {}

    def __contains__(self, job: str) -> bool:
        return job in self.allocations

    def stay(self, job: Job, c: Config) -> bool:
        """Run the job in c on exactly its current GPUs, if they are free, hold whole tensor
        groups and the power allows."""
        cur = job.current
        if job.name in self or cur is None or not usable(job, c):
            return False
        if cur.shape.gpu_type != c.gpu_type or cur.shape.num_gpus != c.num_gpus:
            return False
        for s in cur.placement:
            free = self.free.get(s.node)
            if free is None or len(s.gpu_indices) % c.tensor_parallel:
                return False
            if any(i not in free for i in s.gpu_indices):
                return False
        return self._commit(job, c, cur.placement)

    def place(self, job: Job, c: Config) -> bool:
        """Run the job in c on GPUs chosen best-fit off its barred nodes (its own GPUs first
        on a node it stays on), if some fit and the power allows."""
        if job.name in self or not usable(job, c) or c.kept_only:
            return False
        counts = self.placer.place(
            c.gpu_type, c.num_gpus, c.tensor_parallel, barred=job.barred_nodes
        )
        if counts is None:
            return False
        mine = {
            (s.node, i)
            for s in (job.current.placement if job.current else ())
            for i in s.gpu_indices
        }
        slices = []
        for node, k in sorted(counts.items()):
            free = self.free[node]
            picked = sorted(sorted(free, key=lambda i: (node, i) not in mine)[:k])
            slices.append(GpuSlice(node, tuple(picked)))
        return self._commit(job, c, tuple(slices))

    def admit(self, job: Job, c: Config) -> bool:
        """Stay on the current GPUs where the configuration allows, else place."""
        return self.stay(job, c) or self.place(job, c)

    def quota_fits(self, job: Job, c: Config) -> bool:
        """Whether the job's queue (and its cohort) can take c on top of the plan so far."""
        return self.quotas.fits(job, c)

    def _commit(self, job: Job, c: Config, slices: tuple[GpuSlice, ...]) -> bool:
        if not self.fits(job, c, slices):
            return False
        self.force(job, c, slices)
        return True

    def fits(self, job: Job, c: Config, slices: Sequence[GpuSlice]) -> bool:
        """Whether the job's queue and the power budgets take c on `slices` on top of the plan."""
        return self.quotas.fits(job, c) and self.power.fits(c, slices)

    def charge(self, job: Job, c: Config, slices: Sequence[GpuSlice]) -> None:
        """Count c's power and quota in the plan, its GPUs aside (a MIG instance's GPU is not
        one of the free whole GPUs)."""
        self.power.add(c, slices)
        self.quotas.take(job, c)

    def force(self, job: Job, c: Config, slices: tuple[GpuSlice, ...]) -> None:
        """Record the allocation without asking the power budget or the quotas (non-preemptible
        jobs)."""
        for s in slices:
            for i in s.gpu_indices:
                self.free[s.node].remove(i)
        self.placer.take({s.node: len(s.gpu_indices) for s in slices})
        self.charge(job, c, slices)
        self.configs[job.name] = c
        self.allocations[job.name] = Allocation(c.shape, c.sm_clock_mhz, slices)

    def decision(self, started: float, detail: str) -> Decision:
        """The plan as the policy's decision; `started` is its time.perf_counter() start."""
        return Decision(dict(self.allocations), time.perf_counter() - started, detail)


def fits_idle_cluster(view: RoundView, c: Config) -> bool:
    """Whether c could run at all this round: on the otherwise idle cluster, within the
    cluster budget (its GPUs exist, or resolve_config would have returned None)."""
    budget = view.cluster.power_budget_watts
    if budget is None:
        return True
    ledger = PowerLedger(view.cluster)
    idle = view.cluster.gpu_types[c.gpu_type].idle_watts
    return ledger.watts + c.watts - c.num_gpus * idle <= budget


def keep_running(planner: Planner, job: Job, clocks: Sequence[int]) -> bool:
    """Keep a running job in its current shape and GPUs at the first of `clocks` whose
    predicted power fits."""
    cur = job.current
    assert cur is not None
    for clock in clocks:
        c = planner.view.config(job, cur.shape, clock)
        if c is not None and planner.stay(job, c):
            return True
    return False


def pin_non_preemptible(planner: Planner) -> None:
    """Keep every running non-preemptible job where it is (the checker forbids stopping or
    moving it), at its clock or, when the budget in force is below what they draw, at the
    highest lower clock that fits. If even the lowest clock does not fit, no plan can meet the
    budget: the job is kept anyway and the checker reports it."""
    view = planner.view
    for job in submission_order(view, (j for j in view.problem.jobs if j.current is not None)):
        if job.preemptible:
            continue
        cur = job.current
        assert cur is not None
        clocks = [cur.sm_clock_mhz, *view.clocks_below(cur.shape.gpu_type, cur.sm_clock_mhz)]
        if not keep_running(planner, job, clocks):
            c = view.config(job, cur.shape, clocks[-1])
            if c is not None:
                planner.force(job, c, cur.placement)


@dataclass(frozen=True)
class Candidate:
    """A job offered for admission with its configurations, most preferred first."""

    job: Job
    options: tuple[Config, ...]


def admit_in_order(view: RoundView, ordered: Sequence[Candidate]) -> Planner:
    """Priority admission for the preemptive policies.

    Non-preemptible running jobs are pinned first. Then each candidate, in order, takes its
    first option whose GPUs and power fit (a job offered twice is admitted once). The chosen set
    is then placed again, jobs that can stay on their current GPUs first, so that a
    higher-priority newcomer does not push a running job off GPUs it could keep; a job that no
    longer fits then (fragmentation, rack budgets) tries its other options, else waits.
    """
    first = Planner(view)
    pin_non_preemptible(first)
    chosen: dict[str, Candidate] = {}
    for cand in ordered:
        if cand.job.name in first:
            continue
        for c in cand.options:
            if first.admit(cand.job, c):
                chosen[cand.job.name] = Candidate(
                    cand.job, (c, *(o for o in cand.options if o != c))
                )
                break
    final = Planner(view)
    pin_non_preemptible(final)
    for cand in chosen.values():
        final.stay(cand.job, cand.options[0])
    for cand in chosen.values():
        if cand.job.name not in final:
            any(final.place(cand.job, c) for c in cand.options)
    return final
