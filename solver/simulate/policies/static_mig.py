"""Static MIG partitioning, as operators run MIG today: a fixed share of the nodes is
partitioned once and never reconfigured; small jobs take free instances, large jobs whole GPUs.

- **Partitioned nodes**: ``share`` of the nodes of GPU types with a MIG geometry (rounded to
  the nearest; default half, a choice), taken from the types in turn (by type name, each type's
  nodes by name: a cluster of one node per type keeps whole GPUs), every GPU in NVIDIA's
  ``all-balanced`` layout (the NVIDIA GPU operator's default mig-parted ConfigMap,
  ``default-mig-parted-config``: two 1g, one 2g and one 3g instance, e.g. A100-80GB and
  H100-80GB 2 x 1g.10gb, 2g.20gb, 3g.40gb), placed at the first valid starts the catalog
  gives. They are partitioned in the first round in which they are idle (at once: nothing runs
  yet) and never again.
- **Small jobs** (those that allow slices), in submission order: a running one keeps its
  instance; a waiting one takes the smallest free instance its memory fits (the performance
  model's slice configuration at the top clock), else waits; no head-of-line blocking between
  instance sizes. Only instances: a small job asks for ``nvidia.com/mig-<profile>``, not a GPU.
- **Large jobs**: ``fifo``'s rules on the GPUs left whole.

Every job sees the same predictions as DSFRO (the round's problem). Instances are admitted as
whole GPUs are (``common.Planner``): a job starts only within the cluster and rack power budgets
and its tenant queue's quota; the small jobs running on instances are counted first, then
FIFO's whole-GPU plan, then the waiting small jobs (before, instances were admitted on their
own, and a cluster with tenant queues got plans over its cohort's quota).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import replace

from solver.domain import Allocation, GpuSlice, Job, Node, Problem
from solver.mig import GpuLayout, LayoutChange, MigGeometry, MigInstance, valid_layouts
from solver.perfmodel.configs import TypeFacts, type_facts
from solver.perfmodel.mig_catalog import geometry_for
from solver.simulate.core import Decision, RoundInput
from solver.simulate.policies.common import Planner, RoundView
from solver.simulate.policies.fifo import FifoPolicy
from solver.simulate.slicing import instance_configs

BALANCED = (1, 1, 2, 3)
"""SM slices of the ``all-balanced`` instances: 1g x 2, 2g x 1, 3g x 1."""
STATIC_SHARE = 0.5
"""Share of each MIG-capable type's nodes partitioned (a choice of the baseline)."""


def balanced_layout(geometry: MigGeometry) -> tuple[MigInstance, ...]:
    """The ``all-balanced`` layout: two 1g, one 2g, one 3g instance of the smallest memory each
    (1g.10gb, not 1g.20gb), at the first valid starts (catalog order)."""
    smallest: dict[int, str] = {}
    for p in geometry.plannable():  # smallest first
        smallest.setdefault(p.compute_slices, p.name)
    wanted = sorted(smallest[c] for c in BALANCED)
    chosen = [geometry.profiles[n] for n in sorted(set(wanted))]
    for layout in valid_layouts(geometry, chosen):
        if sorted(i.profile for i in layout) == wanted:
            return layout
    raise ValueError(f"{geometry.gpu_type}: no valid all-balanced layout")


class StaticMigPolicy:
    """A fixed share of the nodes partitioned once; small jobs on instances, large on FIFO."""

    name = "static-mig"

    def __init__(self, share: float = STATIC_SHARE) -> None:
        if not 0 <= share <= 1:
            raise ValueError(f"share must be in [0, 1], got {share}")
        self.share = share
        self._fifo = FifoPolicy()

    def targets(self, problem: Problem) -> dict[str, tuple[MigInstance, ...]]:
        """Partitioned nodes and the layout of each of their GPUs. The geometries are the
        round's problem's where it has them, else the catalog's (by name, or by family and
        memory): the problem has them only while a layout exists or a job may take a slice,
        and read from it alone, the first rounds of a trace whose first small job comes later
        had no target, FIFO put large jobs on the nodes to be partitioned, and a
        non-preemptible one there could not be pinned once the targets appeared."""
        mig = {
            name: g
            for name, t in problem.cluster.gpu_types.items()
            if (g := problem.cluster.mig.get(name) or geometry_for(name, t.memory_gib))
        }
        by_type = {
            t: sorted(n.name for n in problem.cluster.nodes if n.gpu_type == t) for t in sorted(mig)
        }
        count = math.floor(self.share * sum(len(nodes) for nodes in by_type.values()) + 0.5)
        out: dict[str, tuple[MigInstance, ...]] = {}
        for rank in range(max((len(nodes) for nodes in by_type.values()), default=0)):
            for gpu_type, nodes in by_type.items():
                if rank < len(nodes) and len(out) < count:
                    out[nodes[rank]] = balanced_layout(mig[gpu_type])
        return out

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        problem = round_input.problem
        targets = self.targets(problem)
        changes = _changes(problem, targets)
        small = [j for j in problem.jobs if j.slices is not None]
        large = tuple(j for j in problem.jobs if j.slices is None)
        whole = replace(
            problem,
            jobs=large,
            cluster=replace(
                problem.cluster,
                nodes=tuple(_without(n, n.name in targets) for n in problem.cluster.nodes),
            ),
        )
        planner = Planner(RoundView.of(replace(round_input, problem=whole)))
        facts = type_facts(problem.cluster)
        kept = self._keep_instances(planner, problem, small, facts)
        self._fifo.fill(planner)
        allocations = dict(planner.allocations)
        placed = self._instances(round_input, problem, small, targets, changes, planner, facts)
        allocations.update(kept)
        allocations.update(placed)
        detail = f"{len(planner.allocations)} whole, {len(kept) + len(placed)} on instances"
        return Decision(allocations, time.perf_counter() - started, detail, tuple(changes))

    @staticmethod
    def _keep_instances(
        planner: Planner, problem: Problem, small: list[Job], facts: Mapping[str, TypeFacts]
    ) -> dict[str, Allocation]:
        """The small jobs running on instances keep them, their power and quota counted first
        (a non-preemptible one whatever the budgets); one the budgets no longer allow stops."""
        out: dict[str, Allocation] = {}
        for job in small:
            cur = job.current
            if cur is None or cur.mig is None:
                continue
            gpu = cur.shape.gpu_type
            fits = instance_configs(job, facts, problem.cluster.mig)
            c = fits.get((gpu, cur.mig.profile, cur.sm_clock_mhz))
            if c is None:  # its clock not offered: count the profile's top clock
                c = fits.get((gpu, cur.mig.profile, facts[gpu].gpu.max_clock_mhz))
            if c is None:
                if not job.preemptible:
                    out[job.name] = cur
                continue
            if not job.preemptible or planner.fits(job, c, cur.placement):
                planner.charge(job, c, cur.placement)
                out[job.name] = cur
        return out

    def _instances(
        self,
        round_input: RoundInput,
        problem: Problem,
        small: list[Job],
        targets: dict[str, tuple[MigInstance, ...]],
        changes: list[LayoutChange],
        planner: Planner,
        facts: Mapping[str, TypeFacts],
    ) -> dict[str, Allocation]:
        """Waiting small jobs on free instances, in submission order: each takes the smallest
        instance that fits it, within the power budgets and its queue's quota."""
        new = {(c.node, c.layout.gpu_index) for c in changes}
        free: list[tuple[str, int, MigInstance]] = []
        for node in problem.cluster.nodes:
            if node.name not in targets:
                continue
            existing = {x.gpu_index: x for x in node.mig_layouts}
            for i in node.available_gpu_indices:
                if (node.name, i) in new:
                    free += [(node.name, i, m) for m in targets[node.name]]
                elif i in existing:
                    free += [(node.name, i, m) for m in existing[i].instances if not m.job]
        out: dict[str, Allocation] = {}
        order = sorted(small, key=lambda j: (round_input.history[j.name].submit_time_s, j.name))
        for job in order:
            cur = job.current
            if cur is not None and cur.mig is not None:
                continue  # kept or stopped by _keep_instances
            fits = instance_configs(job, facts, problem.cluster.mig)
            best = None
            for k, (node_name, i, m) in enumerate(free):
                if not job.may_use(node_name):
                    continue
                gpu = problem.cluster.node(node_name).gpu_type
                c = fits.get((gpu, m.profile, facts[gpu].gpu.max_clock_mhz))
                if c is None:
                    continue
                geometry = problem.cluster.mig[gpu]
                size = (geometry.profiles[m.profile].compute_slices, m.profile, node_name, i)
                if best is None or size < best[0]:
                    best = (size, k, c)
            if best is None:
                continue
            _, k, c = best
            node_name, i, m = free[k]
            on = (GpuSlice(node_name, (i,)),)
            if not planner.fits(job, c, on):
                continue
            planner.charge(job, c, on)
            free.pop(k)
            out[job.name] = Allocation(
                c.shape,
                c.sm_clock_mhz,
                (GpuSlice(node_name, (i,)),),
                MigInstance(m.profile, m.start),
            )
        return out

    def close(self) -> None:
        """Nothing to release."""


def _changes(problem: Problem, targets: dict[str, tuple[MigInstance, ...]]) -> list[LayoutChange]:
    """The target GPUs not yet partitioned, idle and available: partition them now (once the
    round's problem has their type's geometry: a snapshot without a layout or a slice job has
    none, and a plan for it may not change layouts; its target GPUs stay idle)."""
    out = []
    for node in problem.cluster.nodes:
        layout = targets.get(node.name)
        if layout is None or node.gpu_type not in problem.cluster.mig:
            continue
        existing = {x.gpu_index for x in node.mig_layouts if x.instances}
        busy = {
            i
            for j in problem.jobs
            if j.current is not None
            for s in j.current.placement
            if s.node == node.name
            for i in s.gpu_indices
        }
        for i in node.available_gpu_indices:
            if i not in existing and i not in busy:
                out.append(LayoutChange(node.name, GpuLayout(i, layout)))
    return out


def _without(node: Node, partitioned: bool) -> Node:
    """The node as FIFO sees it: its GPUs unavailable where it is partitioned."""
    if not partitioned:
        return node
    return replace(node, unavailable_gpu_indices=frozenset(range(node.gpu_count)))
