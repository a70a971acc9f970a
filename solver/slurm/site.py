"""What the adapter knows beyond Slurm: GPU datasheets per GRES type, named models, racks,
power budgets and objective settings.

Defaults come from the package's own catalogs (``models/gpus.json`` and
``models/architectures.json``, read as data files): GRES type ``h100`` is the catalog's
``H100-80GB``, a demand may name ``gpt3-1.3b``. A site file (``--site FILE``, JSON) adds or
overrides any of it:

    {"gpu_types": {"h100": "H100-80GB", "mi300": {"name": "MI300X", "memoryGib": 192, ...}},
     "models": {"my-7b": {"parameters": 7e9, "layers": 32, ...}},
     "racks": {"node[1-16]": "r1", "node[17-32]": "r2"}, "base_watts": {"node[1-32]": 1100},
     "network_bandwidth_gbps": 400, "power_budget_watts": 60000,
     "rack_power_budgets": {"r1": 30000}, "weights": {"energy": 0.2}, "fairness": {...},
     "grid": {"schedule": "grid.csv", "hours": 48, "min_saving": 0.1, "saving_per_delay": 0.25},
     "queues": [{"name": "physics", "cohort": "all", "weight": 2,
                 "quotas": [{"resource": "H100-80GB", "nominal": 32, "borrowingLimit": 16}]}]}

``base_watts`` is each node's draw beside its GPUs (CPU, memory, fans, NICs), which the power
budgets count (docs/power-states.md, "Power budgets"); a node the file gives none draws 0 there.

``grid`` makes rounds carbon-aware (docs/carbon.md): each round's snapshot carries the
schedule's hour in force and the next ``hours`` hours (its times in UTC), and pending jobs
whose deadline leaves slack may be deferred to cleaner hours.

``queues`` are tenant queues with quotas (docs/fairness.md), as Slurm's accounts with GrpTRES
limits would be: a job's account names its queue (its demand's ``tenant`` wins); an account
that names none goes to the default queue, which has no quota unless one is declared.

Messages (a GPU type, a model, weights, fairness, a queue) are in the wire's protobuf JSON form.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, TypeVar

from solver.slurm.hostlist import HostlistError, expand
from solver.wire import (
    Fairness,
    GpuType,
    GridHour,
    GridScheduleError,
    ModelSpec,
    ObjectiveWeights,
    TenantQueue,
    message_from_dict,
    read_grid_schedule,
    read_text,
)

GRES_ALIASES = {
    "h100": "H100-80GB",
    "h200": "H200",
    "a100": "A100-80GB",
    "v100": "V100-32GB",
    "l40s": "L40S",
    "a10": "A10",
    "t4": "T4",
    "k80": "K80",
    "p100": "P100-16GB",
}
"""Common GRES type names -> GPU types of the catalog (each catalog name, lower-cased, works
too: ``a100-40gb``)."""
DEFAULT_RACK = "rack0"
"""Rack of a node the site file places in none."""
_SITE_KEYS = {
    "gpu_types",
    "models",
    "racks",
    "base_watts",
    "network_bandwidth_gbps",
    "power_budget_watts",
    "rack_power_budgets",
    "weights",
    "fairness",
    "grid",
    "queues",
}
_GRID_KEYS = {"schedule", "hours", "min_saving", "saving_per_delay", "scale_energy"}


T = TypeVar("T")


class SiteError(ValueError):
    """A site file or catalog entry that can't be used; the message names the field."""


def _catalog(name: str, key: str) -> list[dict[str, Any]]:
    """Entries of a bundled catalog file (data only: no solver module is imported)."""
    path = files("solver").joinpath("_bundled", "models", name)
    data = json.loads(path.read_text(encoding="utf-8"))
    return [{k: v for k, v in e.items() if k != "source"} for e in data[key]]


def catalog_gpu_types() -> dict[str, GpuType]:
    """The catalog's GPU types by lower-case name, and by the GRES_ALIASES."""
    types = {
        e["name"]: message_from_dict(e, GpuType, f"gpus.json {e['name']}")
        for e in _catalog("gpus.json", "gpus")
    }
    out = {name.lower(): t for name, t in types.items()}
    out.update({alias: types[name] for alias, name in GRES_ALIASES.items() if name in types})
    return out


def catalog_models() -> dict[str, dict[str, Any]]:
    """The catalog's model architectures by name, as ModelSpec JSON."""
    out = {}
    for e in _catalog("architectures.json", "architectures"):
        name = e.pop("name")
        out[name] = e
    return out


@dataclass(frozen=True)
class GridSite:
    """The site's grid schedule and how rounds use it."""

    schedule: tuple[GridHour, ...]
    hours: int = 48
    """Hours of the schedule after now that each snapshot carries (the forecast)."""
    min_saving: float | None = None
    saving_per_delay: float | None = None
    scale_energy: bool = False


@dataclass(frozen=True)
class Site:
    """Everything the snapshot needs that Slurm does not say."""

    gpu_types: Mapping[str, GpuType] = field(default_factory=catalog_gpu_types)
    """GRES type (lower-case) -> the GPU type DSFRO plans with."""
    models: Mapping[str, Mapping[str, Any]] = field(default_factory=catalog_models)
    """Model name -> ModelSpec JSON, for demands that name their model."""
    racks: Mapping[str, str] = field(default_factory=dict)
    """Node -> rack."""
    base_watts: Mapping[str, float] = field(default_factory=dict)
    """Node -> its draw beside its GPUs, in W."""
    network_bandwidth_gbps: float = 400.0
    power_budget_watts: float | None = None
    rack_power_budgets: Mapping[str, float] = field(default_factory=dict)
    weights: ObjectiveWeights | None = None
    fairness: Fairness | None = None
    grid: GridSite | None = None
    queues: tuple[TenantQueue, ...] = ()
    """Tenant queues with their quotas; checked by DSFRO each round, as weights are."""

    @functools.cached_property
    def queue_names(self) -> frozenset[str]:
        return frozenset(q.name for q in self.queues)

    def gpu_type(self, gres_type: str) -> GpuType | None:
        """The GPU type of a GRES type, None if the site does not know it."""
        return self.gpu_types.get(gres_type.lower())

    def rack(self, node: str) -> str:
        return self.racks.get(node, DEFAULT_RACK)


def _number(value: Any, where: str, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SiteError(f"{where}: expected a number, got {value!r}")
    if positive and not value > 0:
        raise SiteError(f"{where}: must be > 0, got {value!r}")
    return float(value)


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SiteError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _gpu_types(data: Mapping[str, Any], where: str) -> dict[str, GpuType]:
    known = catalog_gpu_types()
    out = dict(known)
    for gres, value in data.items():
        w = f"{where}.{gres}"
        if isinstance(value, str):
            if value.lower() not in known:
                raise SiteError(f"{w}: unknown GPU type {value!r} (not in the catalog)")
            out[gres.lower()] = known[value.lower()]
        else:
            try:
                out[gres.lower()] = message_from_dict(_object(value, w), GpuType, w)
            except ValueError as e:
                raise SiteError(str(e)) from None
    return out


def _models(data: Mapping[str, Any], where: str) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = dict(catalog_models())
    for name, value in data.items():
        w = f"{where}.{name}"
        try:
            message_from_dict(_object(value, w), ModelSpec, w)  # checked here, used as JSON
        except ValueError as e:
            raise SiteError(str(e)) from None
        out[name] = value
    return out


def _per_node(data: Mapping[str, Any], where: str, value: Callable[[Any, str], T]) -> dict[str, T]:
    """Hostlist -> value, per node; `value` reads one entry (SiteError naming it)."""
    out: dict[str, T] = {}
    for hosts, entry in data.items():
        v = value(entry, f"{where}.{hosts}")
        try:
            out.update(dict.fromkeys(expand(hosts), v))
        except HostlistError as e:
            raise SiteError(f"{where}.{hosts}: {e}") from None
    return out


def _rack_name(entry: Any, where: str) -> str:
    if not isinstance(entry, str) or not entry:
        raise SiteError(f"{where}: expected a rack name, got {entry!r}")
    return entry


def _watts(entry: Any, where: str) -> float:
    value = _number(entry, where, positive=False)
    if not 0 <= value < 1e6:
        raise SiteError(f"{where}: must be >= 0 W and < 1 MW, got {entry!r}")
    return value


def site_from_dict(data: Mapping[str, Any], where: str = "site") -> Site:
    """A Site from the site file's JSON; SiteError names the field."""
    data = _object(data, where)
    unknown = set(data) - _SITE_KEYS
    if unknown:
        raise SiteError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_SITE_KEYS)})")
    kwargs: dict[str, Any] = {}
    if "gpu_types" in data:
        kwargs["gpu_types"] = _gpu_types(
            _object(data["gpu_types"], f"{where}.gpu_types"), f"{where}.gpu_types"
        )
    if "models" in data:
        kwargs["models"] = _models(_object(data["models"], f"{where}.models"), f"{where}.models")
    if "racks" in data:
        w = f"{where}.racks"
        kwargs["racks"] = _per_node(_object(data["racks"], w), w, _rack_name)
    if "base_watts" in data:
        w = f"{where}.base_watts"
        kwargs["base_watts"] = _per_node(_object(data["base_watts"], w), w, _watts)
    if "network_bandwidth_gbps" in data:
        w = f"{where}.network_bandwidth_gbps"
        kwargs["network_bandwidth_gbps"] = _number(data["network_bandwidth_gbps"], w)
    if "power_budget_watts" in data:
        w = f"{where}.power_budget_watts"
        kwargs["power_budget_watts"] = _number(data["power_budget_watts"], w)
    if "rack_power_budgets" in data:
        w = f"{where}.rack_power_budgets"
        budgets = _object(data["rack_power_budgets"], w)
        kwargs["rack_power_budgets"] = {r: _number(v, f"{w}.{r}") for r, v in budgets.items()}
        # A budget on a rack no node is in would bind nothing: a typo must not pass silently.
        known = set(kwargs.get("racks", {}).values()) or {DEFAULT_RACK}
        for rack in budgets:
            if rack not in known:
                names = ", ".join(sorted(known))
                raise SiteError(f"{w}.{rack}: no node is in rack {rack!r} (racks: {names})")
    for key, message in (("weights", ObjectiveWeights), ("fairness", Fairness)):
        if key in data:
            try:
                kwargs[key] = message_from_dict(
                    _object(data[key], f"{where}.{key}"), message, f"{where}.{key}"
                )
            except ValueError as e:
                raise SiteError(str(e)) from None
    if "grid" in data:
        kwargs["grid"] = _grid(_object(data["grid"], f"{where}.grid"), f"{where}.grid")
    if "queues" in data:
        kwargs["queues"] = _queues(data["queues"], f"{where}.queues")
    return Site(**kwargs)


def _queues(value: Any, where: str) -> tuple[TenantQueue, ...]:
    """The queues in the wire's JSON form, each named once (their quotas DSFRO checks)."""
    if not isinstance(value, list):
        raise SiteError(f"{where}: expected a list of queues, got {type(value).__name__}")
    out: list[TenantQueue] = []
    for k, entry in enumerate(value):
        w = f"{where}[{k}]"
        try:
            queue = message_from_dict(_object(entry, w), TenantQueue, w)
        except ValueError as e:
            raise SiteError(str(e)) from None
        if not queue.name or queue.name in (q.name for q in out):
            raise SiteError(f"{w}.name: a name not given before is required, got {queue.name!r}")
        out.append(queue)
    return tuple(out)


def _grid(data: Mapping[str, Any], where: str) -> GridSite:
    """The grid entry: the schedule (a CSV path, relative to the working directory) and the
    forecast's options, each checked here so a round never sends a bad one."""
    unknown = set(data) - _GRID_KEYS
    if unknown:
        raise SiteError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(_GRID_KEYS)})")
    if not isinstance(data.get("schedule"), str):
        raise SiteError(f"{where}.schedule: the path of a grid schedule CSV is required")
    try:
        schedule = tuple(read_grid_schedule(data["schedule"]))
    except GridScheduleError as e:
        raise SiteError(f"{where}.schedule: {e}") from None
    hours = data.get("hours", 48)
    if not isinstance(hours, int) or isinstance(hours, bool) or not 0 <= hours <= 24 * 30:
        raise SiteError(f"{where}.hours: an integer in [0, 720] (a month), got {hours!r}")
    min_saving = data.get("min_saving")
    if min_saving is not None and not (
        isinstance(min_saving, (int, float)) and 0 <= min_saving < 1
    ):
        raise SiteError(f"{where}.min_saving: a number in [0, 1), got {min_saving!r}")
    price = data.get("saving_per_delay")
    if price is not None:
        price = _number(price, f"{where}.saving_per_delay", positive=False)
        if not 0 <= price <= 100:  # NaN fails too
            raise SiteError(f"{where}.saving_per_delay: a number in [0, 100], got {price!r}")
    scale = data.get("scale_energy", False)
    if not isinstance(scale, bool):
        raise SiteError(f"{where}.scale_energy: true or false, got {scale!r}")
    return GridSite(schedule, hours, min_saving, price, scale)


def load_site(path: str | Path | None) -> Site:
    """The site file at `path` (the catalog defaults for None)."""
    if path is None:
        return Site()
    try:
        data = json.loads(read_text(path))
    except OSError as e:
        raise SiteError(f"{path}: cannot read: {e}") from None
    except ValueError as e:
        raise SiteError(f"{path}: malformed JSON: {e}") from None
    return site_from_dict(data, str(path))
