"""The default scenarios (docs/simulation.md, "Default scenarios"), by name, and the writer of
their files: the checked-in copies in ``instances/sim`` come from
``python -m solver.simulate.scenarios``."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from solver import resources
from solver.offline.generate.spec import NodeKind
from solver.simulate.core import PowerSchedule
from solver.simulate.gavel_trace import GAVEL_PHYSICAL_TRACE, gavel_trace
from solver.simulate.grid import load_grid
from solver.simulate.llm import llm_trace
from solver.simulate.mig_scenario import contended_mig_scenario, mig_scenario
from solver.simulate.philly import philly_trace
from solver.simulate.policies.gavel import GAVEL_ROUND_S
from solver.simulate.scenario import (
    LLM_NODES,
    LLM_REFERENCE,
    PHILLY_BUDGET,
    PHILLY_COUNT,
    PHILLY_NODES,
    PHILLY_REFERENCE,
    PHILLY_START,
    PHILLY_WINDOW,
    POWER_HEADROOM,
    Scenario,
    build_cluster,
    checked_scenario,
    daily_budget,
    write_cluster,
    write_power_schedule,
)
from solver.simulate.settings import EngineSettings
from solver.simulate.tenants_scenario import tenants_scenario
from solver.simulate.trace import write_trace
from solver.simulate.truth import TruthSettings
from solver.simulate.workload import WorkloadMix


def scenario_philly(seed: int = 0) -> Scenario:
    """(a) 1,100 Philly jobs on 512 GPUs of four types under a day/peak power budget. The trace
    is the same for every seed (it is the real one); the seed draws the jobs' workloads."""
    cluster = build_cluster(PHILLY_NODES)
    power = daily_budget(cluster, PHILLY_BUDGET)
    cluster.power_budget_watts = power.steps[0].watts or 0.0
    jobs = philly_trace(PHILLY_WINDOW, start=PHILLY_START, count=PHILLY_COUNT)
    scenario = Scenario(
        "philly-a",
        cluster,
        power,
        tuple(jobs),
        WorkloadMix(seed=seed),
        EngineSettings(reference_gpu_type=PHILLY_REFERENCE, power_headroom=POWER_HEADROOM),
    )
    return checked_scenario(scenario, str(PHILLY_WINDOW))


def scenario_llm(seed: int = 0) -> Scenario:
    """(b) A synthetic trace from Acme Kalos's published statistics (``llm``) on 2,048 GPUs, no
    power budget. The seed draws the trace."""
    cluster = build_cluster(LLM_NODES)
    jobs = llm_trace(seed, cluster)
    scenario = Scenario(
        "llm-b",
        cluster,
        PowerSchedule(),
        tuple(jobs),
        WorkloadMix(seed=seed),
        EngineSettings(reference_gpu_type=LLM_REFERENCE, power_headroom=POWER_HEADROOM),
    )
    return checked_scenario(scenario, "llm-b.csv")


GAVEL_NODES = (
    NodeKind("V100-16GB", 4, 2.0, nodes_per_rack=2),
    NodeKind("P100-16GB", 4, 4.0, nodes_per_rack=4),
    NodeKind("K80", 4, 6.0, nodes_per_rack=6),
)
"""Gavel's physical cluster: 8 V100, 16 P100, 24 K80 (OSDI'20, section 7.1), in 4-GPU servers,
one rack per type: Gavel's simulator counts GPUs per type, and a job of up to 4 GPUs always
fits a type's rack when that many of its GPUs are free."""


def scenario_gavel_physical(seed: int = 0) -> Scenario:
    """Gavel's physical-cluster trace (96 jobs) on its 48 GPUs with Gavel's simulator's rules:
    fixed 360 s rounds, Gavel's measured throughputs in steps/s as the truth (no error, no
    round noise: Gavel's simulator runs at its oracle throughputs), no power budget. The
    restart cost stays the engine's (a physical cost); ``--no-restart-cost`` removes it, as
    Gavel's simulator has none. The seed changes nothing but the policies' own seeds."""
    cluster = build_cluster(GAVEL_NODES)
    scenario = Scenario(
        "gavel-physical",
        cluster,
        PowerSchedule(),
        tuple(gavel_trace(GAVEL_PHYSICAL_TRACE)),
        WorkloadMix(seed=seed, gavel_steps=True),
        EngineSettings(
            round_interval_s=GAVEL_ROUND_S,
            fixed_rounds=True,
            reference_gpu_type="V100-16GB",
            truth=TruthSettings(throughput_sigma=0.0, power_sigma=0.0, round_sigma=0.0),
        ),
    )
    return checked_scenario(scenario, str(GAVEL_PHYSICAL_TRACE))


CARBON_JOBS = 300
CARBON_SLACK = 2.0
"""Deadlines at twice each job's duration on its requested GPUs (a scenario assumption: the
Philly trace has no deadlines), so a job may wait up to about its own run time."""
CARBON_GRID = ("grid/gb-2020-hourly.csv", "2020-01-06T00:00:00")
"""Great Britain's measured hourly carbon intensity from the first Monday of 2020
(data/grid/SOURCE.md)."""


def scenario_carbon(seed: int = 0) -> Scenario:
    """(e) ``carbon-a``: ``philly-a``'s first 300 jobs, each with a deadline of twice its duration,
    on ``philly-a``'s cluster and budget, under Great Britain's grid (docs/carbon.md)."""
    philly = scenario_philly(seed)
    jobs = tuple(
        replace(j, deadline_s=float(round(CARBON_SLACK * j.duration_s)))
        for j in philly.jobs[:CARBON_JOBS]
    )
    path, start = CARBON_GRID
    grid = load_grid(resources.data_dir() / path, start, days=60)
    settings = replace(philly.settings, grid=grid)
    return replace(philly, name="carbon-a", jobs=jobs, settings=settings)


def scenario_tenants(seed: int = 0) -> Scenario:
    """(d) ``tenants-a``: Philly jobs of six tenant queues sharing 128 GPUs in one cohort
    (``solver.simulate.tenants_scenario``)."""
    return tenants_scenario(seed)


DEFAULT_SCENARIOS = {
    "philly-a": scenario_philly,
    "llm-b": scenario_llm,
    "gavel-physical": scenario_gavel_physical,
    "tenants-a": scenario_tenants,
    "mig-a": mig_scenario,
    "mig-b": contended_mig_scenario,
    "carbon-a": scenario_carbon,
}


def write_default_scenarios(out_dir: str | Path, seed: int = 0) -> list[Path]:
    """Write the default scenarios (trace, cluster, power schedule) into ``out_dir``; the
    paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for build in DEFAULT_SCENARIOS.values():
        s = build(seed)
        trace = out / f"{s.name}.csv"
        write_trace(s.jobs, trace)
        write_cluster(s.cluster, out / f"{s.name}-cluster.json")
        write_power_schedule(s.power, out / f"{s.name}-power.json")
        written += [trace, out / f"{s.name}-cluster.json", out / f"{s.name}-power.json"]
    return written


def main(argv: list[str]) -> int:
    """``python -m solver.simulate.scenarios [OUT_DIR]``: write the default scenarios' files
    (default: ``instances/sim`` of the source checkout)."""
    root = resources.source_checkout()
    if len(argv) > 1 or (not argv and root is None):
        print(main.__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0]) if argv else Path(str(root)) / "instances" / "sim"
    for path in write_default_scenarios(out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
