"""Helpers of the node power-saving engine tests (tests/test_simulate_power_saving_engine.py):
the short run whose records with the rule off must equal those recorded before the rule was
wired in (tests/data/simulate/power-saving-off-golden.json), and the records as JSON data."""

from __future__ import annotations

import dataclasses
from typing import Any

from solver.simulate.core import SimulationLog
from solver.simulate.engine import Simulation
from solver.simulate.policies import make_policy
from solver.simulate.settings import EngineSettings
from tests.test_simulate_engine import _model_jobs, two_gpu_cluster

GOLDEN_POLICIES = ("fifo", "gavel", "dsfro-heuristic")


def short_run(policy: str, settings: EngineSettings | None = None) -> SimulationLog:
    """Eight model jobs on three two-GPU nodes under a binding budget (as the engine's
    invariant test), seed 3."""
    cluster = two_gpu_cluster(budget=900.0, nodes=3)
    cluster.gpu_types[0].sm_clocks_mhz.extend([800, 600])
    s = settings or EngineSettings(reference_gpu_type="G", solver_budget_s=1.0, power_headroom=0.05)
    return Simulation(cluster, _model_jobs(8), make_policy(policy), settings=s, seed=3).run()


def records(log: SimulationLog) -> dict[str, Any]:
    """The run's jobs, rounds (without their wall-clock solver time) and power segments, its
    end and idle draw, as JSON data."""
    rounds = [dataclasses.asdict(r) | {"solver_seconds": None} for r in log.rounds]
    for r in rounds:
        r["tenant_shares"] = {k: list(v) for k, v in r["tenant_shares"].items()}
    return {
        "jobs": [dataclasses.asdict(j) for j in log.jobs],
        "rounds": rounds,
        "power": [dataclasses.asdict(p) for p in log.power],
        "end_s": log.end_s,
        "idle_watts": log.idle_watts,
    }
