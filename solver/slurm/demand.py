"""A job's DSFRO demand, read from the job itself: its Slurm comment is ``dsfro:`` followed by
a JSON object (``sbatch --hold --comment='dsfro:{"model":"gpt3-1.3b","max_gpus":8}' ...``).

Keys (snake_case or the wire's lowerCamelCase; docs/integrations.md has the table):

- ``model``: a model name of the catalog or the site file, or a ModelSpec object; or
  ``profile``: a ThroughputProfile object (exactly one of the two);
- ``min_gpus``, ``max_gpus``: GPU limits (default: the GPUs the job asks Slurm for);
- ``weight`` (0.001 to 1000), ``tenant``, ``allowed_gpu_types`` (GRES types or catalog names),
  ``remaining_samples``, ``deadline`` (seconds after submission, or "90m", "2h"; Slurm's own
  ``--deadline`` is used when unset), ``preemptible`` (default true; a job that Slurm may not
  requeue is never moved).

A comment without the prefix is no demand: the job is Slurm's. A wrong one is a DemandError
naming the key, e.g. ``comment: max_gpus: expected an integer >= 1, got "eight"``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from solver.slurm.site import Site
from solver.wire import ModelSpec, ThroughputProfile, message_from_dict, weight_problem

PREFIX = "dsfro:"
"""What a comment starts with to carry a demand."""
KEYS = (
    "model",
    "profile",
    "min_gpus",
    "max_gpus",
    "weight",
    "tenant",
    "allowed_gpu_types",
    "remaining_samples",
    "deadline",
    "preemptible",
)
MAX_GPUS = 1_000_000
"""A GPU limit above any cluster's GPUs (and within the wire's 32-bit fields)."""
MAX_SECONDS = 10 * 365 * 86400.0
"""A deadline within ten years, as the service's limit on deadlines."""
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


class DemandError(ValueError):
    """A demand that can't be used; the message names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"comment: {key}: {message}" if key else f"comment: {message}")
        self.key = key


@dataclass(frozen=True)
class Demand:
    """A job's demand, checked; unset fields take the defaults of the snapshot builder."""

    workload: str
    """"model" or "profile"."""
    spec: Mapping[str, Any]
    """The ModelSpec or ThroughputProfile, in protobuf JSON form."""
    min_gpus: int | None = None
    max_gpus: int | None = None
    weight: float | None = None
    tenant: str | None = None
    allowed_gpu_types: tuple[str, ...] = ()
    remaining_samples: float | None = None
    deadline_seconds: float | None = None
    preemptible: bool | None = None


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower()


def _int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_GPUS:
        raise DemandError(key, f"expected an integer from 1 to {MAX_GPUS:,}, got {_shown(value)}")
    return value


def _float(value: Any, key: str, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DemandError(key, f"expected a number, got {_shown(value)}")
    if not math.isfinite(value):
        raise DemandError(key, f"must be finite, got {value}")
    if (positive and not value > 0) or value < 0:
        raise DemandError(key, f"must be {'> 0' if positive else '>= 0'}, got {value}")
    return float(value)


def _weight(value: Any) -> float:
    """The service's rule, so that a bad weight is this job's error and not the round's."""
    weight = _float(value, "weight", positive=True)
    if problem := weight_problem(weight):
        raise DemandError("weight", problem)
    return weight


def _shown(value: Any) -> str:
    """`value` as JSON, cut short: an error goes into the job's AdminComment."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _duration(value: Any, key: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _UNITS[m.group(2)]
    else:
        raise DemandError(key, f'expected seconds or a duration like "90m", got {_shown(value)}')
    if not 0 < seconds <= MAX_SECONDS:
        raise DemandError(key, f"must be > 0 and at most ten years, got {_shown(value)}")
    return seconds


def _workload(data: Mapping[str, Any], site: Site) -> tuple[str, Mapping[str, Any]]:
    if ("model" in data) == ("profile" in data):
        raise DemandError("model", "give exactly one of model (a name or a ModelSpec) or profile")
    if "profile" in data:
        value = data["profile"]
        if not isinstance(value, Mapping):
            raise DemandError("profile", f"expected an object, got {_shown(value)}")
        _message(value, ThroughputProfile, "profile")
        return "profile", value
    value = data["model"]
    if isinstance(value, str):
        spec = site.models.get(value)
        if spec is None:
            known = ", ".join(sorted(site.models))
            raise DemandError("model", f"unknown model {_shown(value)} (known: {known})")
        return "model", spec
    if not isinstance(value, Mapping):
        raise DemandError("model", f"expected a name or an object, got {_shown(value)}")
    _message(value, ModelSpec, "model")
    return "model", value


def _message(
    value: Mapping[str, Any], message: type[ModelSpec | ThroughputProfile], key: str
) -> None:
    try:
        message_from_dict(value, message, key)
    except ValueError as e:
        raise DemandError(key, str(e).removeprefix(f"{key}: ")) from None


def _gpu_types(value: Any, site: Site) -> tuple[str, ...]:
    key = "allowed_gpu_types"
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DemandError(key, f"expected a list of GPU type names, got {_shown(value)}")
    out = []
    for name in value:
        gpu = site.gpu_type(name)
        if gpu is None:
            raise DemandError(key, f"unknown GPU type {_shown(name)}")
        out.append(gpu.name)
    return tuple(dict.fromkeys(out))


def has_demand(comment: str) -> bool:
    """Whether a comment carries a demand (valid or not)."""
    return comment.strip().startswith(PREFIX)


def parse_demand(comment: str, site: Site) -> Demand | None:
    """The demand in a job's comment; None without the ``dsfro:`` prefix."""
    if not has_demand(comment):
        return None
    text = comment.strip()
    try:
        raw = json.loads(text[len(PREFIX) :])
    except ValueError as e:
        raise DemandError("", f"malformed JSON after {PREFIX!r}: {e}") from None
    if not isinstance(raw, dict):
        raise DemandError("", f"expected a JSON object after {PREFIX!r}")
    data: dict[str, Any] = {}
    for key, value in raw.items():
        name = _snake(key)
        if name not in KEYS:
            raise DemandError(key, f"unknown key (known: {', '.join(KEYS)})")
        if name in data:
            raise DemandError(key, "given twice")
        data[name] = value
    workload, spec = _workload(data, site)
    lo = _int(data["min_gpus"], "min_gpus") if "min_gpus" in data else None
    hi = _int(data["max_gpus"], "max_gpus") if "max_gpus" in data else None
    if lo is not None and hi is not None and hi < lo:
        raise DemandError("max_gpus", f"is {hi}, below min_gpus {lo}")
    tenant = data.get("tenant")
    if tenant is not None and not isinstance(tenant, str):
        raise DemandError("tenant", f"expected a string, got {_shown(tenant)}")
    preemptible = data.get("preemptible")
    if preemptible is not None and not isinstance(preemptible, bool):
        raise DemandError("preemptible", f"expected true or false, got {_shown(preemptible)}")
    remaining = (
        _float(data["remaining_samples"], "remaining_samples", positive=False)
        if "remaining_samples" in data
        else None
    )
    deadline = _duration(data["deadline"], "deadline") if "deadline" in data else None
    if deadline is not None and not remaining:
        raise DemandError(
            "deadline",
            "needs remaining_samples > 0 (the samples left to train): without them DSFRO "
            "can't tell whether the deadline holds",
        )
    return Demand(
        workload=workload,
        spec=spec,
        min_gpus=lo,
        max_gpus=hi,
        weight=_weight(data["weight"]) if "weight" in data else None,
        tenant=tenant,
        allowed_gpu_types=_gpu_types(data["allowed_gpu_types"], site)
        if "allowed_gpu_types" in data
        else (),
        remaining_samples=remaining,
        deadline_seconds=deadline,
        preemptible=preemptible,
    )
