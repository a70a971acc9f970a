"""The default multi-tenant scenario ``tenants-a`` (docs/simulation.md, "(c) tenants-a"): 300
Philly jobs of ten virtual clusters, the five with the most GPU-hours as tenant queues of their
own and the other five as one, on 128 GPUs whose quotas the six queues share in one cohort.

The quotas and weights are assumptions of the scenario, not the trace's (Philly's virtual
clusters had quotas, the trace does not give them): weights 3, 2, 2, 1, 1, 1 by GPU-hours
offered, and each GPU type's GPUs split in proportion to the weights (largest remainder), so the
nominal quotas add up to the cluster. The largest tenant may borrow at most 16 GPUs of a type
above its nominal quota; the merged small tenants lend at most 1 GPU of each type of theirs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.offline.generate.spec import NodeKind
from solver.simulate.core import PowerSchedule, TraceJob
from solver.simulate.philly import philly_trace
from solver.simulate.scenario import (
    PHILLY_REFERENCE,
    PHILLY_WINDOW,
    POWER_HEADROOM,
    Scenario,
    build_cluster,
    checked_scenario,
)
from solver.simulate.settings import EngineSettings
from solver.simulate.workload import WorkloadMix

TENANTS_START = 300
TENANTS_COUNT = 300
"""Jobs 300 to 599 of the bundled Philly window (the window's second 300): 10.8 hours of
submissions, 5,836 GPU-hours, 1 to 16 GPUs per job, ten virtual clusters."""
TENANTS_NODES = (
    NodeKind("A100-80GB", 8, 4.0),
    NodeKind("P100-16GB", 8, 4.0),
    NodeKind("T4", 4, 8.0, nodes_per_rack=16),
    NodeKind("V100-16GB", 8, 4.0),
)
"""128 GPUs, 32 of each of philly-a's four types (a quarter of its cluster)."""
TENANT_WEIGHTS = (3.0, 2.0, 2.0, 1.0, 1.0, 1.0)
"""Weights of the queues, the tenant with the most GPU-hours first; the last is ``OTHER``."""
OTHER = "vc-other"
"""The queue of the virtual clusters beyond the five with the most GPU-hours."""
COHORT = "philly"
LARGEST_BORROWING_LIMIT = 16.0
OTHER_LENDING_LIMIT = 1.0


def tenant_jobs(jobs: Sequence[TraceJob], queues: int) -> tuple[list[TraceJob], list[str]]:
    """The jobs with the `queues - 1` tenants of most GPU-hours (ties by name) kept and the
    others renamed ``OTHER``; the queue names, most GPU-hours first, ``OTHER`` last."""
    hours: dict[str, float] = {}
    for j in jobs:
        hours[j.tenant] = hours.get(j.tenant, 0.0) + j.num_gpus * j.duration_s
    kept = sorted(hours, key=lambda t: (-hours[t], t))[: queues - 1]
    out = [j if j.tenant in kept else dataclasses.replace(j, tenant=OTHER) for j in jobs]
    return out, [*kept, OTHER]


def split(total: int, weights: Sequence[float]) -> list[int]:
    """`total` in integers proportional to `weights`, by largest remainder (ties: first)."""
    exact = [total * w / sum(weights) for w in weights]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def tenant_queues(cluster: pb.ClusterSnapshot, names: Sequence[str]) -> list[pb.TenantQueue]:
    """The scenario's queues (module docstring) over the cluster's GPU types."""
    pools: dict[str, int] = {}
    for n in cluster.nodes:
        pools[n.gpu_type] = pools.get(n.gpu_type, 0) + n.gpu_count
    shares = {t: split(g, TENANT_WEIGHTS) for t, g in sorted(pools.items())}
    out = []
    for i, (name, weight) in enumerate(zip(names, TENANT_WEIGHTS, strict=True)):
        q = pb.TenantQueue(name=name, cohort=COHORT, weight=weight)
        for t, nominal in shares.items():
            quota = q.quotas.add(resource=t, nominal=nominal[i])
            if i == 0:
                quota.borrowing_limit = LARGEST_BORROWING_LIMIT
            if name == OTHER:
                quota.lending_limit = min(OTHER_LENDING_LIMIT, nominal[i])
        out.append(q)
    return out


def tenants_scenario(seed: int = 0) -> Scenario:
    """(d) 300 Philly jobs of six tenant queues of unequal weight and quota on 128 GPUs, no
    power budget. The trace is the same for every seed; the seed draws the workloads."""
    cluster = build_cluster(TENANTS_NODES)
    raw = philly_trace(PHILLY_WINDOW, start=TENANTS_START, count=TENANTS_COUNT)
    jobs, names = tenant_jobs(raw, len(TENANT_WEIGHTS))
    cluster.queues.extend(tenant_queues(cluster, names))
    scenario = Scenario(
        "tenants-a",
        cluster,
        PowerSchedule(),
        tuple(jobs),
        WorkloadMix(seed=seed),
        EngineSettings(reference_gpu_type=PHILLY_REFERENCE, power_headroom=POWER_HEADROOM),
    )
    return checked_scenario(scenario, str(PHILLY_WINDOW))
