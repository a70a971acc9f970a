"""Each GPU's MIG layout across rounds: what the snapshot reports, what a plan changes, when a
changed GPU is usable again, and an independent count of layouts that cannot exist.

A GPU starts whole. A plan's ``layout_changes`` give changed GPUs their whole new layout; the
engine applies them after the checker has accepted the plan. Creating and destroying GPU
instances needs the instances concerned idle (NVIDIA MIG user guide), and the new instances are
usable only once they exist and the device plugin advertises them: every job that starts on a
changed GPU (on a new instance, or whole on a GPU that was partitioned) waits
``reconfiguration_s`` first (``EngineSettings.reconfiguration_s``, an assumption: no public
figure was found). Jobs on instances the change keeps are not disturbed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert_mig import type_geometries
from solver.domain import Allocation
from solver.mig import LayoutChange, MigGeometry, MigInstance, layout_problems

Gpu = tuple[str, int]
"""(node, GPU index)."""
Place = tuple[str, int]
"""(profile, start) of an instance."""


class MigState:
    """The layouts of every GPU of a cluster (absent: whole)."""

    def __init__(
        self, cluster: pb.ClusterSnapshot, geometries: Mapping[str, MigGeometry] | None = None
    ) -> None:
        self._types = {n.name: n.gpu_type for n in cluster.nodes}
        self._geometries = (
            geometries if geometries is not None else type_geometries(cluster.gpu_types)
        )
        self.layouts: dict[Gpu, tuple[Place, ...]] = {}
        self.reconfigurations = 0
        """GPUs whose layout plans changed, over the run."""

    def fill(self, cluster: pb.ClusterSnapshot, running: Iterable[tuple[str, Allocation]]) -> None:
        """Report every partitioned GPU's layout in the snapshot, each instance with the job
        running on it now."""
        on: dict[tuple[str, int, Place], str] = {}
        for job, a in running:
            if a.mig is not None:
                gpu = _gpu_of(a)
                on[(gpu[0], gpu[1], a.mig.place)] = job
        for node in cluster.nodes:
            for (name, index), places in sorted(self.layouts.items()):
                if name != node.name or not places:
                    continue
                layout = node.mig_layouts.add(gpu_index=index)
                for profile, start in places:
                    layout.instances.add(
                        profile=profile,
                        start=start,
                        job=on.get((name, index, (profile, start)), ""),
                    )

    def apply(self, changes: Sequence[LayoutChange]) -> dict[Gpu, tuple[Place, ...]]:
        """Apply a checked plan's changes; the GPUs whose layout changed, with their layout
        before."""
        before: dict[Gpu, tuple[Place, ...]] = {}
        for change in changes:
            gpu = (change.node, change.layout.gpu_index)
            new = tuple(sorted(i.place for i in change.layout.instances))
            old = self.layouts.get(gpu, ())
            if new == old:
                continue
            before[gpu] = old
            if new:
                self.layouts[gpu] = new
            else:
                self.layouts.pop(gpu, None)
        self.reconfigurations += len(before)
        return before

    def waits(self, a: Allocation, changed: Mapping[Gpu, tuple[Place, ...]]) -> bool:
        """Whether a job starting on `a` waits for a reconfiguration of this round: its GPU
        changed and its instance is new, or it runs whole on a GPU that was partitioned."""
        for s in a.placement:
            for i in s.gpu_indices:
                old = changed.get((s.node, i))
                if old is None:
                    continue
                if a.mig is None or a.mig.place not in old:
                    return True
        return False

    def invalid(self, running: Iterable[tuple[str, Allocation]]) -> int:
        """GPUs whose layout cannot exist on their type (re-derived from the catalog), that
        carry two jobs on one instance or a job on an instance they do not have, or that are
        partitioned under a whole-GPU job; 0 in a sound run."""
        bad: set[Gpu] = set()
        for gpu, places in self.layouts.items():
            geometry = self._geometries.get(self._types.get(gpu[0], ""))
            instances = [MigInstance(p, s) for p, s in places]
            if geometry is None or layout_problems(geometry, instances):
                bad.add(gpu)
        taken: set[tuple[Gpu, Place]] = set()
        for _, a in running:
            if a.mig is None:
                bad.update(g for g in _gpus(a) if g in self.layouts)
                continue
            gpu = _gpu_of(a)
            key = (gpu, a.mig.place)
            if key in taken or a.mig.place not in self.layouts.get(gpu, ()):
                bad.add(gpu)
            taken.add(key)
        return len(bad)

    def partitioned_in_use(self, running: Iterable[tuple[str, Allocation]]) -> int:
        """Partitioned GPUs with at least one running instance."""
        return len({_gpu_of(a) for _, a in running if a.mig is not None})


def _gpus(a: Allocation) -> list[Gpu]:
    return [(s.node, i) for s in a.placement for i in s.gpu_indices]


def _gpu_of(a: Allocation) -> Gpu:
    gpus = _gpus(a)
    if len(gpus) != 1:
        raise ValueError(f"a job on a MIG instance holds one GPU, this one {len(gpus)}")
    return gpus[0]
