"""What a caller imposes over a request: a profile's defaults for the fields it leaves unset,
then overrides (command-line flags, a batch's or a sweep's grid point) that win over both.

Light on purpose: ``dsfro solve --server`` applies its flags with the client install.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import backend_to_proto, energy_basis_to_proto, wire_name
from solver.domain import Backend, EnergyBasis, FairnessMode, FairnessScope
from solver.wire import duration_to_proto

if TYPE_CHECKING:
    from solver.app.profile import Profile


@dataclass(frozen=True)
class Overrides:
    """Settings a caller imposes over the request and its profile; None: leave as is."""

    time_budget_seconds: float | None = None
    backend: Backend | None = None
    seed: int | None = None
    threads: int | None = None
    pyomo_solver: str | None = None
    weights: Mapping[str, float] = field(default_factory=dict)
    """Objective weights by name (throughput, energy, ..., fairness)."""
    energy_basis: EnergyBasis | None = None
    """What the energy weight charges (docs/objective.md, "Energy basis")."""
    fairness_mode: FairnessMode | None = None
    fairness_scope: FairnessScope | None = None
    fairness_horizon_seconds: float | None = None
    fairness_mean_weight: float | None = None


NO_OVERRIDES = Overrides()


def prepare(
    request: pb.SolveRequest,
    profile: Profile | None = None,
    overrides: Overrides = NO_OVERRIDES,
) -> pb.SolveRequest:
    """A copy of the request with the profile filling its unset fields, then the overrides."""
    out = pb.SolveRequest()
    out.CopyFrom(request)
    if profile is not None:
        from solver.app.profile import apply_profile  # the solver's settings: server install

        apply_profile(out, profile)
    o = out.options
    if overrides.time_budget_seconds is not None:
        o.time_budget.CopyFrom(duration_to_proto(overrides.time_budget_seconds))
    if overrides.backend is not None:
        o.backend = backend_to_proto(overrides.backend)
    if overrides.seed is not None:
        o.seed = overrides.seed
    if overrides.threads is not None:
        o.threads = overrides.threads
    if overrides.pyomo_solver is not None:
        o.pyomo_solver = overrides.pyomo_solver
    for name, value in overrides.weights.items():
        setattr(out.weights, name, value)
    if overrides.energy_basis is not None:
        out.weights.energy_basis = energy_basis_to_proto(overrides.energy_basis)
    f = out.fairness
    if overrides.fairness_mode is not None:
        f.mode = cast("pb.FairnessMode", pb.FairnessMode.Value(wire_name(overrides.fairness_mode)))
    if overrides.fairness_scope is not None:
        f.scope = cast(
            "pb.FairnessScope", pb.FairnessScope.Value(wire_name(overrides.fairness_scope))
        )
    if overrides.fairness_horizon_seconds is not None:
        f.horizon.CopyFrom(duration_to_proto(overrides.fairness_horizon_seconds))
    if overrides.fairness_mean_weight is not None:
        f.mean_weight = overrides.fairness_mean_weight
    return out
