"""Trace files: one CSV row per job (docs/simulation.md, "Trace format").

``read_trace`` checks everything a trace can get wrong on its own and reports every problem at
once, each as ``FILE:ROW:COLUMN: message`` (ROW is the line in the file, the header is line 1),
in one ``SimulationError``. What needs the cluster or the workload mix (an unknown workload, more
GPUs than the cluster has) is ``check_trace_against``, in the same form; ``parse_trace`` keeps the
rows with problems too, so that a scenario's loader checks their other columns against the
cluster as well (every problem of a row at once). ``write_trace`` writes the format back,
atomically.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import (
    MAX_DEADLINE_SECONDS,
    MAX_JOB_AGE_SECONDS,
    MAX_JOB_WEIGHT,
    MIN_JOB_WEIGHT,
    weight_problem,
)
from solver.files import write_text
from solver.simulate.core import SimulationError, TraceJob

if TYPE_CHECKING:
    from solver.simulate.workload import WorkloadMix

REQUIRED = ("job_id", "submit_time_s", "tenant", "workload", "num_gpus", "duration_s")
OPTIONAL = ("deadline_s", "weight", "preemptible")
COLUMNS = REQUIRED + OPTIONAL
"""The columns ``write_trace`` writes, in order. Other columns of a file are ignored."""
SLICES = "slices"
"""Optional: the job may run on one MIG instance (empty: false); written only for a trace
with such a job, so traces without slices keep their nine columns."""
EVALUATION = "evaluation"
"""Optional: the job evaluates a model and keeps no optimizer state, so a restart reloads its
weights and saves nothing (empty: false, a training job); written only for a trace with such
a job."""

MAX_DURATION_S = 365 * 86_400.0
"""Longest ``duration_s``: a year, 6.8 times the longest job of the whole Philly trace (4,628,226
s, ``data/philly/durations.csv``) and 15 times the end of Acme's duration CDFs (2^21 s,
``data/acme/duration_cdf.csv``). A year of simulated time is at most 8,760 rounds while no job
waits (one an hour); a 1e13 s job kept a run going for ever."""
MAX_SUBMIT_S = MAX_JOB_AGE_SECONDS
"""Latest ``submit_time_s``: ten years, the largest job age the service accepts."""

_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


class _Row:
    """One record of the file, with the problems found in it."""

    def __init__(self, path: Path, line: int, values: dict[str, str], problems: list[str]):
        self.path, self.line, self.values, self.problems = path, line, values, problems
        self.bad: set[str] = set()
        """Columns with a problem."""

    @property
    def ok(self) -> bool:
        return not self.bad

    def fail(self, column: str, message: str) -> None:
        self.problems.append(f"{self.path}:{self.line}:{column}: {message}")
        self.bad.add(column)

    def text(self, column: str) -> str:
        value = self.values[column]
        if not value:
            self.fail(column, "must not be empty")
        return value

    def number(self, column: str, check: Callable[[float], bool], rule: str) -> float:
        raw = self.values[column]
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and check(value)):
            self.fail(column, f"must be {rule}, got {raw!r}")
        return value

    def positive_int(self, column: str) -> int:
        raw = self.values[column]
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value <= 0:
            self.fail(column, f"must be a positive integer, got {raw!r}")
        return value

    def optional(self, column: str, most: float, rule: str) -> float | None:
        """A number in (0, most], or None where the column is empty or absent."""
        if not self.values.get(column, ""):
            return None
        return self.number(column, lambda x: 0 < x <= most, rule)

    def flag(self, column: str, default: bool = True) -> bool:
        raw = self.values.get(column, "").lower()
        if not raw:
            return default
        if raw in _TRUE:
            return True
        if raw not in _FALSE:
            empty = "true" if default else "false"
            self.fail(column, f"must be empty ({empty}), true, false, 1 or 0, got {raw!r}")
        return False


@dataclass(frozen=True)
class ParsedTrace:
    """A trace file read without raising: every row that made a job (with a problem or not),
    the problems, and each faulty row's bad columns (by line)."""

    jobs: list[TraceJob]
    problems: list[str]
    bad: Mapping[int, frozenset[str]]
    """Line -> the columns with a problem (rows without a problem are absent)."""

    def good_jobs(self) -> list[TraceJob]:
        """The rows without a problem, sorted by submission time (ties in file order)."""
        ok = [j for j in self.jobs if j.row not in self.bad]
        return sorted(ok, key=lambda j: (j.submit_time_s, j.row))


def read_trace(path: str | Path) -> list[TraceJob]:
    """The jobs of a trace file, sorted by submission time (ties in file order).

    Raises SimulationError listing every problem of the file.
    """
    parsed = parse_trace(path)
    if parsed.problems:
        raise SimulationError(parsed.problems)
    return parsed.good_jobs()


def parse_trace(path: str | Path) -> ParsedTrace:
    """Every row of a trace file, with the problems found (``read_trace`` without raising)."""
    path = Path(path)
    problems: list[str] = []
    bad: dict[int, frozenset[str]] = {}
    jobs = _read(path, problems, bad)
    return ParsedTrace(jobs, problems, bad)


def _read(path: Path, problems: list[str], bad: dict[int, frozenset[str]]) -> list[TraceJob]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return _records(path, f, problems, bad)
    except (OSError, UnicodeDecodeError) as e:
        problems.append(f"{path}: cannot read: {e}")
    except csv.Error as e:
        problems.append(f"{path}: not a CSV file: {e}")
    return []


def _records(
    path: Path, f: TextIO, problems: list[str], bad: dict[int, frozenset[str]]
) -> list[TraceJob]:
    reader = csv.reader(f)
    header = next(reader, None)
    if header is None or not any(h.strip() for h in header):
        problems.append(f"{path}:1: empty file: expected a header with {', '.join(REQUIRED)}")
        return []
    names = [h.strip() for h in header]
    for name in sorted({n for n in names if n and names.count(n) > 1}):
        problems.append(f"{path}:1:{name}: duplicate column")
    for name in REQUIRED:
        if name not in names:
            problems.append(f"{path}:1:{name}: missing required column")
    if problems:
        return []
    line_num = reader.line_num
    jobs: list[TraceJob] = []
    first_line: dict[str, int] = {}
    for record in reader:
        line, line_num = line_num + 1, reader.line_num
        if not record:
            continue  # a blank line
        if len(record) != len(names):
            problems.append(f"{path}:{line}: {len(record)} fields, the header has {len(names)}")
            continue
        row = _Row(path, line, {n: v.strip() for n, v in zip(names, record, strict=True)}, problems)
        job = _job(row)
        if job.job_id in first_line:
            first = first_line[job.job_id]
            row.fail("job_id", f"duplicate job_id {job.job_id!r} (first on line {first})")
        elif job.job_id:
            first_line[job.job_id] = line
        jobs.append(job)
        if not row.ok:
            bad[line] = frozenset(row.bad)
    if not jobs and not problems:
        problems.append(f"{path}:2: no jobs after the header")
    return jobs


def _job(row: _Row) -> TraceJob:
    return TraceJob(
        job_id=row.text("job_id"),
        submit_time_s=row.number(
            "submit_time_s",
            lambda x: 0 <= x <= MAX_SUBMIT_S,
            f"a finite number >= 0 and at most {MAX_SUBMIT_S:.0f} (ten years)",
        ),
        tenant=row.text("tenant"),
        workload=row.text("workload"),
        num_gpus=row.positive_int("num_gpus"),
        duration_s=row.number(
            "duration_s",
            lambda x: 0 < x <= MAX_DURATION_S,
            f"a finite number > 0 and at most {MAX_DURATION_S:.0f} (a year)",
        ),
        deadline_s=row.optional(
            "deadline_s",
            MAX_DEADLINE_SECONDS,
            f"empty (no deadline) or a finite number > 0 and at most {MAX_DEADLINE_SECONDS:.0f} "
            "(ten years)",
        ),
        weight=row.number(
            "weight",
            lambda x: weight_problem(x) is None,
            f"empty (1) or a number from {MIN_JOB_WEIGHT:g} to {MAX_JOB_WEIGHT:g}",
        )
        if row.values.get("weight", "")
        else 1.0,
        preemptible=row.flag("preemptible"),
        slices=row.flag(SLICES, default=False),
        evaluation=row.flag(EVALUATION, default=False),
        row=row.line,
    )


def _number(x: float) -> str:
    """Shortest text that reads back as the same float (integers without a fraction)."""
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else repr(x)


def trace_text(jobs: Sequence[TraceJob]) -> str:
    """The trace file text of ``jobs``: all columns, in the given order."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    slices = any(j.slices for j in jobs)
    evaluation = any(j.evaluation for j in jobs)
    w.writerow((*COLUMNS, *[SLICES] * slices, *[EVALUATION] * evaluation))
    for j in jobs:
        extra = ["true" if j.slices else "false"] if slices else []
        if evaluation:
            extra.append("true" if j.evaluation else "false")
        w.writerow(
            [
                j.job_id,
                _number(j.submit_time_s),
                j.tenant,
                j.workload,
                j.num_gpus,
                _number(j.duration_s),
                "" if j.deadline_s is None else _number(j.deadline_s),
                _number(j.weight),
                "true" if j.preemptible else "false",
                *extra,
            ]
        )
    return out.getvalue()


def write_trace(jobs: Sequence[TraceJob], path: str | Path) -> None:
    """Write ``jobs`` in the trace format (``trace_text``), atomically (``solver.files``)."""
    write_text(path, trace_text(jobs))


def cluster_pools(cluster: pb.ClusterSnapshot) -> dict[str, int]:
    """Available GPUs of each type (installed minus unavailable)."""
    pools: dict[str, int] = {}
    for n in cluster.nodes:
        pools[n.gpu_type] = (
            pools.get(n.gpu_type, 0) + n.gpu_count - len(set(n.unavailable_gpu_indices))
        )
    return pools


def check_trace_against(
    jobs: Sequence[TraceJob],
    path: str | Path,
    cluster: pb.ClusterSnapshot,
    mix: WorkloadMix | Set[str],
    bad: Mapping[int, Set[str]] | None = None,
) -> list[str]:
    """Problems of a trace that depend on the cluster and the workload mix, one line each in the
    form ``FILE:ROW:COLUMN: message``: a job needing more GPUs than the cluster has, or than any
    one GPU type has (a job runs on one type); an unknown workload; a workload that cannot run
    on the job's GPU count; a tenant that names no queue when the cluster declares queues.
    ``mix`` may be just the set of known workload names. ``bad`` (``ParsedTrace.bad``): columns
    of a row already found wrong, whose checks here are skipped (the others still run)."""
    pools = cluster_pools(cluster)
    total = sum(pools.values())
    largest = max(pools.items(), key=lambda kv: (kv[1], kv[0]), default=("", 0))
    problems = []
    queues = sorted(q.name for q in cluster.queues)
    for j in jobs:
        where = f"{path}:{j.row}"
        skip = (bad or {}).get(j.row, frozenset())
        if queues and "tenant" not in skip and j.tenant not in queues:
            problems.append(
                f"{where}:tenant: {j.tenant!r} names no queue of the cluster "
                f"(its queues: {', '.join(queues)})"
            )
        if j.slices and "num_gpus" not in skip and j.num_gpus != 1:
            problems.append(
                f"{where}:{SLICES}: only a one-GPU job may run on a MIG instance, "
                f"this one asks for {j.num_gpus} GPUs"
            )
        if "workload" in skip:
            continue
        if "num_gpus" in skip:  # the workload alone: is it known?
            unknown = _workload_problem(j, cluster, mix)
            if unknown is not None:
                problems.append(f"{where}:workload: {unknown}")
            continue
        if j.num_gpus > total:
            problems.append(
                f"{where}:num_gpus: needs {j.num_gpus} GPUs, the cluster has {total} available"
            )
            continue
        if j.num_gpus > largest[1]:
            problems.append(
                f"{where}:num_gpus: needs {j.num_gpus} GPUs of one type, the cluster's largest "
                f"pool of one type has {largest[1]} ({largest[0]})"
            )
            continue
        if isinstance(mix, Set):
            if j.workload not in mix:
                problems.append(f"{where}:workload: unknown workload {j.workload!r}")
            continue
        found = mix.problem(j, cluster)
        if found is not None:
            column, message = found
            problems.append(f"{where}:{column}: {message}")
    return problems


def _workload_problem(
    job: TraceJob, cluster: pb.ClusterSnapshot, mix: WorkloadMix | Set[str]
) -> str | None:
    """Why the job's workload is unknown to the mix (None if it is known)."""
    if isinstance(mix, Set):
        return None if job.workload in mix else f"unknown workload {job.workload!r}"
    found = mix.problem(job, cluster)
    return found[1] if found is not None and found[0] == "workload" else None
