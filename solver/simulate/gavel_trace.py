"""Gavel's physical-cluster trace as a DSFRO trace (the ``gavel-physical`` scenario).

``data/gavel/physical_cluster.trace`` is Gavel's
``scheduler/traces/physical_cluster/max_min_fairness.trace`` (96 jobs; data/gavel/SOURCE.md):
one tab-separated line per job, ``job_type, command, working_directory, num_steps_arg,
needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time``
(scheduler/utils.py ``parse_trace``). A job becomes a trace row with

- workload: the measured Gavel workload of its job type (``ResNet-18 (batch size 128)`` ->
  ``gavel-resnet-18-bs128``), whose profile holds Gavel's measured throughputs
  (data/gavel/isolated_throughputs.csv, consolidated runs);
- num_gpus: the scale factor; weight: the priority weight; submit_time_s: the arrival time;
- duration_s: total_steps over the job's measured steps/s on V100 at its scale factor, so that
  with V100-16GB as the reference type the job has exactly ``total_steps`` steps of work.
"""

from __future__ import annotations

import re
from pathlib import Path

from solver import resources
from solver.offline.generate.data import _gavel_rows
from solver.simulate.core import SimulationError, TraceJob
from solver.wire import read_text

GAVEL_PHYSICAL_TRACE = resources.data_dir() / "gavel" / "physical_cluster.trace"
REFERENCE_TYPE = "v100"
"""The Gavel type the durations are computed on (the scenario's reference GPU type)."""

_JOB_TYPE = re.compile(r"^(?P<model>.+) \(batch size (?P<batch>\d+)\)$")


def steps_per_second(model: str, batch: int, num_gpus: int, gavel_type: str) -> float:
    """Gavel's measured steps/s of a job type (consolidated run); 0 where none was measured."""
    for t, m, b, n, steps in _gavel_rows():
        if (t, m, b, n) == (gavel_type, model, batch, num_gpus):
            return steps
    return 0.0


def gavel_trace(path: str | Path = GAVEL_PHYSICAL_TRACE) -> list[TraceJob]:
    """The jobs of a Gavel trace file (module docstring), ids ``gavel-000``... in file order."""
    path = Path(path)
    jobs: list[TraceJob] = []
    problems: list[str] = []
    for line_no, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            problems.append(f"{path}:{line_no}: {len(fields)} fields, expected 10")
            continue
        match = _JOB_TYPE.match(fields[0])
        if match is None:
            problems.append(f"{path}:{line_no}: job type {fields[0]!r} has no batch size")
            continue
        model, batch = match["model"], int(match["batch"])
        total_steps, scale_factor = int(fields[5]), int(fields[6])
        rate = steps_per_second(model, batch, scale_factor, REFERENCE_TYPE)
        if rate <= 0:
            problems.append(
                f"{path}:{line_no}: {fields[0]} on {scale_factor} x {REFERENCE_TYPE}: no throughput"
            )
            continue
        jobs.append(
            TraceJob(
                job_id=f"gavel-{len(jobs):03d}",
                submit_time_s=float(fields[9]),
                tenant="gavel",
                workload=f"gavel-{model.lower()}-bs{batch}",
                num_gpus=scale_factor,
                duration_s=total_steps / rate,
                weight=float(fields[7]),
                row=line_no,
            )
        )
    if problems:
        raise SimulationError(problems)
    return sorted(jobs, key=lambda j: (j.submit_time_s, j.row))
