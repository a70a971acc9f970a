"""Scheduling policies behind one interface (``solver.simulate.core.Policy``), by name.

``make_policy(name, server=..., solver=...)`` builds one; ``POLICY_NAMES`` lists them. Baselines are
documented with their sources in docs/simulation.md; each gets the same ``RoundInput``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace

from solver.client.connection import Connection
from solver.core.solver import Solver
from solver.domain import Backend, Fairness, FairnessMode, FairnessScope
from solver.fairness import LEAST_ROW_MODES
from solver.simulate.core import Policy
from solver.simulate.policies.dsfro import DsfroOptions, DsfroPolicy

_BASELINES: dict[str, tuple[str, str]] = {
    "fifo": ("solver.simulate.policies.fifo", "FifoPolicy"),
    "las": ("solver.simulate.policies.las", "LasPolicy"),
    "gavel": ("solver.simulate.policies.gavel", "GavelPolicy"),
    "gavel-maxmin": ("solver.simulate.policies.gavel", "GavelMaxMinPolicy"),
    "pop-maxmin": ("solver.simulate.policies.pop", "PopMaxMinPolicy"),
    "sia": ("solver.simulate.policies.sia", "SiaPolicy"),
    "zeus": ("solver.simulate.policies.zeus", "ZeusPolicy"),
    "kueue": ("solver.simulate.policies.kueue", "KueuePolicy"),
    "themis": ("solver.simulate.policies.themis", "ThemisPolicy"),
    "static-mig": ("solver.simulate.policies.static_mig", "StaticMigPolicy"),
}

_DSFRO: dict[str, Callable[[str | None], DsfroOptions]] = {
    "dsfro": lambda server: DsfroOptions(server=server),
    "dsfro-no-dvfs": lambda server: DsfroOptions(server=server, dvfs=False),
    "dsfro-fixed-shape": lambda server: DsfroOptions(server=server, adaptive_shape=False),
    "dsfro-heuristic": lambda server: DsfroOptions(server=server, backend=Backend.HEURISTIC),
    "dsfro-whole": lambda server: DsfroOptions(server=server, slices=False),
    "dsfro-carbon-blind": lambda server: DsfroOptions(server=server, carbon=False),
    "dsfro-floor": lambda server: DsfroOptions(server=server, node_floor=True),
    "dsfro-maxmin": lambda server: DsfroOptions(
        server=server, fairness=Fairness(FairnessMode.MAX_MIN, FairnessScope.TENANT)
    ),
    "dsfro-prop": lambda server: DsfroOptions(
        server=server, fairness=Fairness(FairnessMode.PROPORTIONAL, FairnessScope.JOB)
    ),
    "dsfro-drf": lambda server: DsfroOptions(
        server=server, fairness=Fairness(FairnessMode.DRF, FairnessScope.TENANT)
    ),
    "dsfro-ftf": lambda server: DsfroOptions(
        server=server, fairness=Fairness(FairnessMode.FINISH_TIME, FairnessScope.JOB)
    ),
    "dsfro-ftf-tenant": lambda server: DsfroOptions(
        server=server, fairness=Fairness(FairnessMode.FINISH_TIME, FairnessScope.TENANT)
    ),
}

POLICY_NAMES: tuple[str, ...] = (*_BASELINES, *_DSFRO)


def make_policy(
    name: str,
    *,
    server: str | None = None,
    solver: Solver | None = None,
    fairness_mean_weight: float = 0.0,
    connection: Connection | None = None,
) -> Policy:
    """The policy called `name`; DSFRO variants solve over gRPC at `server` when given
    (reached by `connection`: TLS and the token's source; default plaintext, $DSFRO_TOKEN),
    else in this process with `solver` (default settings when None); the least-row fairness
    variants send `fairness_mean_weight` (Fairness.mean_weight). ValueError names the known
    policies."""
    if name in _DSFRO:
        options = _DSFRO[name](server)
        if connection is not None:
            options = replace(options, connection=connection)
        if options.fairness.mode in LEAST_ROW_MODES:
            fair = replace(options.fairness, mean_weight=fairness_mean_weight)
            options = replace(options, fairness=fair)
        return DsfroPolicy(name, options, solver)
    if name in _BASELINES:
        module, cls = _BASELINES[name]
        policy: Policy = getattr(importlib.import_module(module), cls)()
        return policy
    raise ValueError(f"unknown policy {name!r}; one of {', '.join(POLICY_NAMES)}")
