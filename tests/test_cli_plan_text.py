"""What ``dsfro`` reads and prints as text: durations (solver.app.arguments), GPU index ranges,
plan rows and solve statistics (solver.cli.plan_text)."""

from __future__ import annotations

import argparse

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.arguments import duration_arg
from solver.cli.plan_text import (
    compact_indices,
    format_plan,
    format_queues,
    format_response,
    format_stats,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5s", 5.0),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("2d", 172_800.0),
        ("3", 3.0),
        (".25s", 0.25),
    ],
)
def test_duration_arg(text: str, seconds: float) -> None:
    assert duration_arg(text) == seconds


@pytest.mark.parametrize("text", ["", "s", "-1s", "5x", "1.5.2s", "5 s s", "0s"])
def test_duration_arg_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration_arg(text)


def test_compact_indices() -> None:
    assert compact_indices([9, 0, 1, 2, 3, 6, 8]) == "0-3,6,8-9"
    assert compact_indices([5]) == "5"
    assert compact_indices([]) == ""


def test_format_plan_rows() -> None:
    plan = pb.Plan(
        assignments=[
            pb.JobAssignment(
                job="a",
                state=pb.JOB_STATE_RUNNING,
                gpu_type="A100-80GB",
                num_gpus=6,
                data_parallel=3,
                tensor_parallel=2,
                pipeline_parallel=1,
                sm_clock_mhz=1275,
                samples_per_second=1234.56,
                watts=2100.4,
                migrated=True,
                placement=[
                    pb.GpuSlice(node="a100-0", gpu_indices=[0, 1, 2, 3]),
                    pb.GpuSlice(node="a100-1", gpu_indices=[4, 5]),
                ],
            ),
            pb.JobAssignment(
                job="b",
                state=pb.JOB_STATE_QUEUED,
                queue_reason=pb.QUEUE_REASON_INSUFFICIENT_RESOURCES,
                queue_detail="GPUs went to a",
            ),
        ]
    )
    _, a, b = format_plan(plan).splitlines()
    assert a.split() == [
        "a",
        "RUNNING",
        "A100-80GB",
        "3x2x1",
        "1275",
        "MHz",
        "a100-0:0-3",
        "a100-1:4-5",
        "1234.6",
        "2100",
        "yes",
    ]
    assert b.split()[:9] == ["b", "QUEUED", "-", "-", "-", "-", "-", "-", "no"]
    assert b.endswith("INSUFFICIENT_RESOURCES: GPUs went to a")


def test_format_stats_shows_bound_and_gap_only_when_set() -> None:
    stats = pb.SolveStats(
        termination=pb.TERMINATION_FEASIBLE,
        backend_used=pb.BACKEND_CPSAT,
        objective=0.75,
        best_bound=0.8,
        relative_gap=0.0625,
        num_configurations=12,
        num_configurations_enumerated=40,
    )
    stats.wall_time.FromMilliseconds(1500)
    text = format_stats(stats, pb.ObjectiveBreakdown(total=0.75, throughput=1.0))
    assert "termination     FEASIBLE (backend CPSAT)" in text
    assert "best bound      0.8  (gap 6.25%)" in text
    assert "wall 1.500s" in text
    assert "configurations  12 (of 40 enumerated)" in text
    stats.ClearField("best_bound")
    stats.ClearField("relative_gap")
    assert "best bound" not in format_stats(stats, pb.ObjectiveBreakdown())


def test_queue_usage_and_borrowed_jobs_are_shown() -> None:
    plan = pb.Plan()
    plan.assignments.add(
        job="a",
        state=pb.JOB_STATE_RUNNING,
        gpu_type="A100",
        num_gpus=4,
        data_parallel=4,
        tensor_parallel=1,
        pipeline_parallel=1,
        sm_clock_mhz=1410,
        borrowed=True,
    )
    plan.queues.add(
        queue="research",
        resources=[pb.ResourceUsage(resource="A100", used=12, nominal=8, borrowed=4)],
    )
    assert format_plan(plan).splitlines()[1].endswith("on borrowed quota")
    assert format_queues(plan).splitlines() == [
        "QUEUE     RESOURCE  USED  NOMINAL  BORROWED",
        "research  A100      12    8        4",
    ]
    text = format_response(pb.SolveResponse(plan=plan))
    assert "research  A100      12    8        4" in text
    assert "on borrowed quota" not in format_plan(
        pb.Plan(assignments=[pb.JobAssignment(job="b", state=pb.JOB_STATE_RUNNING)])
    )


def test_a_job_on_a_mig_instance_shows_its_profile_and_start() -> None:
    plan = pb.Plan()
    plan.assignments.add(
        job="small", state=pb.JOB_STATE_RUNNING, gpu_type="A100-80GB", data_parallel=1,
        tensor_parallel=1, pipeline_parallel=1, sm_clock_mhz=1410,
        placement=[pb.GpuSlice(node="m0", gpu_indices=[3])],
        mig_instance=pb.MigInstance(profile="1g.10gb", start=4),
    )  # fmt: skip
    plan.assignments.add(
        job="whole", state=pb.JOB_STATE_RUNNING, gpu_type="A100-80GB", data_parallel=2,
        tensor_parallel=1, pipeline_parallel=1, sm_clock_mhz=1410,
        placement=[pb.GpuSlice(node="m0", gpu_indices=[0, 1])],
    )  # fmt: skip
    _, small, whole = format_plan(plan).splitlines()
    assert "m0:3 1g.10gb@4" in small
    assert "m0:0-1" in whole and "@" not in whole
