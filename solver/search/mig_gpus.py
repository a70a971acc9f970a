"""One GPU's MIG layout while slice jobs are packed onto it (solver.search.slices).

A `MigGpu` holds the layout the plan gives the GPU so far: its instances, each with the job the
plan puts on it ("" = free), the GPU's one SM clock once a job runs on it, and the layout it has
in the snapshot. New instances go where the catalog geometry allows (``solver.mig``): free
instances the plan does not use may be dropped to make room, instances with a job never.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from solver.domain import Cluster, Job
from solver.mig import GpuLayout, LayoutChange, MigGeometry, MigInstance, layout_problems


@dataclass
class MigGpu:
    """A GPU that holds or may hold MIG instances in the plan."""

    node: str
    index: int
    rack: str
    geometry: MigGeometry
    current: tuple[MigInstance, ...]
    """Its layout in the snapshot (empty: whole)."""
    instances: list[MigInstance] = field(default_factory=list)
    """Its layout after the plan so far; `job` is the plan's job on each ("" = free)."""
    clock: int | None = None
    """The SM clock of every instance's job (None: no job on it yet)."""

    @classmethod
    def of(
        cls, node: str, index: int, rack: str, geometry: MigGeometry, current: Sequence[MigInstance]
    ) -> MigGpu:
        """The GPU as the snapshot has it, every instance free for the plan."""
        now = tuple(current)
        free = [MigInstance(i.profile, i.start) for i in now]
        return cls(node, index, rack, geometry, now, free)

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.index)

    @property
    def whole(self) -> bool:
        """Whole in the snapshot."""
        return not self.current

    def free_instances(self) -> list[MigInstance]:
        return [i for i in self.instances if not i.job]

    def jobs(self) -> list[str]:
        return [i.job for i in self.instances if i.job]

    def assign(self, job: str, place: tuple[str, int]) -> MigInstance:
        """Put `job` on the free instance at `place`."""
        for k, inst in enumerate(self.instances):
            if inst.place == place and not inst.job:
                self.instances[k] = MigInstance(inst.profile, inst.start, job)
                return self.instances[k]
        raise ValueError(f"no free instance {place} on GPU {self.node}/{self.index}")

    def new_layout(self, profile: str) -> tuple[list[MigInstance], MigInstance] | None:
        """The layout with a new free instance of `profile`, and that instance: instances
        with jobs stay, free ones stay where they leave room for it. Of the valid starts, the
        one that drops the fewest free instances, then leaves the most places for later
        instances (a 3g.40gb goes to 4, leaving 4g.40gb@0), then the lowest."""
        busy = {i.place: i for i in self.instances if i.job}
        free = tuple(i.place for i in self.instances if not i.job)
        got = _best_layout(self.geometry, tuple(sorted(busy)), free, profile)
        if got is None:
            return None
        places, new = got
        layout = [busy.get(x) or MigInstance(*x) for x in places]
        return layout, MigInstance(*new)

    def changed(self) -> bool:
        """Whether the plan changes its layout (which instances exist, not who runs on them)."""
        return {i.place for i in self.instances} != {i.place for i in self.current}

    def change(self) -> LayoutChange | None:
        """Its layout change (instances without jobs), or None when it keeps its layout."""
        if not self.changed():
            return None
        layout = tuple(
            MigInstance(i.profile, i.start)
            for i in sorted(self.instances, key=lambda i: (i.start, i.profile))
        )
        return LayoutChange(self.node, GpuLayout(self.index, layout))


Place = tuple[str, int]


def cluster_mig_gpus(
    cluster: Cluster, used: Collection[Place]
) -> tuple[dict[Place, MigGpu], dict[str, list[Place]], list[LayoutChange]]:
    """The GPUs a packing may put instances on, given the GPUs (node, index) a whole-GPU plan
    `used`: each partitioned GPU it does not use, by place; per MIG type, the whole GPUs it
    does not use, nodes with the fewest such GPUs first (fuller nodes stay whole for large
    jobs); and the change back to whole of each partitioned GPU it uses."""
    gpus: dict[Place, MigGpu] = {}
    merged: list[LayoutChange] = []
    by_type: dict[str, list[tuple[int, list[Place]]]] = {}
    for n in cluster.nodes:
        layouts = {x.gpu_index: x for x in n.mig_layouts if x.instances}
        merged += [LayoutChange(n.name, GpuLayout(g)) for g in layouts if (n.name, g) in used]
        geometry = cluster.mig.get(n.gpu_type)
        if geometry is None:
            continue
        spare = []
        for g in n.available_gpu_indices:
            if (n.name, g) in used:
                continue
            if g in layouts:
                gpus[n.name, g] = MigGpu.of(n.name, g, n.rack, geometry, layouts[g].instances)
            else:
                spare.append((n.name, g))
        by_type.setdefault(n.gpu_type, []).append((len(spare), spare))
    spare_by_type = {
        t: [g for _, gs in sorted(nodes, key=lambda x: x[0]) for g in gs]
        for t, nodes in by_type.items()
    }
    return gpus, spare_by_type, merged


def _best_layout(
    geometry: MigGeometry, busy: tuple[Place, ...], free: tuple[Place, ...], profile: str
) -> tuple[tuple[Place, ...], Place] | None:
    """`MigGpu.new_layout` by places (its layout sorted by start, and the new instance's
    place), remembered per geometry: the same layouts recur on GPU after GPU."""
    memo: dict[tuple[object, ...], tuple[tuple[Place, ...], Place] | None] | None
    memo = geometry.__dict__.get("_new_layouts")
    if memo is None:
        memo = {}
        object.__setattr__(geometry, "_new_layouts", memo)
    key = (busy, free, profile)
    if key not in memo:
        memo[key] = _search_layout(geometry, busy, free, profile)
    return memo[key]


def _search_layout(
    geometry: MigGeometry, busy: tuple[Place, ...], free: tuple[Place, ...], profile: str
) -> tuple[tuple[Place, ...], Place] | None:
    p = geometry.profiles.get(profile)
    if p is None:
        return None
    fixed = [MigInstance(*x) for x in busy]
    best: tuple[tuple[int, int, int], list[MigInstance], MigInstance] | None = None
    for start in p.starts:
        new = MigInstance(profile, start)
        layout = [*fixed, new]
        if layout_problems(geometry, layout):
            continue
        dropped = 0
        for inst in (MigInstance(*x) for x in free):
            if layout_problems(geometry, [*layout, inst]):
                dropped += 1
            else:
                layout.append(inst)
        score = (dropped, -_room(geometry, layout), start)
        if best is None or score < best[0]:
            best = (score, sorted(layout, key=lambda i: (i.start, i.profile)), new)
    if best is None:
        return None
    return tuple(i.place for i in best[1]), best[2].place


def _room(geometry: MigGeometry, layout: Sequence[MigInstance]) -> int:
    """How many single instances (plannable profile and start) could still be added."""
    return sum(
        1
        for p in geometry.plannable()
        for s in p.starts
        if not layout_problems(geometry, [*layout, MigInstance(p.name, s)])
    )


def on_own(job: Job, gpu: MigGpu, profile: str) -> bool:
    """Whether `gpu` is the one GPU of the job's current instance, of `profile`."""
    cur = job.current
    return (
        cur is not None
        and cur.mig is not None
        and cur.mig.profile == profile
        and [(s.node, i) for s in cur.placement for i in s.gpu_indices] == [gpu.key]
    )
