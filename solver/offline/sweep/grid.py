"""The grid of a sweep (every combination of the ``--weight`` values) and one grid point solved
in a worker: its plan's throughput, power and per-job choices."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.limits import MAX_OBJECTIVE_WEIGHT
from solver.app.profile import WEIGHT_KEYS
from solver.core.solver import Solver
from solver.domain import JobState, Termination

SHORT = {
    "throughput": "T",
    "energy": "E",
    "migration": "M",
    "locality": "L",
    "deadline": "D",
    "fairness": "F",
    "completion": "C",
    "node_preference": "P",
}


MAX_SWEEP_POINTS = 10_000
"""The most points of one grid: each is a solve (10,000 at 1 s is about three hours on a core),
and three axes of 1,000 values (10^9 points) filled 5 GiB in 15 s before a solve began."""


class SweepError(Exception):
    """Bad arguments or input: exit 2."""


def parse_weight_spec(text: str) -> tuple[str, list[float]]:
    """``energy=0,0.05,0.1`` -> ("energy", [0.0, 0.05, 0.1]); ValueError says what is wrong."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep:
        raise ValueError(f"expected NAME=V1,V2,... got {text!r}")
    if name not in WEIGHT_KEYS:
        raise ValueError(f"unknown weight {name!r}; one of {', '.join(WEIGHT_KEYS)}")
    out: list[float] = []
    for v in values.split(","):
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"{name}: invalid number {v.strip()!r}") from None
        if not (math.isfinite(x) and 0 <= x <= MAX_OBJECTIVE_WEIGHT):
            raise ValueError(
                f"{name}: weights must be from 0 to {MAX_OBJECTIVE_WEIGHT:g}, got {v.strip()}"
            )
        out.append(x)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated value")
    return name, out


def grid_size(axes: Sequence[tuple[str, Sequence[float]]]) -> int:
    """The points of the grid, counted without making them; ValueError past MAX_SWEEP_POINTS."""
    size = math.prod(len(v) for _, v in axes)
    if size > MAX_SWEEP_POINTS:
        product = " x ".join(f"{len(v):,}" for _, v in axes)
        raise ValueError(
            f"the grid has {size:,} points ({product}); at most {MAX_SWEEP_POINTS:,}: "
            "give fewer values"
        )
    return size


def weight_grid(axes: Sequence[tuple[str, Sequence[float]]]) -> list[dict[str, float]]:
    """Every combination of the axes' values, the first axis varying slowest; ValueError for a
    weight given twice or a grid of more than MAX_SWEEP_POINTS."""
    names = [n for n, _ in axes]
    if len(set(names)) != len(names):
        raise ValueError("a weight is given twice")
    grid_size(axes)
    return [
        dict(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))
    ]


@dataclass(frozen=True)
class JobChoice:
    job: str
    state: str
    gpu_type: str = ""
    shape: str = ""
    """dp x tp x pp."""
    clock_mhz: int = 0
    gpus: int = 0
    watts: float = 0.0

    def describe(self) -> tuple[str, str, str, str]:
        """(state, GPU type, shape, clock) as table cells."""
        if self.state != "RUNNING":
            return (self.state, "-", "-", "-")
        return (self.state, self.gpu_type, self.shape, str(self.clock_mhz))


@dataclass(frozen=True)
class SweepPoint:
    index: int
    swept: dict[str, float]
    """The weights this point sets (the grid's axes)."""
    weights: dict[str, float]
    """Every effective weight."""
    termination: str = ""
    objective: float = 0.0
    throughput: float = 0.0
    """Normalised: sum_j w_j u_j / sum_j w_j."""
    power_w: float = 0.0
    gpus_used: int = 0
    jobs: tuple[JobChoice, ...] = ()
    error: str | None = None

    @property
    def placed(self) -> bool:
        """Has a plan to place on the figure."""
        return self.error is None and self.termination != Termination.INFEASIBLE.name

    def label(self) -> str:
        return ", ".join(f"{SHORT[k]}={v:g}" for k, v in self.swept.items())


@dataclass(frozen=True)
class SweepTask:
    index: int
    swept: dict[str, float]
    request: bytes
    """The point's request, serialized: made as its chunk is solved, so that a grid of a large
    snapshot never holds every point's copy."""
    solver: Solver


def solve_point(task: SweepTask) -> SweepPoint:
    """Solve one grid point (top-level: runs in worker processes)."""
    try:
        solved = pipeline.solve_request(pb.SolveRequest.FromString(task.request), task.solver)
    except Exception as e:  # reported with the point
        return SweepPoint(task.index, task.swept, {}, error=f"{type(e).__name__}: {e}")
    finally:
        task.solver.close()
    problem, result = solved.problem, solved.result
    weights = {k: getattr(problem.weights, k) for k in WEIGHT_KEYS}
    total_weight = sum(j.weight for j in problem.jobs) or 1.0
    jobs = []
    for a in sorted(result.plan.assignments, key=lambda a: a.job):
        c = a.config
        if a.state is JobState.RUNNING and c is not None:
            s = c.shape
            jobs.append(
                JobChoice(
                    a.job,
                    "RUNNING",
                    c.gpu_type,
                    f"{s.data_parallel}x{s.tensor_parallel}x{s.pipeline_parallel}",
                    c.sm_clock_mhz,
                    c.num_gpus,
                    c.watts,
                )
            )
        else:
            jobs.append(JobChoice(a.job, "QUEUED"))
    return SweepPoint(
        index=task.index,
        swept=task.swept,
        weights=weights,
        termination=result.stats.termination.name,
        objective=result.plan.objective.total,
        throughput=result.plan.objective.throughput / total_weight,
        power_w=sum(j.watts for j in jobs),
        gpus_used=sum(j.gpus for j in jobs),
        jobs=tuple(jobs),
    )
