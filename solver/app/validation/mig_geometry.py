"""Validation of a MIG geometry a snapshot brings for a GPU type (``GpuType.mig``).

The profile rules are the catalog's (``solver.mig.profile_problems``); the sizes are bounded so
that a geometry cannot make the layouts a solve enumerates explode: every MIG GPU NVIDIA has
made has 7 SM and 8 memory slices (A30: 4 and 4) and fewer than 16 profiles.
"""

from __future__ import annotations

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.validation.common import Collector, quoted
from solver.mig import MigProfile, profile_problems

MAX_MIG_SLICES = 8
"""SM slices and memory slices of one geometry, each."""
MAX_MIG_PROFILES = 32
"""Profiles of one geometry."""


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
    return len(c.out) == before


def valid_mig_geometry(t: pb.GpuType) -> bool:
    """Whether the type has no geometry of its own or a valid one (no problem reported)."""
    return not t.HasField("mig") or check_mig_geometry(Collector(), "", t)
