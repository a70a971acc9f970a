"""Planning and running a batch: inputs expanded into runs (file, backend, budget, seed), one run
solved in a worker, the runs sent to an Executor in chunks and their lines appended in order."""

from __future__ import annotations

import glob
import hashlib
import itertools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import (
    RequestFileError,
    backend_from_proto,
    requested_time_budget,
)
from solver.app.limits import Limits, backend_name, parse_backend
from solver.app.pipeline import Overrides
from solver.app.profile import Profile
from solver.app.validation import validate_request
from solver.core.settings import settings_digest
from solver.core.solver import Solver
from solver.offline.batch.progress import Progress
from solver.offline.batch.records import (
    BatchError,
    Record,
    RunKey,
    _none_first,
    _size,
    error_record,
    result_record,
)
from solver.offline.batch.results import ResultsLog, latest_by_key
from solver.runtime.executors import make_executor
from solver.runtime.pools import Executor, InlineExecutor, WorkerLost, lost_for_good, map_or_lost
from solver.wire.files import BINARY_SUFFIXES, load_request_file

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SolveTask:
    """One run, picklable for the worker processes."""

    key: RunKey
    request: bytes
    """The SolveRequest, serialized, with backend, budget, seed and threads set."""
    size: dict[str, int]
    solver: Solver
    allocation_mode: str | None = None


def solve_task(task: SolveTask) -> Record:
    """Solve one run and return its result line (an error line if the solver fails)."""
    try:
        solved = pipeline.solve_request(pb.SolveRequest.FromString(task.request), task.solver)
        return result_record(
            task.key, solved.problem, solved.result, task.size, task.allocation_mode
        )
    except Exception as e:  # reported in the line; the batch goes on
        log.debug("run %s failed", task.key, exc_info=True)
        return error_record(task.key, "internal", f"{type(e).__name__}: {e}", size=task.size)
    finally:
        task.solver.close()


def lost_record(task: SolveTask, error: WorkerLost) -> Record:
    """The line of a run whose worker died on every try (killed, or out of memory)."""
    return error_record(task.key, "internal", lost_for_good(error), size=task.size)


def expand_inputs(patterns: Sequence[str]) -> list[str]:
    """Instance files of directories (their ``*.json``, and binary ``*.binpb`` and ``*.pb``),
    globs and file names, sorted, once each; BatchError if a pattern matches nothing."""
    out: list[str] = []
    for pattern in patterns:
        path = Path(pattern)
        if path.is_dir():
            kinds = ("*.json", *(f"*{s}" for s in BINARY_SUFFIXES))
            found = sorted(str(p) for k in kinds for p in path.glob(k) if p.is_file())
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
    solver: Solver = field(default_factory=Solver)
    """Solves every run (its settings go to the worker processes)."""


@dataclass
class Run:
    key: RunKey
    setup: str
    """The digest of what decides the run beyond its key (``SETUP_FIELD``)."""
    task: SolveTask | None = None
    record: Record | None = None
    """Known without solving: the error of an unreadable or invalid request."""


SETUP_FIELD = "setup_sha256"
"""A result line's digest of the request as solved (the file with the profile and flags
applied) and the solver's settings (the profile's [tuning], DSFRO_TUNING_*): a resumed batch
refuses lines made otherwise, which would be mixed silently with its own."""


def setup_digest(batch: str, request: bytes) -> str:
    """The run's digest: its request with the batch's own (``batch_digest``)."""
    return hashlib.sha256(request + batch.encode()).hexdigest()


def batch_digest(config: BatchConfig) -> str:
    """What every run of the batch shares: the solver's settings and the allocation mode."""
    return settings_digest(config.solver.settings) + repr(config.allocation_mode)


def plan_runs(config: BatchConfig, files: Sequence[str]) -> list[Run]:
    """Every run, in the order they are solved and written: budget, file, backend, seed."""
    limits = Limits()
    runs: list[Run] = []
    batch = batch_digest(config)
    for file in files:
        runs.extend(_file_runs(config, file, limits, batch))
    order = {b: i for i, b in enumerate(sorted({r.key[3] for r in runs}, key=_none_first))}
    runs.sort(key=lambda r: order[r.key[3]])  # stable: file, backend, seed within a budget
    return runs


def _file_runs(config: BatchConfig, file: str, limits: Limits, batch: str) -> list[Run]:
    backends: Sequence[str | None] = config.backends or [None]
    budgets: Sequence[float | None] = config.budgets or [None]
    seeds: Sequence[int | None] = config.seeds or [None]
    sha: str | None = None
    try:
        sha = hashlib.sha256(Path(file).read_bytes()).hexdigest()
        req = load_request_file(file)
    except (OSError, RequestFileError) as e:
        message = str(e) if isinstance(e, RequestFileError) else f"{file}: cannot read: {e}"
        return [
            Run(key, setup_digest(batch, b""), record=error_record(key, "read", message))
            for key in dict.fromkeys(
                (file, sha, b, t, s) for b, t, s in itertools.product(backends, budgets, seeds)
            )
        ]
    size = _size(req)
    runs = []
    seen: set[RunKey] = set()
    for backend, budget, seed in itertools.product(backends, budgets, seeds):
        overrides = Overrides(
            time_budget_seconds=budget,
            backend=None if backend is None else parse_backend(backend),
            seed=seed,
            threads=config.threads,
        )
        run_req = pipeline.prepare(req, config.profile, overrides)
        o = run_req.options
        key = (
            file,
            sha,
            backend_name(backend_from_proto(o.backend)),
            limits.time_budget(requested_time_budget(o)),
            o.seed,
        )
        if key in seen:
            continue
        seen.add(key)
        request = run_req.SerializeToString(deterministic=True)
        setup = setup_digest(batch, request)
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
            runs.append(Run(key, setup, record=record))
        else:
            task = SolveTask(
                key,
                request,
                size,
                config.solver,
                config.allocation_mode,
            )
            runs.append(Run(key, setup, task=task))
    return runs


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
        _refuse_other_setups(config.out, runs, done)
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
                solved = iter(
                    map_or_lost(executor, solve_task, tasks, lost_record)
                    if executor and tasks
                    else []
                )
                for run in chunk:
                    record = run.record if run.record is not None else next(solved)
                    record = {**record, SETUP_FIELD: run.setup}
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


def _refuse_other_setups(out: Path, runs: Sequence[Run], done: dict[RunKey, Record]) -> None:
    """BatchError if a finished run of the file was made with another request or settings
    (lines written before the digest was kept are taken as they are)."""
    other = [r for r in runs if r.key in done and done[r.key].get(SETUP_FIELD, r.setup) != r.setup]
    if other:
        file, _, backend, budget, seed = other[0].key
        raise BatchError(
            f"{out}: {len(other)} finished run(s) were made with another request or settings "
            f"(the file, the profile, --threads or the solver's [tuning] changed since), e.g. "
            f"{file} backend {backend} budget {budget} s seed {seed}: pass --overwrite to "
            "start over, or write to another --out"
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
