"""Trace files (solver.simulate.trace): a good trace read with defaults and sorted, one test
per bad-input rule, every problem of a file at once, writing and reading back, and a trace
checked against a cluster and a workload mix."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.simulate.core import SimulationError, TraceJob
from solver.simulate.trace import COLUMNS, check_trace_against, read_trace, write_trace
from solver.simulate.workload import WorkloadMix
from tests.simulate_helpers import HEADER, trace_file

SUBMIT = "must be a finite number >= 0 and at most 315360000 (ten years)"
DURATION = "must be a finite number > 0 and at most 31536000 (a year)"


def problems_of(path: Path) -> list[str]:
    with pytest.raises(SimulationError) as e:
        read_trace(path)
    return e.value.problems


def test_a_good_trace_reads_with_defaults_and_sorted(tmp_path: Path) -> None:
    p = trace_file(
        tmp_path,
        "b,10,t1,llama2-7b,8,100",
        "a,5,t2,philly,1,3.5",
        "c,5,t2,philly,2,7",
    )
    jobs = read_trace(p)
    assert [j.job_id for j in jobs] == ["a", "c", "b"]  # by time, ties in file order
    assert jobs[0] == TraceJob("a", 5.0, "t2", "philly", 1, 3.5)
    assert (jobs[0].deadline_s, jobs[0].weight, jobs[0].preemptible) == (None, 1.0, True)
    assert [j.row for j in jobs] == [3, 4, 2]


def test_missing_file(tmp_path: Path) -> None:
    (msg,) = problems_of(tmp_path / "nope.csv")
    assert msg.startswith(f"{tmp_path / 'nope.csv'}: cannot read: ")


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("")
    assert problems_of(p) == [
        f"{p}:1: empty file: expected a header with job_id, submit_time_s, tenant, workload, "
        "num_gpus, duration_s"
    ]


def test_header_only(tmp_path: Path) -> None:
    p = trace_file(tmp_path)
    assert problems_of(p) == [f"{p}:2: no jobs after the header"]


def test_missing_columns_each_named(tmp_path: Path) -> None:
    p = trace_file(tmp_path, "a,0,t,8", header="job_id,submit_time_s,tenant,num_gpus")
    assert problems_of(p) == [
        f"{p}:1:workload: missing required column",
        f"{p}:1:duration_s: missing required column",
    ]


def test_duplicate_column(tmp_path: Path) -> None:
    p = trace_file(tmp_path, "a,0,t,w,1,1,u", header=HEADER + ",tenant")
    assert problems_of(p) == [f"{p}:1:tenant: duplicate column"]


def test_wrong_field_count(tmp_path: Path) -> None:
    p = trace_file(tmp_path, "a,0,t,philly,1,5", "b,0,t,philly,1")
    assert problems_of(p) == [f"{p}:3: 5 fields, the header has 6"]


def test_empty_text_fields(tmp_path: Path) -> None:
    p = trace_file(tmp_path, ",0, ,,1,5")
    assert problems_of(p) == [
        f"{p}:2:job_id: must not be empty",
        f"{p}:2:tenant: must not be empty",
        f"{p}:2:workload: must not be empty",
    ]


def test_duplicate_job_id(tmp_path: Path) -> None:
    p = trace_file(tmp_path, "a,0,t,philly,1,5", "b,0,t,philly,1,5", "a,1,t,philly,1,5")
    assert problems_of(p) == [f"{p}:4:job_id: duplicate job_id 'a' (first on line 2)"]


@pytest.mark.parametrize("value", ["-5", "x", "nan", "inf", "", "4e8"])
def test_bad_submit_time(tmp_path: Path, value: str) -> None:
    p = trace_file(tmp_path, f"a,{value},t,philly,1,5")
    assert problems_of(p) == [f"{p}:2:submit_time_s: {SUBMIT}, got {value!r}"]


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "x", ""])
def test_bad_gpu_count(tmp_path: Path, value: str) -> None:
    p = trace_file(tmp_path, f"a,0,t,philly,{value},5")
    assert problems_of(p) == [f"{p}:2:num_gpus: must be a positive integer, got {value!r}"]


@pytest.mark.parametrize("value", ["0", "-1", "inf", "x", "1e13", "31536001"])
def test_bad_duration(tmp_path: Path, value: str) -> None:
    p = trace_file(tmp_path, f"a,0,t,philly,1,{value}")
    assert problems_of(p) == [f"{p}:2:duration_s: {DURATION}, got {value!r}"]


def test_bad_optional_columns(tmp_path: Path) -> None:
    p = trace_file(
        tmp_path,
        "a,0,t,philly,1,5,0,-1,maybe",
        "b,0,t,philly,1,5,1e13,5000,",
        header=HEADER + ",deadline_s,weight,preemptible",
    )
    deadline = "must be empty (no deadline) or a finite number > 0 and at most 315360000 " \
        "(ten years)"  # fmt: skip
    weight = "must be empty (1) or a number from 0.001 to 1000"
    assert problems_of(p) == [
        f"{p}:2:deadline_s: {deadline}, got '0'",
        f"{p}:2:weight: {weight}, got '-1'",
        f"{p}:2:preemptible: must be empty (true), true, false, 1 or 0, got 'maybe'",
        f"{p}:3:deadline_s: {deadline}, got '1e13'",  # the wire's limits, named by row
        f"{p}:3:weight: {weight}, got '5000'",
    ]


def test_every_problem_of_a_file_at_once(tmp_path: Path) -> None:
    p = trace_file(tmp_path, "a,-1,t,philly,1,5", "b,0,t,philly,0,5", "c,0,t,philly,1,0")
    assert problems_of(p) == [
        f"{p}:2:submit_time_s: {SUBMIT}, got '-1'",
        f"{p}:3:num_gpus: must be a positive integer, got '0'",
        f"{p}:4:duration_s: {DURATION}, got '0'",
    ]


def test_optional_values_extra_columns_and_blank_lines(tmp_path: Path) -> None:
    p = trace_file(
        tmp_path,
        "x,a,0,t,philly,1,5,3600,2.5,FALSE",
        "",
        "y,b,1,t,philly,1,5,,,1",
        header="note," + HEADER + ",deadline_s,weight,preemptible",
    )
    a, b = read_trace(p)
    assert (a.deadline_s, a.weight, a.preemptible, a.row) == (3600.0, 2.5, False, 2)
    assert (b.deadline_s, b.weight, b.preemptible, b.row) == (None, 1.0, True, 4)


def test_write_then_read_is_the_same_trace(tmp_path: Path) -> None:
    jobs = [
        TraceJob("j1", 0.0, "t", "llama2-7b", 8, 3600.0),
        TraceJob("j,2", 0.1 + 0.2, "t 2", "philly", 1, 1e-3, deadline_s=7200.5, weight=0.3),
        TraceJob("j3", 12.0, "t", "gavel-lm-bs5", 4, 1.0 / 3.0, preemptible=False),
    ]
    p = tmp_path / "t.csv"
    write_trace(jobs, p)
    assert read_trace(p) == jobs
    assert p.read_text().splitlines()[0] == ",".join(COLUMNS)
    assert [f.name for f in tmp_path.iterdir()] == ["t.csv"]  # no temporary file left


# ---------------------------------------------------------------- trace against cluster and mix


def test_more_gpus_than_the_cluster_or_one_type(
    tmp_path: Path, cluster: pb.ClusterSnapshot
) -> None:
    p = trace_file(tmp_path, "a,0,t,philly,600,5", "b,0,t,philly,256,5", "c,0,t,philly,1,5")
    problems = check_trace_against(read_trace(p), p, cluster, WorkloadMix())
    assert problems == [
        f"{p}:2:num_gpus: needs 600 GPUs, the cluster has 512 available",
        f"{p}:3:num_gpus: needs 256 GPUs of one type, the cluster's largest pool of one type "
        "has 128 (V100-16GB)",
    ]


def test_unknown_workload(tmp_path: Path, cluster: pb.ClusterSnapshot) -> None:
    p = trace_file(tmp_path, "a,0,t,gpt5,1,5")
    assert check_trace_against(read_trace(p), p, cluster, WorkloadMix()) == [
        f"{p}:2:workload: unknown workload 'gpt5': not a class of the mix (philly), an "
        "architecture of models/architectures.json or a workload measured on the cluster's GPU "
        "types"
    ]
    assert check_trace_against(read_trace(p), p, cluster, {"philly"}) == [
        f"{p}:2:workload: unknown workload 'gpt5'"
    ]


def test_workloads_that_cannot_run_at_the_requested_count(
    tmp_path: Path, cluster: pb.ClusterSnapshot
) -> None:
    p = trace_file(
        tmp_path,
        "a,0,t,philly,24,5",
        "b,0,t,llama2-70b,1,5",
        "c,0,t,gavel-lm-bs5,16,5",
        "d,0,t,llama2-7b,4,5",
        "e,0,t,gavel-lm-bs5,8,5",
    )
    assert check_trace_against(read_trace(p), p, cluster, WorkloadMix()) == [
        f"{p}:2:num_gpus: no workload of class 'philly' runs on 24 GPUs of one type",
        f"{p}:3:num_gpus: llama2-70b cannot run on 1 GPUs of any type of the cluster",
        f"{p}:4:num_gpus: gavel-lm-bs5 was not measured on 16 GPUs of a type of the cluster",
    ]
