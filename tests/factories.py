"""Small domain problems for the solver's unit tests (no protobuf: backends read the domain)."""

from __future__ import annotations

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
