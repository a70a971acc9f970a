"""The result lines of ``dsfro batch``: their schema and key, the builders of a finished
solve's line and of a failed run's (the schema is in the package's docstring), and BatchError."""

from __future__ import annotations

import datetime
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import JobState, ModelSpec, Problem, SolveResult

SCHEMA = 1
TIMING_KEY = "timing"
KEY_FIELDS = ("file", "sha256", "backend", "budget_s", "seed")
JOB_CLASS_MODES = ("name", "workload")

RunKey = tuple[Any, ...]
Record = dict[str, Any]


class BatchError(Exception):
    """Bad arguments or an unusable results file: exit 2."""


def key_of(record: Record) -> RunKey:
    """The run key of a result line: (file, sha256, backend, budget_s, seed)."""
    return tuple(record.get(k) for k in KEY_FIELDS)


_JOB_INDEX = re.compile(r"^j\d+-")
_BATCH_SIZE = re.compile(r"-l?bs\d+$")


def job_class(name: str, workload_kind: str, mode: str = "name") -> str:
    """A job's class for the allocation tables.

    ``name``: the name without the generator's leading index (``j0012-``) and trailing batch
    size (``-bs64``, ``-lbs12``), e.g. ``j0002-gavel-transformer-bs64`` -> ``gavel-transformer``.
    ``workload``: ``model`` (a ModelSpec, the analytic model) or ``profile`` (measured).
    """
    if mode == "workload":
        return workload_kind
    stripped = _BATCH_SIZE.sub("", _JOB_INDEX.sub("", name))
    return stripped or workload_kind


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _size(req: pb.SolveRequest) -> dict[str, int]:
    return {
        "nodes": len(req.cluster.nodes),
        "gpus": sum(n.gpu_count for n in req.cluster.nodes),
        "jobs": len(req.jobs),
    }


def _base_record(key: RunKey, size: dict[str, int] | None, error: dict[str, Any] | None) -> Record:
    file, sha, backend, budget, seed = key
    return {
        "schema": SCHEMA,
        "file": file,
        "instance": Path(file).stem,
        "sha256": sha,
        "backend": backend,
        "budget_s": budget,
        "seed": seed,
        "ok": error is None,
        "error": error,
        "termination": None,
        "backend_used": None,
        "objective": None,
        "bound": None,
        "gap": None,
        "gpus_used": None,
        "power_w": None,
        "jobs_running": None,
        "jobs_queued": None,
        "size": size,
        "configurations": None,
    }


def error_record(
    key: RunKey,
    kind: str,
    message: str,
    violations: Sequence[tuple[str, str]] = (),
    size: dict[str, int] | None = None,
) -> Record:
    """The line of a run that produced no plan: ``kind`` is read, invalid or internal."""
    error = {
        "kind": kind,
        "message": message,
        "violations": [{"field": f, "description": d} for f, d in violations],
    }
    record = _base_record(key, size, error)
    record[TIMING_KEY] = {
        "first_plan_s": None,
        "wall_s": None,
        "detail": "",
        "finished_at": _now(),
    }
    return record


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def result_record(
    key: RunKey,
    problem: Problem,
    result: SolveResult,
    size: dict[str, int],
    allocation_mode: str | None = None,
) -> Record:
    """The line of a finished solve; ``allocation_mode`` (name or workload) adds the GPUs per
    (GPU type, job class)."""
    stats = result.stats
    plan = result.plan
    running = [a for a in plan.assignments if a.state is JobState.RUNNING and a.config]
    o = plan.objective
    record = _base_record(key, size, None)
    record.update(
        termination=stats.termination.name,
        backend_used=stats.backend_used.name,
        objective={
            "total": o.total,
            "throughput": o.throughput,
            "energy": o.energy,
            "migration": o.migration,
            "locality": o.locality,
            "deadline": o.deadline,
        },
        bound=_finite(stats.best_bound),
        gap=_finite(stats.relative_gap),
        gpus_used=sum(a.config.num_gpus for a in running if a.config),
        power_w=sum(a.config.watts for a in running if a.config),
        jobs_running=len(running),
        jobs_queued=len(problem.jobs) - len(running),
        configurations=stats.num_configurations,
    )
    if allocation_mode is not None:
        record["allocation"] = allocation_counts(problem, result, allocation_mode)
    record[TIMING_KEY] = {
        "first_plan_s": stats.first_plan_seconds,
        "wall_s": stats.wall_seconds,
        "detail": stats.detail,
        "finished_at": _now(),
    }
    return record


def allocation_counts(problem: Problem, result: SolveResult, mode: str) -> dict[str, Any]:
    """Running jobs and their GPUs per (GPU type, job class); queued jobs per class."""
    kinds = {
        j.name: "model" if isinstance(j.workload, ModelSpec) else "profile" for j in problem.jobs
    }
    running: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    queued: Counter[str] = Counter()
    placed = set()
    for a in result.plan.assignments:
        cls = job_class(a.job, kinds.get(a.job, "model"), mode)
        if a.state is JobState.RUNNING and a.config is not None:
            cell = running[(a.config.gpu_type, cls)]
            cell[0] += 1
            cell[1] += a.config.num_gpus
            placed.add(a.job)
    for j in problem.jobs:
        if j.name not in placed:
            queued[job_class(j.name, kinds[j.name], mode)] += 1
    return {
        "mode": mode,
        "running": [
            {"gpu_type": t, "job_class": c, "jobs": v[0], "gpus": v[1]}
            for (t, c), v in sorted(running.items())
        ],
        "queued": dict(sorted(queued.items())),
    }


def _none_first(x: float | None) -> tuple[bool, float]:
    return (x is not None, x or 0.0)
