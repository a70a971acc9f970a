"""Hand-made rounds for the baseline-policy tests (tests/test_simulate_policies_*.py): clusters
of two GPU types, jobs measured or modelled and their history, and a decision as the
independent checker reads it (configurations, power drawn, GPUs taken)."""

from __future__ import annotations

from collections.abc import Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.pipeline import to_problem
from solver.domain import Config, JobAssignment, JobState, Problem, Shape
from solver.perfmodel.configs import resolve_config
from solver.scoring.checker import PlanViolation, check_plan
from solver.simulate.core import Decision, JobHistory, RoundInput

FAST, SLOW = "FAST", "SLOW"
TOP = {FAST: 1410, SLOW: 1380}
IDLE = {FAST: 50.0, SLOW: 40.0}
LLM = pb.ModelSpec(
    parameters=1.3e9, layers=24, hidden_size=2048, attention_heads=16, sequence_length=2048,
    global_batch_size=64,
)  # fmt: skip
BIG = pb.ModelSpec(
    parameters=6.7e9, layers=32, hidden_size=4096, attention_heads=32, sequence_length=2048,
    global_batch_size=64,
)  # fmt: skip


def cluster(*nodes: tuple[str, str, int], budget: float | None = None) -> pb.SolveRequest:
    """Nodes (name, type, GPUs) of two GPU types: FAST (80 GiB) and SLOW (32 GiB)."""
    req = pb.SolveRequest()
    c = req.cluster
    c.gpu_types.add(
        name=FAST, memory_gib=80, peak_tflops=312, memory_bandwidth_gbps=2039,
        intra_node_bandwidth_gbps=600, tdp_watts=400, idle_watts=IDLE[FAST],
        sm_clocks_mhz=[1410, 1275, 1110, 960],
    )  # fmt: skip
    c.gpu_types.add(
        name=SLOW, memory_gib=32, peak_tflops=125, memory_bandwidth_gbps=900,
        intra_node_bandwidth_gbps=300, tdp_watts=300, idle_watts=IDLE[SLOW],
        sm_clocks_mhz=[1380, 1245],
    )  # fmt: skip
    for name, gpu_type, count in nodes:
        c.nodes.add(
            name=name, gpu_type=gpu_type, gpu_count=count, rack="r0", network_bandwidth_gbps=100
        )
    if budget is not None:
        c.power_budget_watts = budget
    req.options.time_budget.FromSeconds(10)
    return req


def running(
    gpu_type: str, node: str, gpus: Sequence[int], clock: int | None = None
) -> pb.Allocation:
    return pb.Allocation(
        gpu_type=gpu_type, data_parallel=len(gpus), tensor_parallel=1, pipeline_parallel=1,
        sm_clock_mhz=clock or TOP[gpu_type], placement=[pb.GpuSlice(node=node, gpu_indices=gpus)],
    )  # fmt: skip


def profiled(
    req: pb.SolveRequest,
    name: str,
    rates: dict[tuple[str, int], float],
    *,
    watts_per_gpu: float = 300.0,
    min_gpus: int = 1,
    max_gpus: int = 4,
    current: pb.Allocation | None = None,
    preemptible: bool = True,
) -> None:
    """A job measured at the top clock: samples/s per (GPU type, GPU count), data parallel."""
    j = req.jobs.add(name=name, tenant="t", min_gpus=min_gpus, max_gpus=max_gpus)
    j.preemptible = preemptible
    for (gpu_type, n), sps in rates.items():
        j.profile.points.add(
            gpu_type=gpu_type, num_gpus=n, tensor_parallel=1, pipeline_parallel=1,
            sm_clock_mhz=TOP[gpu_type], samples_per_second=sps, watts=watts_per_gpu * n,
            memory_per_gpu_gib=10,
        )  # fmt: skip
    if current is not None:
        j.current_allocation.CopyFrom(current)


def modeled(req: pb.SolveRequest, name: str, spec: pb.ModelSpec, max_gpus: int = 8) -> None:
    j = req.jobs.add(name=name, tenant="t", min_gpus=1, max_gpus=max_gpus)
    j.model.CopyFrom(spec)


def past(
    submit: float, gpus: int, attained: float = 0.0, by_type: dict[str, float] | None = None
) -> JobHistory:
    return JobHistory(submit, gpus, attained, by_type or {})


def round_of(
    req: pb.SolveRequest, history: dict[str, JobHistory], now: float = 100.0
) -> RoundInput:
    return RoundInput(req, problem(req), now, 1, history, 60.0)


def problem(req: pb.SolveRequest) -> Problem:
    return to_problem(req, Limits())


def assignments(req: pb.SolveRequest, d: Decision) -> list[JobAssignment]:
    """The decision as the checker reads it: configurations from resolve_config."""
    p = problem(req)
    out = []
    for j in p.jobs:
        a = d.allocations.get(j.name)
        if a is None:
            out.append(JobAssignment(j.name, JobState.QUEUED))
        else:
            c = resolve_config(p, j, a.shape, a.sm_clock_mhz)
            out.append(JobAssignment(j.name, JobState.RUNNING, c, a.placement))
    return out


def violations(req: pb.SolveRequest, d: Decision) -> list[PlanViolation]:
    return check_plan(problem(req), assignments(req, d))


def draw(req: pb.SolveRequest, d: Decision) -> float:
    """Predicted watts of the plan: running jobs plus every other GPU idle."""
    p = problem(req)
    total = sum(n.gpu_count * IDLE[n.gpu_type] for n in p.cluster.nodes)
    for a in assignments(req, d):
        if a.config is not None:
            total += a.config.watts - a.config.num_gpus * IDLE[a.config.gpu_type]
    return total


def placed(d: Decision) -> dict[str, tuple[str, int]]:
    """Job -> (GPU type, GPUs) of each running job."""
    return {k: (a.shape.gpu_type, a.shape.num_gpus) for k, a in d.allocations.items()}


def gpus_of(d: Decision, job: str) -> list[tuple[str, int]]:
    return sorted((s.node, i) for s in d.allocations[job].placement for i in s.gpu_indices)


def config(req: pb.SolveRequest, job: str, shape: Shape, clock: int) -> Config:
    p = problem(req)
    c = resolve_config(p, next(j for j in p.jobs if j.name == job), shape, clock)
    assert c is not None
    return c
