"""The GPU and model catalogs in ``models/``: ``gpus.json`` and ``architectures.json``.

The folder is the bundled ``models/`` (``solver.resources``: the repository's in a checkout, the
wheel's copy when installed), or the directory that the environment variable
``DSFRO_MODELS_DIR`` names. Entries are validated field by field so that
a bad figure fails loudly with the file, entry and field in the message instead of skewing a plan.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from solver import resources
from solver.domain import GpuType, ModelSpec

MODELS_DIR_ENV = "DSFRO_MODELS_DIR"

_GPU_FIELDS = (
    "name",
    "memory_gib",
    "peak_tflops",
    "memory_bandwidth_gbps",
    "intra_node_bandwidth_gbps",
    "tdp_watts",
    "idle_watts",
    "sm_clocks_mhz",
)
_ARCH_FIELDS = (
    "name",
    "parameters",
    "layers",
    "hidden_size",
    "attention_heads",
    "sequence_length",
    "global_batch_size",
)
_OPTIONAL = frozenset({"source"})


class CatalogError(ValueError):
    """A catalog file is missing, unreadable or has a bad entry."""


def models_dir() -> Path:
    """``$DSFRO_MODELS_DIR`` if set, else the bundled ``models/`` (see ``solver.resources``)."""
    override = os.environ.get(MODELS_DIR_ENV)
    if override:
        return Path(override)
    return resources.models_dir()


def read_json(name: str) -> Any:
    """Parse ``models/<name>``; errors name the file."""
    path = models_dir() / name
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as e:
        raise CatalogError(f"{path}: file not found (see {MODELS_DIR_ENV})") from e
    except json.JSONDecodeError as e:
        raise CatalogError(f"{path}: invalid JSON: {e}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(f"{path}: cannot read: {e}") from e


class _Entry:
    """One catalog entry with error messages that say where it is."""

    def __init__(self, path: Path, index: int, raw: object, fields: tuple[str, ...]) -> None:
        self.where = f"{path}: entry {index}"
        if not isinstance(raw, dict):
            raise CatalogError(f"{self.where}: expected an object, got {type(raw).__name__}")
        name = raw.get("name")
        if isinstance(name, str):
            self.where += f" ({name!r})"
        missing = [f for f in fields if f not in raw]
        if missing:
            raise CatalogError(f"{self.where}: missing field(s) {', '.join(missing)}")
        unknown = sorted(set(raw) - set(fields) - _OPTIONAL)
        if unknown:
            raise CatalogError(f"{self.where}: unknown field(s) {', '.join(unknown)}")
        self.raw: Mapping[str, object] = raw

    def fail(self, field: str, why: str) -> CatalogError:
        return CatalogError(f"{self.where}: field {field!r} {why}, got {self.raw[field]!r}")

    def name(self) -> str:
        v = self.raw["name"]
        if not isinstance(v, str) or not v.strip():
            raise self.fail("name", "must be a non-empty string")
        return v

    def number(self, field: str, *, positive: bool = True) -> float:
        v = self.raw[field]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise self.fail(field, "must be a finite number")
        if v < 0 or (positive and v == 0):
            raise self.fail(field, "must be positive" if positive else "must not be negative")
        return float(v)

    def integer(self, field: str) -> int:
        v = self.raw[field]
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise self.fail(field, "must be a positive integer")
        return v

    def clocks(self, field: str) -> tuple[int, ...]:
        v = self.raw[field]
        if not isinstance(v, list) or not v:
            raise self.fail(field, "must be a non-empty list of MHz")
        if any(isinstance(c, bool) or not isinstance(c, int) or c <= 0 for c in v):
            raise self.fail(field, "must hold positive integers (MHz)")
        if len(set(v)) != len(v):
            raise self.fail(field, "must not repeat a clock")
        return tuple(sorted(v))


def _entries(name: str, key: str) -> tuple[Path, list[object]]:
    doc = read_json(name)
    path = models_dir() / name
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise CatalogError(f"{path}: expected an object with a list {key!r}")
    return path, doc[key]


def _gpu(e: _Entry) -> GpuType:
    tdp = e.number("tdp_watts")
    idle = e.number("idle_watts", positive=False)
    if idle >= tdp:
        raise e.fail("idle_watts", f"must be below tdp_watts ({tdp})")
    return GpuType(
        name=e.name(),
        memory_gib=e.number("memory_gib"),
        peak_tflops=e.number("peak_tflops"),
        memory_bandwidth_gbps=e.number("memory_bandwidth_gbps"),
        intra_node_bandwidth_gbps=e.number("intra_node_bandwidth_gbps"),
        tdp_watts=tdp,
        idle_watts=idle,
        sm_clocks_mhz=e.clocks("sm_clocks_mhz"),
    )


def _architecture(e: _Entry) -> ModelSpec:
    hidden, heads = e.integer("hidden_size"), e.integer("attention_heads")
    if hidden % heads:
        raise e.fail("hidden_size", f"must be a multiple of attention_heads ({heads})")
    return ModelSpec(
        parameters=e.number("parameters"),
        layers=e.integer("layers"),
        hidden_size=hidden,
        attention_heads=heads,
        sequence_length=e.integer("sequence_length"),
        global_batch_size=e.integer("global_batch_size"),
    )


def load_gpu_catalog() -> dict[str, GpuType]:
    """GPU types of ``models/gpus.json`` by name, sm_clocks_mhz ascending."""
    path, raw = _entries("gpus.json", "gpus")
    out: dict[str, GpuType] = {}
    for i, item in enumerate(raw):
        gpu = _gpu(_Entry(path, i, item, _GPU_FIELDS))
        if gpu.name in out:
            raise CatalogError(f"{path}: entry {i}: duplicate name {gpu.name!r}")
        out[gpu.name] = gpu
    return out


def load_architectures() -> dict[str, ModelSpec]:
    """Model architectures of ``models/architectures.json`` by name."""
    path, raw = _entries("architectures.json", "architectures")
    out: dict[str, ModelSpec] = {}
    for i, item in enumerate(raw):
        e = _Entry(path, i, item, _ARCH_FIELDS)
        name = e.name()
        if name in out:
            raise CatalogError(f"{path}: entry {i}: duplicate name {name!r}")
        out[name] = _architecture(e)
    return out
