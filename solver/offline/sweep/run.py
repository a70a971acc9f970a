"""Running a sweep: the base request (file, profile, flags), every grid point solved on an
Executor, the outcome with its front and changes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import RequestFileError
from solver.app.limits import MAX_OBJECTIVE_WEIGHT, Limits, parse_backend, parse_energy_basis
from solver.app.pipeline import Overrides
from solver.app.profile import Profile
from solver.app.validation import validate_request
from solver.core.solver import Solver
from solver.offline.batch import Progress, make_batch_executor
from solver.offline.sweep.front import Change, front_changes, pareto_front
from solver.offline.sweep.grid import SweepError, SweepPoint, SweepTask, solve_point, weight_grid
from solver.offline.sweep.journal import Journal, point_key, request_digest
from solver.runtime.pools import Executor, WorkerLost, lost_for_good, map_or_lost
from solver.wire.files import load_request_file


@dataclass
class SweepOutcome:
    points: list[SweepPoint]
    front: list[int]
    changes: list[Change] = field(default_factory=list)
    title: str = ""


def prepare(
    path: str,
    *,
    profile: Profile | None = None,
    backend: str | None = None,
    time_budget: float | None = None,
    seed: int | None = None,
    threads: int | None = 1,
    energy_basis: str | None = None,
) -> pb.SolveRequest:
    """The base request of a sweep: the file, then the profile, then these flags (which win).
    SweepError if it can't be read."""
    try:
        req = load_request_file(path)
    except RequestFileError as e:
        raise SweepError(str(e)) from e
    overrides = Overrides(
        time_budget_seconds=time_budget,
        backend=None if backend is None else parse_backend(backend),
        seed=seed,
        threads=threads,
        energy_basis=None if energy_basis is None else parse_energy_basis(energy_basis),
    )
    return pipeline.prepare(req, profile, overrides)


def run_sweep(
    request: pb.SolveRequest,
    axes: Sequence[tuple[str, Sequence[float]]],
    *,
    executor: Executor | None = None,
    solver: Solver | None = None,
    progress: TextIO | None = None,
    title: str = "",
    journal: Journal | None = None,
) -> SweepOutcome:
    """Solve every grid point with `solver` (default settings when None), but those `journal`
    already has, writing each to it as it comes back; SweepError if a point's request is
    invalid."""
    the_solver = solver if solver is not None else Solver()
    try:
        grid = weight_grid(axes)
    except ValueError as e:
        raise SweepError(str(e)) from e
    for name, values in axes:
        if bad := [v for v in values if not 0 <= v <= MAX_OBJECTIVE_WEIGHT]:
            raise SweepError(f"{name}: weights must be from 0 to {MAX_OBJECTIVE_WEIGHT:g}: {bad}")
    # every point is the base request with other weights, each checked above: one check
    first = _point_request(request, grid[0]) if grid else request
    violations = validate_request(first, Limits())
    if violations:
        lines = [f"{v.field}: {v.description}" for v in violations]
        raise SweepError("invalid request:\n" + "\n".join(lines))
    base = request_digest(request.SerializeToString(deterministic=True), the_solver)
    keys = [point_key(base, swept) for swept in grid]
    done = journal.done if journal is not None else {}
    points = {
        i: replace(done[key], index=i, swept=swept)
        for i, (swept, key) in enumerate(zip(grid, keys, strict=True), start=1)
        if key in done
    }
    todo = [i for i in range(1, len(grid) + 1) if i not in points]
    own = executor is None
    ex = executor or make_batch_executor(1, None)
    bar = Progress(len(todo), progress)
    try:
        for start in range(0, len(todo), max(ex.workers, 1)):
            chunk = [
                SweepTask(i, grid[i - 1], _serialized(request, grid[i - 1]), the_solver)
                for i in todo[start : start + max(ex.workers, 1)]
            ]
            for task, point in zip(
                chunk, map_or_lost(ex, solve_point, chunk, _lost_point), strict=True
            ):
                if journal is not None:
                    journal.append(keys[task.index - 1], point)
                points[task.index] = point
                bar.update(_progress_record(point))
    finally:
        bar.finish()
        if own:
            ex.close()
    ordered = [points[i] for i in range(1, len(grid) + 1)]
    front = pareto_front(ordered)
    return SweepOutcome(ordered, front, front_changes(ordered, front), title)


def _point_request(request: pb.SolveRequest, swept: dict[str, float]) -> pb.SolveRequest:
    return pipeline.prepare(request, overrides=Overrides(weights=swept))


def _serialized(request: pb.SolveRequest, swept: dict[str, float]) -> bytes:
    return _point_request(request, swept).SerializeToString(deterministic=True)


def _lost_point(task: SweepTask, error: WorkerLost) -> SweepPoint:
    """A point whose worker died on every try: reported with the point, the sweep goes on."""
    return SweepPoint(task.index, task.swept, {}, error=lost_for_good(error))


def _progress_record(p: SweepPoint) -> dict[str, Any]:
    """A batch-like record for the progress display."""
    return {
        "ok": p.error is None,
        "error": {"kind": "internal", "message": p.error},
        "file": f"#{p.index}",
        "sha256": None,
        "backend": p.label(),
        "budget_s": None,
        "seed": None,
        "termination": p.termination,
        "objective": {"total": p.objective},
        "gap": None,
        "timing": {"wall_s": None},
    }
