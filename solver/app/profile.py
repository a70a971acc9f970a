"""Operator profiles: objective weights and solver settings kept in a TOML file.

Every table and every key is optional::

    [weights]                # ObjectiveWeights (docs/objective.md)
    throughput = 1.0
    energy = 0.2
    migration = 0.05
    locality = 0.01
    deadline = 0.5
    fairness = 1.0           # weight of the fairness mode's value F
    completion = 0.0         # the completion priority's weight (shortest remaining first)
    node_preference = 0.05   # a job's cost on nodes it would rather not use (preferred affinity)
    energy_basis = "waste"   # draw (default) or waste: what the energy weight charges

    [fairness]               # SolveRequest.fairness (docs/objective.md, "Fairness")
    mode = "max_min"         # weighted_sum, max_min, proportional, drf, finish_time
    scope = "tenant"         # job, tenant
    horizon = "5m"           # how long one plan runs
    mean_weight = 0.5        # least-row modes: + this x the mean row (every entity counts)

    [solver]                 # SolveOptions
    time_budget = "5s"       # "500ms", "1.5s", "2m", "1h", or a number of seconds
    backend = "auto"         # auto, cpsat, heuristic, aggregate, highs, pyomo, decomposed
    relative_gap = 0.0       # in [0, 1)
    threads = 0              # 0: the server's default
    seed = 0
    pyomo_solver = ""        # only with backend = "pyomo"

    [carbon]                 # min_saving, saving_per_delay, scale_energy (docs/carbon.md)
    [tuning]                 # SolverSettings: the solver's timing and size knobs
    heuristic_share = 0.5    # every key of docs/operations.md, "Tuning"

Precedence, highest first: command-line flags, then the fields the request sets itself, then
the profile, then the built-in defaults (``solver.domain``; the time budget's default is the
server's). ``apply_profile`` fills only what the request leaves unset. For the options the wire
gives no presence to (backend, relative_gap, seed, threads, pyomo_solver), unset means the zero
value: a request cannot ask for seed 0 against a profile's seed 7 (it gets 7).

[tuning] is about the solver itself (``SolverSettings``); ``DSFRO_TUNING_<KEY>`` wins over it.

Every problem of a file is reported at once, each naming the file and the key.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import profile_carbon as carbons
from solver.app.convert import backend_to_proto, wire_name
from solver.app.limits import (
    INT32_MAX,
    MAX_FAIRNESS_HORIZON_SECONDS,
    MAX_FAIRNESS_MEAN_WEIGHT,
    MAX_THREADS,
    format_duration,
    parse_backend,
    parse_duration,
    parse_fairness_mode,
    parse_fairness_scope,
)
from solver.app.profile_weights import (
    TABLE_KEYS,
    apply_energy_basis,
    format_energy_basis,
    read_energy_basis,
)
from solver.app.profile_weights import WEIGHT_KEYS as WEIGHT_KEYS
from solver.app.profile_weights import ProfileWeights as ProfileWeights
from solver.core.settings import TABLE as TUNING
from solver.core.settings import SettingsError, SolverSettings, load_settings
from solver.domain import Backend, Fairness, FairnessMode, FairnessScope, SolveOptions
from solver.weights import ObjectiveWeights
from solver.wire import read_text

TABLES = ("weights", "fairness", "solver", carbons.TABLE, TUNING)
FAIRNESS_KEYS = ("mode", "scope", "horizon", "mean_weight")
SOLVER_KEYS = ("time_budget", "backend", "relative_gap", "threads", "seed", "pyomo_solver")


class ProfileError(ValueError):
    """A profile that can't be used; ``problems`` holds one line per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ProfileFairness:
    """The fairness policy the profile sets; None: not in the file."""

    mode: FairnessMode | None = None
    scope: FairnessScope | None = None
    horizon_seconds: float | None = None
    mean_weight: float | None = None


@dataclass(frozen=True)
class ProfileSolver:
    """Solver settings the profile sets; None: not in the file."""

    time_budget_seconds: float | None = None
    backend: Backend | None = None
    relative_gap: float | None = None
    threads: int | None = None
    seed: int | None = None
    pyomo_solver: str | None = None


@dataclass(frozen=True)
class Profile:
    weights: ProfileWeights = field(default_factory=ProfileWeights)
    solver: ProfileSolver = field(default_factory=ProfileSolver)
    fairness: ProfileFairness = field(default_factory=ProfileFairness)
    source: str = ""
    """The file it came from (for messages)."""
    tuning: Mapping[str, Any] = field(default_factory=dict)
    """The [tuning] table as written (checked when loaded): SolverSettings keys."""
    carbon: carbons.ProfileCarbon = field(default_factory=carbons.ProfileCarbon)

    def effective_weights(self) -> ObjectiveWeights:
        """The weights with the built-in defaults filled in."""
        d = ObjectiveWeights()
        return ObjectiveWeights(
            **{k: _pick(getattr(self.weights, k), getattr(d, k)) for k in WEIGHT_KEYS},
            energy_basis=_pick(self.weights.energy_basis, d.energy_basis),
        )

    def effective_options(self) -> SolveOptions:
        """The solver settings with the built-in defaults filled in."""
        d = SolveOptions()
        s = self.solver
        return SolveOptions(
            time_budget_seconds=_pick(s.time_budget_seconds, d.time_budget_seconds),
            backend=_pick(s.backend, d.backend),
            relative_gap=_pick(s.relative_gap, d.relative_gap),
            seed=_pick(s.seed, d.seed),
            threads=_pick(s.threads, d.threads),
            pyomo_solver=_pick(s.pyomo_solver, d.pyomo_solver),
        )


def _pick(value: Any, default: Any) -> Any:
    return default if value is None else value


# ---------------------------------------------------------------- loading


def load_profile(path: str | Path) -> Profile:
    """The profile of a TOML file; ProfileError lists every problem with the file and key."""
    path = Path(path)
    try:
        data = tomllib.loads(read_text(path))
    except OSError as e:
        raise ProfileError([f"{path}: cannot read: {e.strerror or e}"]) from e
    except UnicodeDecodeError as e:
        raise ProfileError([f"{path}: cannot read: not UTF-8 text ({e.reason})"]) from e
    except tomllib.TOMLDecodeError as e:
        raise ProfileError([f"{path}: invalid TOML: {e}"]) from e
    return profile_from_dict(data, source=str(path))


def profile_from_dict(data: Mapping[str, Any], source: str = "<profile>") -> Profile:
    """The profile of parsed TOML (a dict); ProfileError lists every problem."""
    problems: list[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"{source}: {key}: {message}")

    for key in data:
        if key not in TABLES:
            bad(key, f"unknown key; the tables: {', '.join(TABLES)}")
    weights = _table(data, "weights", TABLE_KEYS, bad)
    basis = read_energy_basis(weights, bad)
    fairness = _fairness(_table(data, "fairness", FAIRNESS_KEYS, bad), bad)
    solver = _table(data, "solver", SOLVER_KEYS, bad)
    carbon = carbons.read_carbon(_table(data, carbons.TABLE, carbons.KEYS, bad), bad)
    tuning = _table(
        data, TUNING, tuple(SolverSettings.model_fields), bad, "the keys of docs/operations.md"
    )
    try:
        load_settings(tuning, source=source, environ={})
    except SettingsError as e:
        problems.extend(e.problems)

    w: dict[str, float] = {}
    for key, value in weights.items():
        number = _number(f"weights.{key}", value, bad)
        if number is not None:
            if number < 0:
                bad(f"weights.{key}", f"must be >= 0, got {number:g}")
            else:
                w[key] = number

    s: dict[str, Any] = {}
    if "time_budget" in solver:
        s["time_budget_seconds"] = _duration("solver.time_budget", solver["time_budget"], bad)
    if "backend" in solver:
        value = solver["backend"]
        if not isinstance(value, str):
            bad("solver.backend", f"must be a string, got {_kind(value)}")
        else:
            try:
                s["backend"] = parse_backend(value)
            except ValueError as e:
                bad("solver.backend", str(e))
    if "relative_gap" in solver:
        gap = _number("solver.relative_gap", solver["relative_gap"], bad)
        if gap is not None and not 0 <= gap < 1:
            bad("solver.relative_gap", f"must be in [0, 1), got {gap:g}")
        elif gap is not None:
            s["relative_gap"] = gap
    if "threads" in solver:
        s["threads"] = _integer("solver.threads", solver["threads"], 0, MAX_THREADS, bad)
    if "seed" in solver:
        s["seed"] = _integer("solver.seed", solver["seed"], 0, INT32_MAX, bad)
    if "pyomo_solver" in solver:
        value = solver["pyomo_solver"]
        if not isinstance(value, str):
            bad("solver.pyomo_solver", f"must be a string, got {_kind(value)}")
        elif value and s.get("backend") is not Backend.PYOMO:
            bad("solver.pyomo_solver", 'is only used with backend = "pyomo" (set it too)')
        else:
            s["pyomo_solver"] = value
    if problems:
        raise ProfileError(problems)
    return Profile(
        weights=ProfileWeights(**w, energy_basis=basis),
        solver=ProfileSolver(**{k: v for k, v in s.items() if v is not None}),
        fairness=fairness,
        source=source,
        tuning=tuning,
        carbon=carbon,
    )


def _fairness(table: Mapping[str, Any], bad: Any) -> ProfileFairness:
    """The [fairness] table's values (each bad one reported)."""
    out: dict[str, Any] = {}
    for key, parse in (("mode", parse_fairness_mode), ("scope", parse_fairness_scope)):
        if key not in table:
            continue
        value = table[key]
        if not isinstance(value, str):
            bad(f"fairness.{key}", f"must be a string, got {_kind(value)}")
            continue
        try:
            out[key] = parse(value)
        except ValueError as e:
            bad(f"fairness.{key}", str(e))
    if "horizon" in table:
        horizon = _duration("fairness.horizon", table["horizon"], bad)
        if horizon is not None and horizon > MAX_FAIRNESS_HORIZON_SECONDS:
            bad("fairness.horizon", f"must be at most a week, got {horizon:g} s")
        elif horizon is not None:
            out["horizon_seconds"] = horizon
    mean = _number("fairness.mean_weight", table.get("mean_weight", 0.0), bad)
    if mean is not None and not 0 <= mean <= MAX_FAIRNESS_MEAN_WEIGHT:
        bad("fairness.mean_weight", f"must be in [0, {MAX_FAIRNESS_MEAN_WEIGHT:g}], got {mean:g}")
    elif "mean_weight" in table:
        out["mean_weight"] = mean
    return ProfileFairness(**out)


def solver_settings(
    profile: Profile | None, environ: Mapping[str, str] | None = None
) -> SolverSettings:
    """The solver's settings: the defaults, the profile's [tuning] table, then the
    DSFRO_TUNING_* variables (SettingsError names a bad one)."""
    table = profile.tuning if profile is not None else {}
    source = profile.source if profile is not None and profile.source else "profile"
    return load_settings(table, source=source, environ=environ)


def _table(
    data: Mapping[str, Any], name: str, keys: tuple[str, ...], bad: Any, hint: str = ""
) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        bad(name, f"must be a table ([{name}]), got {_kind(table)}")
        return {}
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in keys:
            out[key] = value
        else:
            bad(f"{name}.{key}", f"unknown key; [{name}] takes {hint or ', '.join(keys)}")
    return out


def _kind(value: Any) -> str:
    """A TOML type name for messages."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _number(key: str, value: Any, bad: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        bad(key, f"must be a number, got {_kind(value)}")
        return None
    if not math.isfinite(value):
        bad(key, f"must be finite, got {value}")
        return None
    return float(value)


def _integer(key: str, value: Any, low: int, high: int, bad: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        bad(key, f"must be an integer, got {_kind(value)}")
        return None
    if not low <= value <= high:
        bad(key, f"must be in [{low}, {high}], got {value}")
        return None
    return value


def _duration(key: str, value: Any, bad: Any) -> float | None:
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as e:
            bad(key, str(e))
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        bad(key, f'must be a duration such as "5s" or a number of seconds, got {_kind(value)}')
        return None
    if not (math.isfinite(value) and value > 0):
        bad(key, f"must be a positive number of seconds, got {value}")
        return None
    return float(value)


# ---------------------------------------------------------------- use


def apply_profile(request: pb.SolveRequest, profile: Profile) -> None:
    """Set the request's unset weights and options from the profile (in place).

    Fields the request sets win. Weights and the time budget have presence on the wire; the
    other options count as unset at their zero value (BACKEND_UNSPECIFIED, 0, "").
    """
    w = request.weights
    for key in WEIGHT_KEYS:
        value = getattr(profile.weights, key)
        if value is not None and not w.HasField(key):
            setattr(w, key, value)
    apply_energy_basis(request, profile.weights.energy_basis)
    f, fr = profile.fairness, request.fairness
    if f.mode is not None and fr.mode == pb.FAIRNESS_MODE_UNSPECIFIED:
        fr.mode = cast("pb.FairnessMode", pb.FairnessMode.Value(wire_name(f.mode)))
    if f.scope is not None and fr.scope == pb.FAIRNESS_SCOPE_UNSPECIFIED:
        fr.scope = cast("pb.FairnessScope", pb.FairnessScope.Value(wire_name(f.scope)))
    if f.horizon_seconds is not None and not fr.HasField("horizon"):
        fr.horizon.FromNanoseconds(round(f.horizon_seconds * 1e9))
    if f.mean_weight is not None and fr.mean_weight == 0:
        fr.mean_weight = f.mean_weight
    s = profile.solver
    o = request.options
    if s.time_budget_seconds is not None and not o.HasField("time_budget"):
        o.time_budget.FromNanoseconds(round(s.time_budget_seconds * 1e9))
    if s.backend is not None and o.backend == pb.BACKEND_UNSPECIFIED:
        o.backend = backend_to_proto(s.backend)
    if s.relative_gap is not None and o.relative_gap == 0:
        o.relative_gap = s.relative_gap
    if s.threads is not None and o.threads == 0:
        o.threads = s.threads
    if s.seed is not None and o.seed == 0:
        o.seed = s.seed
    if s.pyomo_solver is not None and not o.pyomo_solver:
        o.pyomo_solver = s.pyomo_solver
    carbons.apply_carbon(request, profile.carbon)


def format_profile(profile: Profile) -> str:
    """The effective values as TOML (loadable again), defaults marked in comments."""
    lines = [f"# effective profile of {profile.source or '(none)'}"]
    lines.append("# keys marked 'default' are not set in the file")
    lines.append("")
    lines.append("[weights]")
    eff_w = profile.effective_weights()
    for key in WEIGHT_KEYS:
        value = getattr(eff_w, key)
        comment = "  # default" if getattr(profile.weights, key) is None else ""
        lines.append(f"{key} = {float(value)!r}{comment}")
    lines.append(format_energy_basis(profile.weights.energy_basis))
    lines.extend(("", "[fairness]"))
    f, d = profile.fairness, Fairness()
    mode = f'mode = "{(f.mode or d.mode).name.lower()}"'
    lines.append(mode + ("  # default" if f.mode is None else ""))
    lines.append(
        f'scope = "{(f.scope or d.scope).name.lower()}"'
        + ("  # default" if f.scope is None else "")
    )
    horizon = f.horizon_seconds if f.horizon_seconds is not None else d.horizon_seconds
    lines.append(
        f'horizon = "{format_duration(horizon)}"'
        + ("  # default" if f.horizon_seconds is None else "")
    )
    mean = f.mean_weight if f.mean_weight is not None else d.mean_weight
    lines.append(f"mean_weight = {mean!r}" + ("  # default" if f.mean_weight is None else ""))
    lines.extend(("", "[solver]"))
    eff = profile.effective_options()
    s = profile.solver
    notes = {
        "time_budget": "  # default (the server's default time budget)",
        "threads": "  # default: 0 = the server's default (all cores)",
        "pyomo_solver": '  # default: "" = appsi_highs with backend pyomo',
    }
    values = {
        "time_budget": (s.time_budget_seconds, f'"{format_duration(eff.time_budget_seconds)}"'),
        "backend": (s.backend, f'"{eff.backend.name.lower()}"'),
        "relative_gap": (s.relative_gap, repr(float(eff.relative_gap))),
        "threads": (s.threads, str(eff.threads)),
        "seed": (s.seed, str(eff.seed)),
        "pyomo_solver": (s.pyomo_solver, f'"{eff.pyomo_solver}"'),
    }
    for key in SOLVER_KEYS:
        set_value, text = values[key]
        comment = "" if set_value is not None else notes.get(key, "  # default")
        lines.append(f"{key} = {text}{comment}")
    lines.extend(carbons.format_carbon(profile.carbon))
    lines.append("")
    lines.append(f"[{TUNING}]")
    settings = load_settings(profile.tuning, source=profile.source or "profile", environ={})
    for key in SolverSettings.model_fields:
        value = getattr(settings, key)
        text = f'"{value}"' if isinstance(value, str) else repr(value)
        if isinstance(value, bool):  # (TOML's true and false)
            text = str(value).lower()
        comment = "" if key in profile.tuning else "  # default"
        lines.append(f"{key} = {text}{comment}")
    return "\n".join(lines) + "\n"
