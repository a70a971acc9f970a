"""Validation of a MIG geometry a snapshot brings for a GPU type (``GpuType.mig``).

The profile rules are the catalog's (``solver.mig.profile_problems``); the sizes are bounded so
that a geometry cannot make the layouts a solve enumerates explode: every MIG GPU NVIDIA has
made has 7 SM and 8 memory slices (A30: 4 and 4) and fewer than 16 profiles.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import islice

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert_mig import geometry_from_proto
from solver.app.validation.common import Collector, quoted
from solver.mig import MigProfile, profile_problems, valid_layouts

MAX_MIG_SLICES = 8
"""SM slices and memory slices of one geometry, each."""
MAX_MIG_PROFILES = 32
"""Profiles of one geometry."""
MAX_MIG_LAYOUTS = 2500
"""Valid layouts of a geometry's plannable profiles: the joint model enumerates them and
compares each with each (the catalog's A100, H100 and H200 have 722 each)."""


def check_mig_geometry(c: Collector, p: str, t: pb.GpuType) -> bool:
    """Whether ``t.mig`` (at path ``p``) is a geometry a GPU can have; adds each problem."""
    m = t.mig
    before = len(c.out)
    for field, value in (("compute_slices", m.compute_slices), ("memory_slices", m.memory_slices)):
        if not 0 < value <= MAX_MIG_SLICES:
            c.add(f"{p}.{field}", f"must be in [1, {MAX_MIG_SLICES}], got {value}")
    if len(c.out) > before:
        return False
    if not m.profiles:
        c.add(f"{p}.profiles", "must not be empty")
    c.count(f"{p}.profiles", len(m.profiles), MAX_MIG_PROFILES, "MAX_MIG_PROFILES")
    seen: set[str] = set()
    for k, q in enumerate(m.profiles):
        qp = f"{p}.profiles[{k}]"
        if q.name in seen:
            c.add(f"{qp}.name", f"duplicate profile {quoted(q.name)}")
        seen.add(q.name)
        if q.name and not c.text(f"{qp}.name", q.name, 64):
            continue
        profile = MigProfile(
            q.name, q.compute_slices, q.memory_slices, q.memory_gib, q.max_count, tuple(q.starts),
            q.media_extensions,
        )  # fmt: skip
        for field, reason in profile_problems(profile, m.compute_slices, m.memory_slices):
            c.add(f"{qp}.{field}", reason)
        if q.memory_gib > t.memory_gib:
            c.add(
                f"{qp}.memory_gib",
                f"{q.memory_gib:g} GiB exceeds the GPU's memory_gib {t.memory_gib:g}",
            )
        if len(set(q.starts)) < len(q.starts):
            c.add(f"{qp}.starts", "duplicate start")
    if len(c.out) == before and _layouts(m.SerializeToString(deterministic=True)) > MAX_MIG_LAYOUTS:
        c.add(
            f"{p}.profiles",
            f"its profiles make more than {MAX_MIG_LAYOUTS} layouts (the catalog's GPUs: 722)",
        )
    return len(c.out) == before


@lru_cache(maxsize=64)
def _layouts(geometry: bytes) -> int:
    """Valid layouts of the plannable profiles, counted up to MAX_MIG_LAYOUTS + 1."""
    g = geometry_from_proto("", pb.MigGeometry.FromString(geometry))
    return sum(1 for _ in islice(valid_layouts(g, g.plannable()), MAX_MIG_LAYOUTS + 1))


def valid_mig_geometry(t: pb.GpuType) -> bool:
    """Whether the type has no geometry of its own or a valid one (no problem reported)."""
    return not t.HasField("mig") or check_mig_geometry(Collector(), "", t)
