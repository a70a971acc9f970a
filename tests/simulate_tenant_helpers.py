"""Tiny multi-tenant simulations (tests/test_simulate_tenants.py, the kueue and themis tests):
one GPU type G on 2-GPU nodes, jobs measured at 10 samples/s per GPU, tenant queues."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.pipeline import to_problem
from solver.domain import ProfilePoint, ThroughputProfile
from solver.simulate.core import (
    Decision,
    JobHistory,
    Policy,
    RoundInput,
    SimJob,
    SimulationLog,
    TraceJob,
)
from solver.simulate.engine import Simulation
from solver.simulate.settings import EngineSettings
from solver.simulate.truth import TruthSettings

EXACT = TruthSettings(throughput_sigma=0.0, power_sigma=0.0, round_sigma=0.0)


def queue(
    name: str,
    nominal: float,
    *,
    cohort: str = "",
    weight: float | None = None,
    borrowing: float | None = None,
    lending: float | None = None,
) -> pb.TenantQueue:
    q = pb.TenantQueue(name=name, cohort=cohort)
    if weight is not None:
        q.weight = weight
    quota = q.quotas.add(resource="G", nominal=nominal)
    if borrowing is not None:
        quota.borrowing_limit = borrowing
    if lending is not None:
        quota.lending_limit = lending
    return q


def tenant_cluster(nodes: int, *queues: pb.TenantQueue) -> pb.ClusterSnapshot:
    c = pb.ClusterSnapshot(
        gpu_types=[
            pb.GpuType(
                name="G", memory_gib=80, peak_tflops=100, memory_bandwidth_gbps=1000,
                intra_node_bandwidth_gbps=300, tdp_watts=300, idle_watts=50.0,
                sm_clocks_mhz=[1000],
            )
        ],
        nodes=[
            pb.Node(name=f"n{i}", gpu_type="G", gpu_count=2, rack="r0", network_bandwidth_gbps=100)
            for i in range(nodes)
        ],
    )  # fmt: skip
    c.queues.extend(queues)
    return c


def job(name: str, tenant: str, submit: float, duration: float, gpus: int = 1) -> SimJob:
    """Measured at 10 samples/s and 100 W per GPU, on 1 to 4 GPUs (its truth with EXACT)."""
    points = tuple(ProfilePoint("G", n, 1, 1, 1000, 10.0 * n, 100.0 * n, 10.0) for n in (1, 2, 4))
    trace = TraceJob(name, submit, tenant, "measured", gpus, duration)
    return SimJob(trace, ThroughputProfile(points), "measured", gpus, gpus, measured=True)


class Recorder:
    """A policy that records every round's input and asks `inner`."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.rounds: list[RoundInput] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, r: RoundInput) -> Decision:
        self.rounds.append(r)
        return self.inner.decide(r)

    def close(self) -> None:
        self.inner.close()


def simulate(
    cluster: pb.ClusterSnapshot, jobs: Sequence[SimJob], policy: Policy, **settings: Any
) -> SimulationLog:
    s = dataclasses.replace(EngineSettings(truth=EXACT, reference_gpu_type="G"), **settings)
    return Simulation(cluster, jobs, policy, settings=s, seed=1).run()


def starts(log: SimulationLog) -> Mapping[str, tuple[float | None, float | None]]:
    return {j.job_id: (j.first_start_s, j.finish_s) for j in log.jobs}


def waiting(name: str, tenant: str, submit: float, gpus: int = 1) -> tuple[str, str, float, int]:
    return (name, tenant, submit, gpus)


def round_input(
    cluster: pb.ClusterSnapshot,
    jobs: Sequence[tuple[str, str, float, int]],
    current: Mapping[str, tuple[str, Sequence[int]]] = {},
    *,
    now: float = 100.0,
    remaining: Mapping[str, float] = {},
    attained: Mapping[str, float] = {},
) -> RoundInput:
    """A round of measured jobs (10 samples/s per GPU) of (name, tenant, submit, GPUs), those in
    `current` running on (node, GPU indices); `remaining` samples (default 1000) and attained
    normalized seconds per job."""
    req = pb.SolveRequest(cluster=cluster)
    req.options.time_budget.FromSeconds(10)
    history = {}
    for name, tenant, submit, gpus in jobs:
        j = req.jobs.add(name=name, tenant=tenant, min_gpus=gpus, max_gpus=gpus)
        j.remaining_samples = remaining.get(name, 1000.0)
        j.attained.normalized_seconds = attained.get(name, 0.0)
        for n in (1, 2, 4):
            j.profile.points.add(
                gpu_type="G", num_gpus=n, tensor_parallel=1, pipeline_parallel=1,
                sm_clock_mhz=1000, samples_per_second=10.0 * n, watts=100.0 * n,
                memory_per_gpu_gib=10,
            )  # fmt: skip
        if name in current:
            node, gpu_indices = current[name]
            j.current_allocation.CopyFrom(
                pb.Allocation(
                    gpu_type="G", data_parallel=len(gpu_indices), tensor_parallel=1,
                    pipeline_parallel=1, sm_clock_mhz=1000,
                    placement=[pb.GpuSlice(node=node, gpu_indices=list(gpu_indices))],
                )
            )  # fmt: skip
        history[name] = JobHistory(submit, gpus)
    return RoundInput(req, to_problem(req, Limits()), now, 1, history, 300.0)


def gpus_held(d: Decision) -> dict[str, int]:
    return {k: a.shape.num_gpus for k, a in d.allocations.items()}
