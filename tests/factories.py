"""Helpers shared by the tests: small domain problems and a valid wire ``SolveRequest``.

Backends read the domain, so their tests build problems with ``node``, ``job``, ``problem`` ...;
the service, CLI, validation and conversion tests start from ``make_request()``. Exact solves and
brute-force enumeration live in ``tests/bruteforce.py`` (they load the solvers).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import (
    Allocation,
    Backend,
    Cluster,
    GpuSlice,
    GpuType,
    Job,
    JobAssignment,
    JobState,
    Node,
    ObjectiveBreakdown,
    ObjectiveWeights,
    Plan,
    Problem,
    ProfilePoint,
    Shape,
    SolveOptions,
    SolveResult,
    SolveStats,
    Termination,
    ThroughputProfile,
)

if TYPE_CHECKING:
    from solver.search.scorer import Scorer
    from solver.search.state import SearchState

CLOCKS = (1410, 1275, 1125, 990)
A100 = GpuType("A100", 80, 312, 2039, 600, 400, 50, CLOCKS)
V100 = GpuType("V100", 32, 125, 900, 300, 300, 40, (1380, 1245, 1110, 960))


def node(
    name: str,
    gpu: GpuType = A100,
    count: int = 8,
    rack: str = "r0",
    unavailable: frozenset[int] = frozenset(),
) -> Node:
    return Node(name, gpu.name, count, unavailable, rack, 100.0)


def cluster(
    *nodes: Node, power: float | None = None, rack_power: dict[str, float] | None = None
) -> Cluster:
    return Cluster({A100.name: A100, V100.name: V100}, tuple(nodes), power, rack_power or {})


def point(
    gpus: int,
    sps: float,
    watts: float | None = None,
    *,
    gpu: GpuType = A100,
    tp: int = 1,
    clock: int | None = None,
    memory: float = 10.0,
) -> ProfilePoint:
    return ProfilePoint(
        gpu.name,
        gpus,
        tp,
        1,
        clock or gpu.max_clock_mhz,
        sps,
        watts if watts is not None else 300.0 * gpus,
        memory,
    )


def job(
    name: str,
    *points: ProfilePoint,
    weight: float = 1.0,
    min_gpus: int = 1,
    max_gpus: int = 8,
    **kw: object,
) -> Job:
    return Job(name, "t", weight, ThroughputProfile(points), min_gpus, max_gpus, frozenset(), **kw)  # type: ignore[arg-type]


def running(
    gpu: str, placement: dict[str, tuple[int, ...]], tp: int = 1, clock: int = 1410
) -> Allocation:
    n = sum(len(v) for v in placement.values())
    return Allocation(
        Shape(gpu, n // tp, tp, 1), clock, tuple(GpuSlice(k, v) for k, v in placement.items())
    )


def problem(
    c: Cluster,
    *jobs: Job,
    weights: ObjectiveWeights | None = None,
    backend: Backend = Backend.AUTO,
    budget: float = 10.0,
) -> Problem:
    return Problem(
        c,
        tuple(jobs),
        weights or ObjectiveWeights(),
        SolveOptions(time_budget_seconds=budget, backend=backend, threads=1),
    )


def only_throughput() -> ObjectiveWeights:
    """Weights under which the optimum is easy to see by hand."""
    return ObjectiveWeights(throughput=1.0, energy=0.0, migration=0.0, locality=0.0, deadline=0.0)


def canned_result(problem: Problem, backend: Backend = Backend.HEURISTIC) -> SolveResult:
    """Every job queued: what stand-ins for the solver return in service and CLI tests."""
    plan = Plan(
        tuple(JobAssignment(j.name, JobState.QUEUED) for j in problem.jobs),
        ObjectiveBreakdown(0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    )
    stats = SolveStats(Termination.FEASIBLE, backend, 0.0, None, None, 0.0, 0.0, 0, 0)
    return SolveResult(plan, stats)


def random_tiny(seed: int) -> Problem:
    """Three jobs on two small A100 nodes and a V100 node: small enough to enumerate."""
    rnd = random.Random(seed)
    nodes = [
        node("n0", count=4, rack="r0"),
        node("n1", count=4, rack="r1", unavailable=frozenset({rnd.randrange(4)})),
        node("v0", V100, count=2, rack="r1"),
    ]
    jobs = []
    for k in range(3):
        pts = [
            point(
                g,
                rnd.uniform(50, 100) * g ** rnd.uniform(0.6, 1.0),
                tp=tp,
                watts=rnd.uniform(150, 400) * g,
            )
            for g, tp in [(1, 1), (2, 1), (4, 2)]
            if rnd.random() < 0.8
        ]
        pts.append(point(2, rnd.uniform(20, 60), gpu=V100))
        current = running("A100", {"n0": (0, 1)}) if k == 0 and rnd.random() < 0.5 else None
        jobs.append(
            job(
                f"j{k}",
                *pts,
                weight=rnd.choice([1.0, 2.0]),
                max_gpus=4,
                current=current,
                preemptible=rnd.random() < 0.7,
                remaining_samples=rnd.choice([0.0, 6000.0]),
                deadline_seconds=60.0,
            )
        )
    power = rnd.choice([None, 2500.0, 3500.0])
    weights = ObjectiveWeights(1.0, rnd.choice([0.0, 0.5]), 0.2, rnd.choice([0.0, 0.05]), 0.3)
    c = cluster(*nodes, power=power, rack_power=rnd.choice([{}, {"r1": 1200.0}]))
    return problem(c, *jobs, weights=weights)


# The wire request. Its GPU types carry their product names, unlike the domain A100/V100 above.
A100_80GB = "A100-80GB"
H100_SXM = "H100-SXM"


def make_request() -> pb.SolveRequest:
    """Two 8-GPU A100 nodes plus a 4-GPU node of a second type (H100), and three jobs.

    ``llm`` is sized by a ModelSpec, ``bert`` by a ThroughputProfile (A100 only), and
    ``resnet`` (profiled on both types) already runs on GPUs 0-3 of ``a100-0``.
    """
    req = pb.SolveRequest()
    c = req.cluster
    c.gpu_types.add(
        name=A100_80GB,
        memory_gib=80,
        peak_tflops=312,
        memory_bandwidth_gbps=2039,
        intra_node_bandwidth_gbps=600,
        tdp_watts=400,
        idle_watts=50,
        sm_clocks_mhz=[1410, 1275, 1110, 960],
    )
    c.gpu_types.add(
        name=H100_SXM,
        memory_gib=80,
        peak_tflops=989,
        memory_bandwidth_gbps=3350,
        intra_node_bandwidth_gbps=900,
        tdp_watts=700,
        idle_watts=70,
        sm_clocks_mhz=[1980, 1755, 1530, 1275],
    )
    c.nodes.add(
        name="a100-0", gpu_type=A100_80GB, gpu_count=8, rack="r1", network_bandwidth_gbps=200
    )
    c.nodes.add(
        name="a100-1",
        gpu_type=A100_80GB,
        gpu_count=8,
        unavailable_gpu_indices=[7],
        rack="r1",
        network_bandwidth_gbps=200,
    )
    c.nodes.add(
        name="h100-0", gpu_type=H100_SXM, gpu_count=4, rack="r2", network_bandwidth_gbps=400
    )
    c.power_budget_watts = 12000
    c.rack_power_budgets.add(rack="r1", watts=8000)

    llm = req.jobs.add(name="llm", tenant="research", min_gpus=1, max_gpus=8)
    llm.model.CopyFrom(
        pb.ModelSpec(
            parameters=1.3e9,
            layers=24,
            hidden_size=2048,
            attention_heads=16,
            sequence_length=2048,
            global_batch_size=64,
        )
    )

    bert = req.jobs.add(
        name="bert", tenant="nlp", weight=2.0, min_gpus=1, max_gpus=4, allowed_gpu_types=[A100_80GB]
    )
    for gpus, sps in ((1, 100.0), (2, 190.0), (4, 360.0)):
        for clock, scale in ((1410, 1.0), (1110, 0.85)):
            bert.profile.points.add(
                gpu_type=A100_80GB,
                num_gpus=gpus,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=clock,
                samples_per_second=sps * scale,
                watts=gpus * 300 * scale,
                memory_per_gpu_gib=30,
            )

    resnet = req.jobs.add(
        name="resnet", tenant="vision", min_gpus=2, max_gpus=4, remaining_samples=1e6
    )
    resnet.time_to_deadline.FromSeconds(3600)
    for gpu_type, clock, speed in ((A100_80GB, 1410, 1.0), (H100_SXM, 1980, 2.0)):
        for gpus in (2, 4):
            resnet.profile.points.add(
                gpu_type=gpu_type,
                num_gpus=gpus,
                tensor_parallel=1,
                pipeline_parallel=1,
                sm_clock_mhz=clock,
                samples_per_second=500 * gpus * speed,
                watts=gpus * 350 * speed,
                memory_per_gpu_gib=20,
            )
    resnet.current_allocation.CopyFrom(
        pb.Allocation(
            gpu_type=A100_80GB,
            data_parallel=4,
            tensor_parallel=1,
            pipeline_parallel=1,
            sm_clock_mhz=1410,
            placement=[pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3])],
        )
    )

    req.options.time_budget.FromSeconds(10)
    req.options.seed = 7
    req.options.threads = 1
    return req


if TYPE_CHECKING:  # imported lazily: validation tests must not need the server modules
    from solver.core.solver import Solver
    from solver.service.server import SchedulerServer

SERVER_STOP_WAIT = 30.0


@contextmanager
def running_server(solver: Solver | None = None, **overrides: Any) -> Iterator[SchedulerServer]:
    """A started server on an ephemeral loopback port with these ServerConfig settings and
    `solver` (default: a real one), stopped afterwards."""
    from solver.service.config import ServerConfig
    from solver.service.server import build_server

    srv = build_server(ServerConfig(**{"host": "127.0.0.1", "port": 0, **overrides}), solver)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(None).wait(SERVER_STOP_WAIT)


if TYPE_CHECKING:
    import threading

    from solver.core.settings import SolverSettings
    from solver.runtime.pools import Executor


def solve(
    p: Problem,
    *,
    seconds: float | None = None,
    executor: Executor | None = None,
    stop: threading.Event | None = None,
    settings: SolverSettings | None = None,
) -> SolveResult:
    """`p` solved by a Solver with `settings` within `seconds` from now (default: its time
    budget); a decomposed solve's parts on `executor` (default: the solver's own)."""
    from solver.core.deadline import Deadline
    from solver.core.solver import Solver

    solver = Solver(settings, executor=executor)
    deadline = None if seconds is None else Deadline.after(seconds, solver.settings, len(p.jobs))
    try:
        return solver.solve(p, deadline, stop)
    finally:
        solver.close()


def checked_objective(p: Problem, scorer: Scorer, state: SearchState) -> float:
    """The objective of a search state's plan, which must pass the checker."""
    from solver.scoring.checker import check_plan
    from solver.scoring.plans import materialize

    plan = materialize(p, scorer.configs, dict(state.choices))
    assert check_plan(p, plan.assignments) == []
    return plan.objective.total
