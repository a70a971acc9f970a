"""Tiny multi-tenant simulations (tests/test_simulate_tenants.py, the kueue and themis tests):
one GPU type G on 2-GPU nodes, jobs measured at 10 samples/s per GPU, tenant queues."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import ProfilePoint, ThroughputProfile
from solver.simulate.core import Decision, Policy, RoundInput, SimJob, SimulationLog, TraceJob
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
