"""Shared fixtures: a small valid SolveRequest and a real gRPC server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver._proto.dsfro.v1 import scheduler_pb2_grpc

if TYPE_CHECKING:  # imported lazily: validation tests must not need the solver modules
    from solver.api.service import SchedulerServer

A100 = "A100-80GB"
H100 = "H100-SXM"


def make_request() -> pb.SolveRequest:
    """Two 8-GPU A100 nodes plus a 4-GPU node of a second type (H100), and three jobs.

    ``llm`` is sized by a ModelSpec, ``bert`` by a ThroughputProfile (A100 only), and
    ``resnet`` (profiled on both types) already runs on GPUs 0-3 of ``a100-0``.
    """
    req = pb.SolveRequest()
    c = req.cluster
    c.gpu_types.add(
        name=A100, memory_gib=80, peak_tflops=312, memory_bandwidth_gbps=2039,
        intra_node_bandwidth_gbps=600, tdp_watts=400, idle_watts=50,
        sm_clocks_mhz=[1410, 1275, 1110, 960],
    )
    c.gpu_types.add(
        name=H100, memory_gib=80, peak_tflops=989, memory_bandwidth_gbps=3350,
        intra_node_bandwidth_gbps=900, tdp_watts=700, idle_watts=70,
        sm_clocks_mhz=[1980, 1755, 1530, 1275],
    )
    c.nodes.add(name="a100-0", gpu_type=A100, gpu_count=8, rack="r1",
                network_bandwidth_gbps=200)
    c.nodes.add(name="a100-1", gpu_type=A100, gpu_count=8, unavailable_gpu_indices=[7],
                rack="r1", network_bandwidth_gbps=200)
    c.nodes.add(name="h100-0", gpu_type=H100, gpu_count=4, rack="r2",
                network_bandwidth_gbps=400)
    c.power_budget_watts = 12000
    c.rack_power_budgets.add(rack="r1", watts=8000)

    llm = req.jobs.add(name="llm", tenant="research", min_gpus=1, max_gpus=8)
    llm.model.CopyFrom(pb.ModelSpec(
        parameters=1.3e9, layers=24, hidden_size=2048, attention_heads=16,
        sequence_length=2048, global_batch_size=64,
    ))

    bert = req.jobs.add(name="bert", tenant="nlp", weight=2.0, min_gpus=1, max_gpus=4,
                        allowed_gpu_types=[A100])
    for gpus, sps in ((1, 100.0), (2, 190.0), (4, 360.0)):
        for clock, scale in ((1410, 1.0), (1110, 0.85)):
            bert.profile.points.add(
                gpu_type=A100, num_gpus=gpus, tensor_parallel=1, pipeline_parallel=1,
                sm_clock_mhz=clock, samples_per_second=sps * scale,
                watts=gpus * 300 * scale, memory_per_gpu_gib=30,
            )

    resnet = req.jobs.add(name="resnet", tenant="vision", min_gpus=2, max_gpus=4,
                          remaining_samples=1e6)
    resnet.time_to_deadline.FromSeconds(3600)
    for gpu_type, clock, speed in ((A100, 1410, 1.0), (H100, 1980, 2.0)):
        for gpus in (2, 4):
            resnet.profile.points.add(
                gpu_type=gpu_type, num_gpus=gpus, tensor_parallel=1, pipeline_parallel=1,
                sm_clock_mhz=clock, samples_per_second=500 * gpus * speed,
                watts=gpus * 350 * speed, memory_per_gpu_gib=20,
            )
    resnet.current_allocation.CopyFrom(pb.Allocation(
        gpu_type=A100, data_parallel=4, tensor_parallel=1, pipeline_parallel=1,
        sm_clock_mhz=1410, placement=[pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3])],
    ))

    req.options.time_budget.FromSeconds(10)
    req.options.seed = 7
    req.options.threads = 1
    return req


@pytest.fixture
def request_msg() -> pb.SolveRequest:
    return make_request()


@pytest.fixture
def server() -> Iterator[SchedulerServer]:
    """A real server on an ephemeral loopback port, stopped after the test."""
    from solver.api.service import ServerConfig, build_server

    srv = build_server(ServerConfig(host="127.0.0.1", port=0))
    srv.start()
    yield srv
    srv.stop(grace=None).wait(10)


@pytest.fixture
def channel(server: SchedulerServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


@pytest.fixture
def stub(channel: grpc.Channel) -> scheduler_pb2_grpc.SchedulerServiceStub:
    return scheduler_pb2_grpc.SchedulerServiceStub(channel)
