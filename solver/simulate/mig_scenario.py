"""The small-job scenario ``mig-a`` (docs/simulation.md, "(e) mig-a"): Philly jobs on MIG-capable
GPUs, every one-GPU job a small job that may run on a MIG instance.

- **Jobs**: jobs 300 to 459 of the bundled Philly window (the start of ``tenants-a``'s), real
  and unchanged but for two columns: each one-GPU job may use slices (``slices``) and trains
  one of the catalog's small models (class ``small``: bert-large, gpt3-1.3b, gpt2-xl, the
  architectures below 2 billion parameters; Philly's one-GPU jobs of 2017 were small networks);
  the others keep the ``philly`` class. Its fraction of a GPU comes from Gavel's colocation
  measurements (``solver.simulate.slicing``).
- **Cluster**: 32 GPUs, two 8-GPU A100-80GB and two 8-GPU H100-80GB servers (MIG types of the
  catalog with the performance model's figures). Reference type A100-80GB. No power budget.
- **Size**: the solver's time per round is 0.5 s (``SOLVER_BUDGET_S``) so that a comparison of
  three policies for one seed runs in minutes on one core.
"""

from __future__ import annotations

import dataclasses

from solver.offline.generate.spec import NodeKind
from solver.simulate.core import PowerSchedule, TraceJob
from solver.simulate.philly import philly_trace
from solver.simulate.scenario import PHILLY_WINDOW, Scenario, build_cluster, checked_scenario
from solver.simulate.settings import EngineSettings
from solver.simulate.workload import WorkloadClass, WorkloadMix

MIG_START = 300
MIG_COUNT = 160
"""Jobs 300 to 459 of the bundled Philly window: 5.7 hours of submissions, 136 one-GPU jobs
and 24 of 2 to 8 GPUs, 2,041 GPU-hours, the longest 68 hours."""
MIG_NODES = (NodeKind("A100-80GB", 8, 2.0), NodeKind("H100-80GB", 8, 2.0))
CONTENDED_NODES = (NodeKind("A100-80GB", 8, 1.0), NodeKind("H100-80GB", 8, 1.0))
"""``mig-b``: one server of each type, so the same jobs find twice the load and small jobs
wait for GPUs (in ``mig-a`` they never do)."""
MIG_REFERENCE = "A100-80GB"
SMALL = "small"
SMALL_MODELS = ("bert-large", "gpt2-xl", "gpt3-1.3b")
SOLVER_BUDGET_S = 0.5


def small_jobs(jobs: list[TraceJob]) -> list[TraceJob]:
    """Every one-GPU job a small job: it may use slices and trains a small model."""
    return [
        dataclasses.replace(j, slices=True, workload=SMALL) if j.num_gpus == 1 else j for j in jobs
    ]


def mig_mix(seed: int) -> WorkloadMix:
    """The default ``philly`` class and the small models' class."""
    return WorkloadMix(
        seed=seed,
        classes={"philly": WorkloadClass(), SMALL: WorkloadClass(SMALL_MODELS, 0.0)},
    )


def mig_scenario(seed: int = 0) -> Scenario:
    """(e) 160 Philly jobs, 136 of them small and allowed slices, on 32 MIG-capable GPUs. The
    trace is the same for every seed; the seed draws the workloads and the GPU fractions."""
    return _small_job_scenario("mig-a", MIG_NODES, seed)


def contended_mig_scenario(seed: int = 0) -> Scenario:
    """(f) The jobs of ``mig-a`` on 16 GPUs: small jobs queue for GPUs, where slices can help."""
    return _small_job_scenario("mig-b", CONTENDED_NODES, seed)


def _small_job_scenario(name: str, nodes: tuple[NodeKind, ...], seed: int) -> Scenario:
    cluster = build_cluster(nodes)
    jobs = small_jobs(philly_trace(PHILLY_WINDOW, start=MIG_START, count=MIG_COUNT))
    scenario = Scenario(
        name,
        cluster,
        PowerSchedule(),
        tuple(jobs),
        mig_mix(seed),
        EngineSettings(reference_gpu_type=MIG_REFERENCE, solver_budget_s=SOLVER_BUDGET_S),
    )
    return checked_scenario(scenario, str(PHILLY_WINDOW))
