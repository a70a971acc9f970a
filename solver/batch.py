"""``dsfro batch``: solve many snapshot files with several backends, budgets and seeds.

One run is one (file, backend, time budget, seed). Runs go to an Executor (``solver.executor``:
a local process pool, Ray with ``--ray-address``, in this process with ``--workers 1``) and each
result is appended to a JSON Lines file as one line, written with a single write and flushed,
so an interrupted batch resumes where it stopped (``--resume`` skips the runs whose key is in the
file; a last line without its newline, left by a crash, is dropped, never read).

A result line (``SCHEMA`` 1)::

    {"schema": 1, "file": ..., "instance": ..., "sha256": ...,          # the key, with
     "backend": "auto", "budget_s": 1.0, "seed": 1,                     # backend/budget/seed
     "ok": true, "error": null,
     "termination": "OPTIMAL", "backend_used": "CPSAT",
     "objective": {"total": ..., "throughput": ..., "energy": ..., "migration": ...,
                   "locality": ..., "deadline": ...},
     "bound": ..., "gap": ...,
     "gpus_used": ..., "power_w": ..., "jobs_running": ..., "jobs_queued": ...,
     "size": {"nodes": ..., "gpus": ..., "jobs": ...}, "configurations": ...,
     "allocation": {...},                                               # --store-allocation
     "timing": {"first_plan_s": ..., "wall_s": ..., "detail": ..., "finished_at": ...}}

Everything that depends on the clock is under ``"timing"`` (the solver's free-text detail quotes
times too); the rest is a function of the inputs, so ``strip_timing`` of a resumed run's lines
equals that of an uninterrupted run's. (A solve cut short by its wall-clock budget can still end
differently; runs use one solver thread by default, under CP-SAT's deterministic limit.)

A file that can't be read, or whose request is invalid, gets an error line per run (with the
field paths of validation) and the batch goes on; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import glob
import hashlib
import itertools
import json
import logging
import math
import os
import re
import shutil
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

from solver import orchestrator
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.convert import (
    RequestFileError,
    backend_from_proto,
    duration_to_proto,
    load_request_json,
    problem_from_proto,
)
from solver.domain import JobState, ModelSpec, Problem, SolveResult
from solver.executor import Executor, InlineExecutor, available_cores, make_executor
from solver.profile import (
    Profile,
    ProfileError,
    apply_profile,
    load_profile,
    parse_backend,
    parse_duration,
    wire_backend,
)
from solver.validation import Limits, duration_seconds, validate_request

log = logging.getLogger(__name__)

SCHEMA = 1
TIMING_KEY = "timing"
KEY_FIELDS = ("file", "sha256", "backend", "budget_s", "seed")
JOB_CLASS_MODES = ("name", "workload")

RunKey = tuple[Any, ...]
Record = dict[str, Any]


class BatchError(Exception):
    """Bad arguments or an unusable results file: exit 2."""


# ---------------------------------------------------------------- records


def key_of(record: Record) -> RunKey:
    """The run key of a result line: (file, sha256, backend, budget_s, seed)."""
    return tuple(record.get(k) for k in KEY_FIELDS)


def strip_timing(record: Record) -> Record:
    """The line without its clock-dependent part: what two runs of the same inputs share."""
    return {k: v for k, v in record.items() if k != TIMING_KEY}


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


# ---------------------------------------------------------------- one run (in a worker)


@dataclass(frozen=True)
class SolveTask:
    """One run, picklable for the worker processes."""

    key: RunKey
    request: bytes
    """The SolveRequest, serialized, with backend, budget, seed and threads set."""
    size: dict[str, int]
    allocation_mode: str | None = None


def solve_task(task: SolveTask) -> Record:
    """Solve one run and return its result line (an error line if the solver fails)."""
    try:
        req = pb.SolveRequest.FromString(task.request)
        problem = problem_from_proto(req, Limits())
        result = orchestrator.solve(problem)
        return result_record(task.key, problem, result, task.size, task.allocation_mode)
    except Exception as e:  # reported in the line; the batch goes on
        log.debug("run %s failed", task.key, exc_info=True)
        return error_record(task.key, "internal", f"{type(e).__name__}: {e}", size=task.size)


# ---------------------------------------------------------------- the results file


@dataclass
class ResultsFile:
    records: list[Record]
    truncated: bool
    """The file ended in a line without its newline (a crash mid-write); it was left out."""
    valid_bytes: int
    """Length of the file up to and including its last newline."""


class ResultsFileError(ValueError):
    """A results file with a corrupt complete line (not the trace of a crash)."""


def parse_results(data: bytes, name: str = "results") -> ResultsFile:
    """Result lines of a JSON Lines file's bytes; an unterminated last line is dropped."""
    end = data.rfind(b"\n") + 1
    records: list[Record] = []
    for lineno, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ResultsFileError(f"{name}:{lineno}: not a JSON line: {e}") from e
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            raise ResultsFileError(f"{name}:{lineno}: not a dsfro batch result (schema {SCHEMA})")
        records.append(record)
    return ResultsFile(records, truncated=end < len(data), valid_bytes=end)


def read_results(path: str | Path) -> ResultsFile:
    """The results of a file (see parse_results); a missing file has none."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ResultsFile([], truncated=False, valid_bytes=0)
    return parse_results(data, str(path))


def latest_by_key(records: Iterable[Record]) -> dict[RunKey, Record]:
    """The last line of each run key, in the order keys first appear."""
    out: dict[RunKey, Record] = {}
    for r in records:
        out[key_of(r)] = r
    return out


class ResultsLog:
    """The results file, locked against a second batch, opened to append whole lines."""

    def __init__(self, path: Path, *, resume: bool, overwrite: bool) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._f: IO[bytes] = open(path, "a+b")  # noqa: SIM115 - closed in close()
        except OSError as e:
            raise BatchError(f"{path}: cannot open: {e.strerror or e}") from e
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._f.close()
            raise BatchError(f"{path}: in use by another batch") from e
        self._f.seek(0)
        data = self._f.read()
        self.existing: list[Record] = []
        self.dropped_partial = False
        if overwrite:
            self._f.truncate(0)
        elif data and not resume:
            self.close()
            raise BatchError(
                f"{path} exists: pass --resume to continue it, or --overwrite to start over"
            )
        elif data:
            try:
                parsed = parse_results(data, str(path))
            except ResultsFileError as e:
                self.close()
                raise BatchError(str(e)) from e
            self.existing = parsed.records
            if parsed.truncated:
                self.dropped_partial = True
                self._f.truncate(parsed.valid_bytes)
        self._f.seek(0, os.SEEK_END)

    def append(self, record: Record) -> None:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        self._f.write(line.encode("utf-8") + b"\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()  # releases the lock


# ---------------------------------------------------------------- planning the runs


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """Instance files of directories (their ``*.json``), globs and file names, sorted, once
    each; BatchError if a pattern matches nothing."""
    out: list[str] = []
    for pattern in patterns:
        path = Path(pattern)
        if path.is_dir():
            found = sorted(str(p) for p in path.glob("*.json") if p.is_file())
        elif glob.has_magic(pattern):
            found = sorted(p for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
        else:
            found = [pattern]  # a missing file is reported as its runs' error
        if not found:
            raise BatchError(f"{pattern}: no instance files")
        out.extend(found)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class BatchConfig:
    inputs: Sequence[str]
    out: Path
    backends: Sequence[str] | None = None
    """Lower-case backend names; None: each request's own (file, then profile, then AUTO)."""
    budgets: Sequence[float] | None = None
    """Seconds; None: each request's own."""
    seeds: Sequence[int] | None = None
    """None: each request's own."""
    threads: int = 1
    """Solver threads per run (overrides file and profile): N workers use N cores."""
    workers: int = 1
    ray_address: str | None = None
    resume: bool = False
    overwrite: bool = False
    max_runs: int | None = None
    """Stop after this many new runs (the rest are left for --resume)."""
    allocation_mode: str | None = None
    """name or workload: store allocation counts by (GPU type, job class); None: don't."""
    profile: Profile | None = None


@dataclass
class Run:
    key: RunKey
    task: SolveTask | None = None
    record: Record | None = None
    """Known without solving: the error of an unreadable or invalid request."""


def plan_runs(config: BatchConfig, files: Sequence[str]) -> list[Run]:
    """Every run, in the order they are solved and written: budget, file, backend, seed."""
    limits = Limits()
    runs: list[Run] = []
    for file in files:
        runs.extend(_file_runs(config, file, limits))
    order = {b: i for i, b in enumerate(sorted({r.key[3] for r in runs}, key=_none_first))}
    runs.sort(key=lambda r: order[r.key[3]])  # stable: file, backend, seed within a budget
    return runs


def _none_first(x: float | None) -> tuple[bool, float]:
    return (x is not None, x or 0.0)


def _file_runs(config: BatchConfig, file: str, limits: Limits) -> list[Run]:
    backends: Sequence[str | None] = config.backends or [None]
    budgets: Sequence[float | None] = config.budgets or [None]
    seeds: Sequence[int | None] = config.seeds or [None]
    sha: str | None = None
    try:
        sha = hashlib.sha256(Path(file).read_bytes()).hexdigest()
        req = load_request_json(file)
    except (OSError, RequestFileError) as e:
        message = str(e) if isinstance(e, RequestFileError) else f"{file}: cannot read: {e}"
        return [
            Run(key, record=error_record(key, "read", message))
            for key in dict.fromkeys(
                (file, sha, b, t, s) for b, t, s in itertools.product(backends, budgets, seeds)
            )
        ]
    if config.profile is not None:
        apply_profile(req, config.profile)
    size = _size(req)
    runs = []
    seen: set[RunKey] = set()
    for backend, budget, seed in itertools.product(backends, budgets, seeds):
        run_req = pb.SolveRequest()
        run_req.CopyFrom(req)
        o = run_req.options
        if backend is not None:
            o.backend = wire_backend(parse_backend(backend))
        if budget is not None:
            o.time_budget.CopyFrom(duration_to_proto(budget))
        if seed is not None:
            o.seed = seed
        o.threads = config.threads
        key = (
            file,
            sha,
            backend_from_proto(o.backend).name.lower(),
            duration_seconds(o.time_budget)
            if o.HasField("time_budget")
            else limits.default_time_budget_seconds,
            o.seed,
        )
        if key in seen:
            continue
        seen.add(key)
        violations = validate_request(run_req, limits)
        if violations:
            first = f"{violations[0].field}: {violations[0].description}"
            more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
            record = error_record(
                key,
                "invalid",
                f"invalid request: {first}{more}",
                [(v.field, v.description) for v in violations],
                size,
            )
            runs.append(Run(key, record=record))
        else:
            task = SolveTask(
                key, run_req.SerializeToString(deterministic=True), size, config.allocation_mode
            )
            runs.append(Run(key, task=task))
    return runs


# ---------------------------------------------------------------- progress


def _describe(key: RunKey) -> str:
    file, _, backend, budget, seed = key
    budget_text = "-" if budget is None else f"{budget:g}s"
    return f"{Path(file).name} {backend or '-'} {budget_text} seed {'-' if seed is None else seed}"


def _outcome(record: Record) -> str:
    if not record["ok"]:
        return f"ERROR ({record['error']['kind']}): {record['error']['message']}"
    text = f"{record['termination']} objective {record['objective']['total']:.6g}"
    if record["gap"] is not None:
        text += f" gap {record['gap']:.2%}"
    wall = record[TIMING_KEY]["wall_s"]
    return text + (f" ({wall:.2f} s)" if wall is not None else "")


class Progress:
    """One updating line on a terminal; one plain line per finished run otherwise."""

    def __init__(self, total: int, stream: TextIO | None, *, tty: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.stream = stream
        self.tty = (stream is not None and stream.isatty()) if tty is None else tty
        self._shown = False

    def update(self, record: Record) -> None:
        self.done += 1
        self.errors += 0 if record["ok"] else 1
        if self.stream is None:
            return
        head = f"[{self.done}/{self.total}]"
        if self.tty:
            width = shutil.get_terminal_size((100, 20)).columns - 1
            text = f"{head} {self.errors} failed | last: {_describe(key_of(record))}: "
            text += _outcome(record)
            self.stream.write("\r\x1b[K" + text[:width])
            self._shown = True
        else:
            self.stream.write(f"{head} {_describe(key_of(record))}: {_outcome(record)}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.stream is not None and self.tty and self._shown:
            self.stream.write("\n")
            self.stream.flush()
            self._shown = False


# ---------------------------------------------------------------- running


@dataclass
class BatchOutcome:
    records: list[Record]
    """The latest line of every requested run that has one (done now or before)."""
    new_runs: int
    skipped: int
    """Runs already in the file (--resume)."""
    remaining: int
    """Runs left for a later --resume (--max-runs)."""
    dropped_partial: bool

    @property
    def failed(self) -> int:
        return sum(1 for r in self.records if not r["ok"])

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def make_batch_executor(workers: int, ray_address: str | None) -> Executor:
    """Ray at an address; a local pool of `workers` processes; this process for one worker."""
    if ray_address or workers > 1:
        return make_executor(ray_address, workers)
    return InlineExecutor()


def run_batch(
    config: BatchConfig,
    *,
    executor: Executor | None = None,
    progress: TextIO | None = None,
    tty: bool | None = None,
) -> BatchOutcome:
    """Run the batch; BatchError for bad arguments or an unusable results file."""
    files = expand_inputs(config.inputs)
    runs = plan_runs(config, files)
    log_file = ResultsLog(config.out, resume=config.resume, overwrite=config.overwrite)
    own_executor = executor is None
    try:
        done = latest_by_key(log_file.existing)
        pending = [r for r in runs if r.key not in done]
        skipped = len(runs) - len(pending)
        if config.max_runs is not None:
            pending, rest = pending[: config.max_runs], pending[config.max_runs :]
        else:
            rest = []
        solves = sum(1 for r in pending if r.task is not None)
        if own_executor and solves:
            executor = make_batch_executor(min(config.workers, solves), config.ray_address)
        bar = Progress(len(pending), progress, tty=tty)
        try:
            for chunk in _chunks(pending, executor.workers if executor else 1):
                tasks = [r.task for r in chunk if r.task is not None]
                solved = iter(executor.map(solve_task, tasks) if executor and tasks else [])
                for run in chunk:
                    record = run.record if run.record is not None else next(solved)
                    log_file.append(record)
                    done[run.key] = record
                    bar.update(record)
        finally:
            bar.finish()
    finally:
        log_file.close()
        if own_executor and executor is not None:
            executor.close()
    records = [done[r.key] for r in runs if r.key in done]
    return BatchOutcome(
        records=records,
        new_runs=len(pending),
        skipped=skipped,
        remaining=len(rest),
        dropped_partial=log_file.dropped_partial,
    )


def _chunks(runs: Sequence[Run], workers: int) -> Iterable[list[Run]]:
    """Consecutive runs with at most `workers` solves each (error lines ride along): a chunk
    is solved in parallel and written in order, so the file is always a prefix of the plan."""
    chunk: list[Run] = []
    solves = 0
    for run in runs:
        if run.task is not None:
            if solves == workers:
                yield chunk
                chunk, solves = [], 0
            solves += 1
        chunk.append(run)
    if chunk:
        yield chunk


# ---------------------------------------------------------------- summary


@dataclass(frozen=True)
class SummaryRow:
    instance: str
    backend: str
    budget_s: float | None
    """Set when the rows are per budget too."""
    runs: int
    failed: int
    terminations: str
    best_objective: float | None
    mean_objective: float | None
    mean_gap: float | None
    mean_first_plan_s: float | None
    mean_wall_s: float | None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(records: Iterable[Record], *, by_budget: bool = False) -> list[SummaryRow]:
    """One row per instance and backend (and budget), sorted."""
    groups: dict[tuple[Any, ...], list[Record]] = {}
    for r in records:
        budget = r.get("budget_s") if by_budget else None
        groups.setdefault(
            (str(r.get("instance")), str(r.get("backend") or "-"), _none_first(budget)), []
        ).append(r)
    rows = []
    for _, group in sorted(groups.items(), key=lambda kv: kv[0]):
        first = group[0]
        ok = [r for r in group if r["ok"]]
        objectives = [r["objective"]["total"] for r in ok]
        counts = Counter(r["termination"] for r in ok)
        rows.append(
            SummaryRow(
                instance=str(first.get("instance")),
                backend=str(first.get("backend") or "-"),
                budget_s=first.get("budget_s") if by_budget else None,
                runs=len(group),
                failed=len(group) - len(ok),
                terminations=", ".join(f"{t} {n}" for t, n in sorted(counts.items())),
                best_objective=max(objectives) if objectives else None,
                mean_objective=_mean(objectives),
                mean_gap=_mean([r["gap"] for r in ok if r["gap"] is not None]),
                mean_first_plan_s=_mean(
                    [
                        r[TIMING_KEY]["first_plan_s"]
                        for r in ok
                        if r[TIMING_KEY]["first_plan_s"] is not None
                    ]
                ),
                mean_wall_s=_mean(
                    [r[TIMING_KEY]["wall_s"] for r in ok if r[TIMING_KEY]["wall_s"] is not None]
                ),
            )
        )
    return rows


SUMMARY_HEADER = (
    "instance",
    "backend",
    "budget s",
    "runs",
    "failed",
    "terminations",
    "best objective",
    "mean objective",
    "mean gap",
    "mean first plan s",
    "mean wall s",
)


def summary_header(rows: Sequence[SummaryRow]) -> list[str]:
    """SUMMARY_HEADER, without the budget column unless the rows are per budget."""
    per_budget = any(r.budget_s is not None for r in rows)
    return [h for h in SUMMARY_HEADER if per_budget or h != "budget s"]


def summary_cells(row: SummaryRow, per_budget: bool = False) -> list[str]:
    def num(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    budget = [num(row.budget_s, "g")] if per_budget else []
    return [
        row.instance,
        row.backend,
        *budget,
        str(row.runs),
        str(row.failed),
        row.terminations or "-",
        num(row.best_objective, ".6g"),
        num(row.mean_objective, ".6g"),
        "-" if row.mean_gap is None else f"{row.mean_gap:.2%}",
        num(row.mean_first_plan_s, ".3f"),
        num(row.mean_wall_s, ".3f"),
    ]


def format_summary(rows: Sequence[SummaryRow]) -> str:
    header = summary_header(rows)
    per_budget = len(header) == len(SUMMARY_HEADER)
    table = [header] + [summary_cells(r, per_budget) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table
    )


def format_errors(records: Iterable[Record], limit: int = 20) -> str:
    """The failures, one entry per distinct error (with its run count and violations), at
    most `limit` entries."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if not r["ok"]:
            e = r["error"]
            message = str(e["message"])
            text = f"{e['kind']}: {message}"
            if not message.startswith(str(r["file"])):
                text = f"{r['file']}: {text}"
            if len(e["violations"]) > 1:  # the message quotes the first
                text += "".join(f"\n    {v['field']}: {v['description']}" for v in e["violations"])
            groups.setdefault(text, []).append(r)
    lines = []
    for text, runs in list(groups.items())[:limit]:
        head, _, rest = text.partition("\n")
        lines.append(f"{head} ({len(runs)} run{'s' if len(runs) > 1 else ''})")
        if rest:
            lines.append(rest)
    if len(groups) > limit:
        lines.append(f"... and {len(groups) - limit} more errors")
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def _csv(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def parse_backends(text: str) -> list[str]:
    try:
        return [parse_backend(b).name.lower() for b in _csv(text)]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_budgets(text: str) -> list[float]:
    try:
        return [parse_duration(b) for b in _csv(text)]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_seeds(text: str) -> list[int]:
    out = []
    for s in _csv(text):
        try:
            n = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid seed {s!r}") from None
        if not 0 <= n < 2**31:
            raise argparse.ArgumentTypeError(f"seed {n} is out of range [0, 2^31)")
        out.append(n)
    return out


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {n}")
    return n


def _threads(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if not 0 <= n <= 256:
        raise argparse.ArgumentTypeError(f"must be in [0, 256], got {n}")
    return n


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="DIR_OR_GLOB",
        help="instance files: a directory (its *.json), a glob ('runs/**/*.json') or a file",
    )
    parser.add_argument(
        "--backends",
        type=parse_backends,
        metavar="LIST",
        help="e.g. auto,heuristic (default: each request's own backend)",
    )
    parser.add_argument(
        "--budgets",
        type=parse_budgets,
        metavar="LIST",
        help="time budgets, e.g. 1s,5s (default: each request's own)",
    )
    parser.add_argument(
        "--seeds", type=parse_seeds, metavar="LIST", help="e.g. 1,2 (default: each request's own)"
    )
    parser.add_argument(
        "--threads",
        type=_threads,
        default=1,
        help="solver threads per run, overriding file and profile (default 1, "
        "so that N workers use N cores)",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=None,
        help="runs in parallel (default: the cores here; 1: in this process)",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="run on a Ray cluster ('auto', 'ray://host:10001', or 'local')",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results.jsonl"),
        help="JSON Lines results file (default results.jsonl)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--resume",
        action="store_true",
        help="continue the results file: skip runs it already holds",
    )
    mode.add_argument("--overwrite", action="store_true", help="start the results file over")
    parser.add_argument(
        "--max-runs",
        type=_positive_int,
        metavar="N",
        help="stop after N new runs (continue later with --resume)",
    )
    parser.add_argument(
        "--store-allocation",
        nargs="?",
        const="name",
        choices=JOB_CLASS_MODES,
        metavar="name|workload",
        help="store GPUs per (GPU type, job class) for the report's heatmap; "
        "job class from the job name (default) or the workload kind",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def config_from_args(args: argparse.Namespace, profile: Profile | None) -> BatchConfig:
    workers = args.workers if args.workers is not None else available_cores()
    return BatchConfig(
        inputs=args.inputs,
        out=args.out,
        backends=args.backends,
        budgets=args.budgets,
        seeds=args.seeds,
        threads=args.threads,
        workers=workers,
        ray_address=args.ray_address,
        resume=args.resume,
        overwrite=args.overwrite,
        max_runs=args.max_runs,
        allocation_mode=args.store_allocation,
        profile=profile,
    )


def command(
    args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """``dsfro batch``: 0 when every run has a plan, 1 when some failed, 2 for bad arguments."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        profile = getattr(args, "profile", None)
        if isinstance(profile, str | Path):
            profile = load_profile(profile)
        config = config_from_args(args, profile)
        outcome = run_batch(config, progress=None if args.quiet else err)
    except (BatchError, ProfileError) as e:
        print(f"dsfro batch: error: {e}", file=err)
        return 2
    except KeyboardInterrupt:
        print(
            f"dsfro batch: interrupted; finished runs are in {args.out}, continue with --resume",
            file=err,
        )
        return 130
    if outcome.dropped_partial:
        print(
            f"dsfro batch: dropped an incomplete last line of {args.out} (a crash mid-write)",
            file=err,
        )
    print(format_summary(summarize(outcome.records)), file=out)
    print(
        f"\n{outcome.new_runs} runs now, {outcome.skipped} already in {args.out}, "
        f"{outcome.failed} failed",
        file=out,
    )
    if outcome.remaining:
        print(f"{outcome.remaining} runs left (--max-runs): continue with --resume", file=out)
    if outcome.failed:
        print(format_errors(outcome.records), file=err)
    return outcome.exit_code


__all__ = [
    "BatchConfig",
    "BatchError",
    "BatchOutcome",
    "Progress",
    "ResultsFile",
    "ResultsFileError",
    "SolveTask",
    "add_arguments",
    "command",
    "error_record",
    "job_class",
    "key_of",
    "parse_results",
    "read_results",
    "result_record",
    "run_batch",
    "solve_task",
    "strip_timing",
    "summarize",
]
