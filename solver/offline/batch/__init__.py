"""``dsfro batch``: solve many snapshot files with several backends, budgets and seeds.

One run is one (file, backend, time budget, seed). Runs go to an Executor
(``solver.runtime.pools``:
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
     "setup_sha256": ...,     # the request as solved and the solver's settings (resume checks)
     "allocation": {...},                                               # --store-allocation
     "timing": {"first_plan_s": ..., "wall_s": ..., "detail": ..., "finished_at": ...}}

Everything that depends on the clock is under ``"timing"`` (the solver's free-text detail quotes
times too); the rest is a function of the inputs, so ``strip_timing`` of a resumed run's lines
equals that of an uninterrupted run's. (A solve cut short by its wall-clock budget can still end
differently; runs use one solver thread by default, under CP-SAT's deterministic limit.)

A file that can't be read, or whose request is invalid, gets an error line per run (with the
field paths of validation) and the batch goes on; the exit code is then 1.

The package: ``records`` (the result line and its key), ``results`` (the results file), ``runs``
(planning and running the runs), ``progress``, ``summary`` (the end table) and ``cli``.
"""

from __future__ import annotations

from solver.offline.batch.cli import (
    add_arguments,
    command,
    config_from_args,
    parse_backends,
    parse_budgets,
    parse_seeds,
)
from solver.offline.batch.progress import Progress
from solver.offline.batch.records import (
    JOB_CLASS_MODES,
    KEY_FIELDS,
    SCHEMA,
    TIMING_KEY,
    BatchError,
    Record,
    RunKey,
    allocation_counts,
    error_record,
    job_class,
    key_of,
    result_record,
)
from solver.offline.batch.results import (
    ResultsFile,
    ResultsFileError,
    ResultsLog,
    latest_by_key,
    parse_results,
    read_results,
    strip_timing,
)
from solver.offline.batch.runs import (
    BatchConfig,
    BatchOutcome,
    Run,
    SolveTask,
    expand_inputs,
    make_batch_executor,
    plan_runs,
    run_batch,
    solve_task,
)
from solver.offline.batch.summary import (
    SUMMARY_HEADER,
    SummaryRow,
    format_errors,
    format_summary,
    summarize,
    summary_cells,
    summary_header,
)

__all__ = [
    "JOB_CLASS_MODES",
    "KEY_FIELDS",
    "SCHEMA",
    "SUMMARY_HEADER",
    "TIMING_KEY",
    "BatchConfig",
    "BatchError",
    "BatchOutcome",
    "Progress",
    "Record",
    "ResultsFile",
    "ResultsFileError",
    "ResultsLog",
    "Run",
    "RunKey",
    "SolveTask",
    "SummaryRow",
    "add_arguments",
    "allocation_counts",
    "command",
    "config_from_args",
    "error_record",
    "expand_inputs",
    "format_errors",
    "format_summary",
    "job_class",
    "key_of",
    "latest_by_key",
    "make_batch_executor",
    "parse_backends",
    "parse_budgets",
    "parse_results",
    "parse_seeds",
    "plan_runs",
    "read_results",
    "result_record",
    "run_batch",
    "solve_task",
    "strip_timing",
    "summarize",
    "summary_cells",
    "summary_header",
]
