"""The MIG catalog, ``models/mig_profiles.json``: each MIG-capable GPU type's geometry.

Entries are checked field by field, and every profile's starts against the geometry, so that a
bad figure fails loudly with the file, entry and field instead of allowing a layout that cannot
exist.
"""

from __future__ import annotations

import dataclasses
from functools import cache, lru_cache

from solver.mig import MigGeometry, MigProfile, profile_problems
from solver.perfmodel.catalog import CatalogError, load_gpu_catalog, models_dir, read_json
from solver.perfmodel.families import family_of, tokens

FILE = "mig_profiles.json"
_GEOMETRY_FIELDS = {"gpu_type", "compute_slices", "memory_slices", "profiles"}
_PROFILE_FIELDS = {
    "name",
    "compute_slices",
    "memory_slices",
    "memory_gib",
    "max_count",
    "starts",
    "media_extensions",
}


def _int(where: str, raw: dict[str, object], key: str) -> int:
    v = raw[key]
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise CatalogError(f"{where}: field {key!r} must be a positive integer, got {v!r}")
    return v


def _fields(where: str, raw: object, expected: set[str]) -> dict[str, object]:
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: expected an object, got {type(raw).__name__}")
    missing = sorted(expected - set(raw))
    unknown = sorted(set(raw) - expected)
    if missing or unknown:
        raise CatalogError(f"{where}: missing {missing} / unknown {unknown} field(s)")
    return raw


def _profile(where: str, raw: object, compute: int, memory: int) -> MigProfile:
    d = _fields(where, raw, _PROFILE_FIELDS)
    name = d["name"]
    if not isinstance(name, str) or not name:
        raise CatalogError(f"{where}: field 'name' must be a non-empty string")
    where = f"{where} ({name!r})"
    c, m, n = (
        _int(where, d, "compute_slices"),
        _int(where, d, "memory_slices"),
        _int(where, d, "max_count"),
    )
    gib = d["memory_gib"]
    if isinstance(gib, bool) or not isinstance(gib, int | float) or gib <= 0:
        raise CatalogError(f"{where}: field 'memory_gib' must be a positive number, got {gib!r}")
    starts = d["starts"]
    if (
        not isinstance(starts, list)
        or not starts
        or any(isinstance(s, bool) or not isinstance(s, int) for s in starts)
    ):
        raise CatalogError(f"{where}: field 'starts' must be a non-empty list of integers")
    me = d["media_extensions"]
    if not isinstance(me, bool):
        raise CatalogError(f"{where}: field 'media_extensions' must be true or false")
    profile = MigProfile(name, c, m, float(gib), n, tuple(starts), me)
    for field, reason in profile_problems(profile, compute, memory):
        raise CatalogError(f"{where}: field {field!r}: {reason}")
    return dataclasses.replace(profile, starts=tuple(sorted(set(starts))))


def parse_mig_catalog(doc: object, where: str) -> dict[str, MigGeometry]:
    """Geometries by GPU type name from the parsed JSON document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("gpus"), list):
        raise CatalogError(f"{where}: expected an object with a list 'gpus'")
    out: dict[str, MigGeometry] = {}
    for i, raw in enumerate(doc["gpus"]):
        at = f"{where}: entry {i}"
        d = _fields(at, raw, _GEOMETRY_FIELDS)
        name = d["gpu_type"]
        if not isinstance(name, str) or not name or name in out:
            raise CatalogError(f"{at}: 'gpu_type' must be a unique non-empty string, got {name!r}")
        compute, memory = _int(at, d, "compute_slices"), _int(at, d, "memory_slices")
        rows = d["profiles"]
        if not isinstance(rows, list) or not rows:
            raise CatalogError(f"{at}: 'profiles' must be a non-empty list")
        profiles: dict[str, MigProfile] = {}
        for k, row in enumerate(rows):
            p = _profile(f"{at} ({name}) profile {k}", row, compute, memory)
            if p.name in profiles:
                raise CatalogError(f"{at}: duplicate profile {p.name!r}")
            profiles[p.name] = p
        out[name] = MigGeometry(name, compute, memory, profiles)
    return out


@cache
def _cached(folder: str) -> dict[str, MigGeometry]:
    return parse_mig_catalog(read_json(FILE), f"{folder}/{FILE}")


def load_mig_catalog() -> dict[str, MigGeometry]:
    """MIG geometries of ``models/mig_profiles.json`` by GPU type name (read once per folder)."""
    return dict(_cached(str(models_dir())))


MEMORY_TOLERANCE = 0.1
"""How far a GPU type's memory may be from a catalog type's to share its geometry: 40 and 80 GB
A100s, 80 and 94 GB H100s (whose profiles differ) stay apart; a site's 79.2 GiB is 80."""


@cache
def _memory(folder: str) -> dict[str, float]:
    gpus = load_gpu_catalog()
    return {name: gpus[name].memory_gib for name in _cached(folder) if name in gpus}


def catalog_type_for(name: str, memory_gib: float) -> str | None:
    """The catalog type whose MIG geometry a GPU type has: its own name, else the one catalog
    type of the same family (``solver.perfmodel.families``) whose memory is within
    MEMORY_TOLERANCE of ``memory_gib`` ("NVIDIA-A100-SXM4-80GB" with 80 GiB: "A100-80GB"); None
    when there is none, or more than one."""
    folder = str(models_dir())
    catalog = _cached(folder)
    if name in catalog:
        return name
    family = family_of(name, {tokens(n)[0] for n in catalog})
    matches = [
        n
        for n, gib in _memory(folder).items()
        if tokens(n)[0] == family and abs(gib - memory_gib) <= MEMORY_TOLERANCE * gib
    ]
    return matches[0] if len(matches) == 1 else None


def geometry_for(name: str, memory_gib: float) -> MigGeometry | None:
    """The catalog geometry of a GPU type (``catalog_type_for``'s), named ``name``."""
    return _geometry_for(str(models_dir()), name, memory_gib)


@lru_cache(maxsize=1024)
def _geometry_for(folder: str, name: str, memory_gib: float) -> MigGeometry | None:
    """``geometry_for``, one object per type across calls (the layout searches memoize on it)."""
    source = catalog_type_for(name, memory_gib)
    if source is None:
        return None
    geometry = _cached(folder)[source]
    return geometry if source == name else dataclasses.replace(geometry, gpu_type=name)
