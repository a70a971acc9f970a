"""MIG partitions as plain data: a GPU type's profiles, a GPU's layout, a job's slice request.

A GPU in MIG mode is cut into GPU instances; each instance has a profile (NVIDIA's name, e.g.
``1g.10gb``: 1 of 7 SM slices, 10 GB) and a start (the first of the consecutive memory slices
it takes, the placement index of ``nvidia-smi mig -lgipp``). The geometry of each GPU type
is the snapshot's (``GpuType.mig``) or ``models/mig_profiles.json``'s
(``solver.perfmodel.mig_catalog``). Which layouts can exist follows from it alone
(``layout_problems``, ``valid_layouts``): no rule is hard-coded here.

Names for schedulers: a profile is the Kubernetes extended resource ``nvidia.com/mig-<profile>``
(the NVIDIA device plugin's mixed strategy) and the Slurm GRES ``gpu:<profile>`` (GRES name
``gpu``, type the profile name, as Slurm's NVML autodetection names MIG devices).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

K8S_RESOURCE_PREFIX = "nvidia.com/mig-"
SLURM_GRES_PREFIX = "gpu:"


def k8s_resource(profile: str) -> str:
    """The Kubernetes resource name of a profile: ``nvidia.com/mig-1g.10gb``."""
    return K8S_RESOURCE_PREFIX + profile


def slurm_gres(profile: str) -> str:
    """The Slurm GRES of a profile (name:type): ``gpu:1g.10gb``."""
    return SLURM_GRES_PREFIX + profile


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile of a GPU type (a row of the MIG user guide's tables)."""

    name: str
    compute_slices: int
    memory_slices: int
    memory_gib: float
    max_count: int
    starts: tuple[int, ...]
    """Valid first memory slices."""
    media_extensions: bool = False

    def memory_range(self, start: int) -> range:
        return range(start, start + self.memory_slices)


@dataclass(frozen=True)
class MigGeometry:
    """How a GPU type partitions: its SM and memory slices and its profiles by name."""

    gpu_type: str
    compute_slices: int
    memory_slices: int
    profiles: Mapping[str, MigProfile]

    def compute_share(self, profile: str) -> float:
        """The profile's share of the GPU's SM slices."""
        return self.profiles[profile].compute_slices / self.compute_slices

    def memory_share(self, profile: str) -> float:
        """The profile's share of the GPU's memory slices."""
        return self.profiles[profile].memory_slices / self.memory_slices

    def plannable(self) -> tuple[MigProfile, ...]:
        """Profiles a plan may create for a job: without media extensions, smallest first."""
        return tuple(
            sorted(
                (p for p in self.profiles.values() if not p.media_extensions),
                key=lambda p: (p.compute_slices, p.memory_slices, p.name),
            )
        )


@dataclass(frozen=True)
class MigInstance:
    """A GPU instance on a GPU: its profile, its start, and the job on it ("" = free)."""

    profile: str
    start: int
    job: str = ""

    @property
    def place(self) -> tuple[str, int]:
        """What identifies the instance on its GPU, whoever runs on it."""
        return (self.profile, self.start)


@dataclass(frozen=True)
class GpuLayout:
    """One GPU's MIG layout; no instances: MIG off, the GPU whole."""

    gpu_index: int
    instances: tuple[MigInstance, ...] = ()

    @property
    def whole(self) -> bool:
        return not self.instances

    def places(self) -> frozenset[tuple[str, int]]:
        return frozenset(i.place for i in self.instances)


@dataclass(frozen=True)
class LayoutChange:
    """A plan's new layout for one GPU of a node (its instances carry no jobs)."""

    node: str
    layout: GpuLayout


@dataclass(frozen=True)
class SliceRequest:
    """A job's consent to run on a MIG instance instead of whole GPUs.

    Empty bounds: any plannable profile. Bounds name profiles of the GPU type they are used
    on; a bound unknown to a type does not limit that type (validation rejects a bound no
    type of the snapshot knows)."""

    smallest_profile: str = ""
    largest_profile: str = ""

    def allows(self, geometry: MigGeometry, profile: str) -> bool:
        p = geometry.profiles.get(profile)
        if p is None or p.media_extensions:
            return False
        low = geometry.profiles.get(self.smallest_profile)
        high = geometry.profiles.get(self.largest_profile)
        if low is not None and (p.compute_slices, p.memory_slices) < (
            low.compute_slices,
            low.memory_slices,
        ):
            return False
        return high is None or (p.compute_slices, p.memory_slices) <= (
            high.compute_slices,
            high.memory_slices,
        )


def profile_problems(
    p: MigProfile, compute_slices: int, memory_slices: int
) -> list[tuple[str, str]]:
    """Why a profile cannot belong to a GPU of these slices, as (field, reason); [] when it can.

    One rule set for the catalog (``solver.perfmodel.mig_catalog``) and for a geometry a
    snapshot brings (``GpuType.mig``): positive sizes and count, within the GPU's slices, at
    least one start and every start leaving room for the profile's memory slices."""
    out: list[tuple[str, str]] = []
    if not p.name:
        out.append(("name", "must not be empty"))
    for field, value, most in (
        ("compute_slices", p.compute_slices, compute_slices),
        ("memory_slices", p.memory_slices, memory_slices),
    ):
        if not 0 < value <= most:
            out.append((field, f"must be in [1, {most}] (the GPU's), got {value}"))
    if not (math.isfinite(p.memory_gib) and p.memory_gib > 0):
        out.append(("memory_gib", f"must be a positive finite number, got {p.memory_gib:g}"))
    if p.max_count <= 0:
        out.append(("max_count", f"must be positive, got {p.max_count}"))
    if not p.starts:
        out.append(("starts", "must not be empty"))
    for k, start in enumerate(p.starts):
        if not 0 <= start <= memory_slices - p.memory_slices:
            out.append(
                (
                    f"starts[{k}]",
                    f"start {start} + {p.memory_slices} slices leave the GPU's {memory_slices}",
                )
            )
    return out


def layout_problems(geometry: MigGeometry, instances: Sequence[MigInstance]) -> list[str]:
    """Why a set of instances cannot exist on a GPU of this geometry; [] when it can.

    Rules: known profile, start among the profile's starts, memory slices inside the GPU and
    not shared, at most max_count of a profile, SM slices within the GPU's."""
    out: list[str] = []
    owner: dict[int, str] = {}
    counts: dict[str, int] = {}
    compute = 0
    for k, inst in enumerate(instances):
        p = geometry.profiles.get(inst.profile)
        if p is None:
            known = ", ".join(sorted(geometry.profiles))
            out.append(
                f"instance {k}: unknown MIG profile {inst.profile!r} for "
                f"{geometry.gpu_type} (known: {known})"
            )
            continue
        if inst.start not in p.starts:
            out.append(
                f"instance {k}: {p.name} cannot start at memory slice {inst.start} "
                f"(valid starts: {', '.join(map(str, p.starts))})"
            )
            continue
        for s in p.memory_range(inst.start):
            if s in owner:
                out.append(f"instance {k}: {p.name}@{inst.start} overlaps {owner[s]} at slice {s}")
                break
        else:
            for s in p.memory_range(inst.start):
                owner[s] = f"{p.name}@{inst.start}"
        counts[p.name] = counts.get(p.name, 0) + 1
        compute += p.compute_slices
    for name, n in sorted(counts.items()):
        if n > geometry.profiles[name].max_count:
            out.append(
                f"{n} instances of {name} exceed its maximum of {geometry.profiles[name].max_count}"
            )
    if compute > geometry.compute_slices:
        out.append(f"{compute} SM slices exceed the GPU's {geometry.compute_slices}")
    return out


def valid_layouts(
    geometry: MigGeometry, profiles: Sequence[MigProfile] | None = None
) -> Iterator[tuple[MigInstance, ...]]:
    """Every valid non-empty layout of the geometry (instances sorted by start), derived from
    the catalog alone; `profiles` limits the profiles used (default: all)."""
    chosen = sorted(
        profiles if profiles is not None else geometry.profiles.values(), key=lambda p: p.name
    )
    places = [(p, s) for p in chosen for s in p.starts]

    def extend(
        k: int, used: frozenset[int], acc: tuple[MigInstance, ...]
    ) -> Iterator[tuple[MigInstance, ...]]:
        for j in range(k, len(places)):
            p, s = places[j]
            cells = frozenset(p.memory_range(s))
            if cells & used or max(cells) >= geometry.memory_slices:
                continue
            nxt = (*acc, MigInstance(p.name, s))
            if layout_problems(geometry, nxt):
                continue
            yield tuple(sorted(nxt, key=lambda i: (i.start, i.profile)))
            yield from extend(j + 1, used | cells, nxt)

    yield from extend(0, frozenset(), ())
