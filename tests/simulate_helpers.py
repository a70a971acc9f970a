"""Helpers of the simulation-input tests (tests/test_simulate_trace.py, scenario): the
header of a trace file, and a trace file written from rows."""

from __future__ import annotations

from pathlib import Path

HEADER = "job_id,submit_time_s,tenant,workload,num_gpus,duration_s"


def trace_file(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    p = tmp_path / "t.csv"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p
