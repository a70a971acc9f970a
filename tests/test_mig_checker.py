"""The checker's MIG rules, each on its own, on one small partitioned node."""

from __future__ import annotations

import dataclasses

from solver.domain import (
    Allocation,
    Cluster,
    Config,
    GpuSlice,
    Job,
    JobAssignment,
    JobState,
    Node,
    Problem,
    Shape,
    ThroughputProfile,
)
from solver.mig import GpuLayout, LayoutChange, MigInstance, SliceRequest
from solver.perfmodel.mig_catalog import load_mig_catalog
from solver.scoring import mig_checks
from solver.scoring.checker import check_plan
from solver.scoring.view import PlanView
from tests.factories import A100

T = "A100-80GB"
GPU = dataclasses.replace(A100, name=T)
S_AT = MigInstance("3g.40gb", 0)


def problem(*, preemptible: bool = True, power: float | None = None) -> Problem:
    """Node n0: GPU 0 holds 3g.40gb@0 (job s) and 1g.10gb@4 (free); job w runs on GPU 1."""
    layout = GpuLayout(0, (MigInstance("3g.40gb", 0, "s"), MigInstance("1g.10gb", 4)))
    node = Node("n0", T, 8, frozenset(), "r0", 100.0, (layout,))
    cluster = Cluster({T: GPU}, (node,), power, mig={T: load_mig_catalog()[T]})
    empty = ThroughputProfile(())
    s = Job("s", "t", 1.0, empty, 1, 1, frozenset(), slices=SliceRequest(), preemptible=preemptible,
            current=Allocation(Shape(T, 1, 1, 1), 1410, (GpuSlice("n0", (0,)),), S_AT))  # fmt: skip
    t = Job("t", "t", 1.0, empty, 1, 1, frozenset(), slices=SliceRequest("", "2g.20gb"))
    w = Job("w", "t", 1.0, empty, 1, 1, frozenset(),
            current=Allocation(Shape(T, 1, 1, 1), 1410, (GpuSlice("n0", (1,)),)))  # fmt: skip
    return Problem(cluster, (s, t, w))


def cfg(job: str, profile: str = "", memory: float = 5.0, watts: float = 100.0) -> Config:
    return Config(job, Shape(T, 1, 1, 1), 1410, 10.0, watts, memory, 1, 1, mig_profile=profile)


def on(job: str, gpu: int, inst: MigInstance | None = None, memory: float = 5.0) -> JobAssignment:
    c = cfg(job, inst.profile if inst else "", memory)
    return JobAssignment(job, JobState.RUNNING, c, (GpuSlice("n0", (gpu,)),), mig=inst)


def queued(job: str) -> JobAssignment:
    return JobAssignment(job, JobState.QUEUED)


def kinds(
    p: Problem, plan: list[JobAssignment], changes: tuple[LayoutChange, ...] = ()
) -> list[str]:
    return [v.constraint for v in check_plan(p, plan, changes)]


def test_the_running_plan_and_a_slice_on_the_free_instance_are_valid() -> None:
    p = problem()
    assert kinds(p, [on("s", 0, S_AT), queued("t"), on("w", 1)]) == []
    assert kinds(p, [on("s", 0, S_AT), on("t", 0, MigInstance("1g.10gb", 4)), on("w", 1)]) == []


def test_check_layout_changes() -> None:
    view = PlanView(problem(), [], (
        LayoutChange("n0", GpuLayout(2, (MigInstance("3g.40gb", 1),))),
        LayoutChange("n0", GpuLayout(3, (MigInstance("4g.40gb", 0), MigInstance("3g.40gb", 4)))),
        LayoutChange("n0", GpuLayout(4, (MigInstance("2g.20gb", 0), MigInstance("3g.40gb", 0)))),
        LayoutChange("n0", GpuLayout(9)),
        LayoutChange("n0", GpuLayout(5, (MigInstance("7g.80gb", 0, "s"),))),
    ))  # fmt: skip
    msgs = [v.message for v in mig_checks.check_layout_changes(view)]
    assert msgs == [
        "GPU n0/2: 3g.40gb cannot start at 1",
        "GPU n0/4: 3g.40gb@0 overlaps another instance or leaves the GPU",
        "GPU n0/9 does not exist or is unavailable",
        "GPU n0/5: a new layout names jobs",
    ]


def test_check_slice_assignment() -> None:
    p = problem()
    off = [
        v.message
        for v in mig_checks.check_slice_assignment(
            PlanView(p, [on("t", 0, MigInstance("1g.10gb", 5))])
        )
    ]
    assert off == ["1g.10gb@5 is not in the layout of GPU n0/0"]
    big = [
        v.constraint
        for v in mig_checks.check_slice_assignment(
            PlanView(p, [on("t", 0, MigInstance("1g.10gb", 4), memory=12.0)])
        )
    ]
    assert big == ["mig_memory"]
    bounds = list(mig_checks.check_slice_assignment(PlanView(p, [on("t", 0, S_AT)])))
    assert [v.message for v in bounds] == ["3g.40gb is outside its bounds"]
    whole_job = list(
        mig_checks.check_slice_assignment(PlanView(p, [on("w", 0, MigInstance("1g.10gb", 4))]))
    )
    assert [v.message for v in whole_job] == ["the job may not run on 1g.10gb"]


def test_check_one_job_per_instance() -> None:
    view = PlanView(problem(), [on("s", 0, S_AT), on("t", 0, S_AT)])
    assert [v.job for v in mig_checks.check_one_job_per_instance(view)] == ["t"]


def test_check_whole_gpu_not_partitioned() -> None:
    p = problem()
    assert [
        v.job for v in mig_checks.check_whole_gpu_not_partitioned(PlanView(p, [on("w", 0)]))
    ] == ["w"]
    to_whole = (LayoutChange("n0", GpuLayout(0)),)
    assert (
        list(mig_checks.check_whole_gpu_not_partitioned(PlanView(p, [on("w", 0)], to_whole))) == []
    )


def test_check_no_change_under_running() -> None:
    p = problem()
    wipe = (LayoutChange("n0", GpuLayout(0, (MigInstance("7g.80gb", 0),))),)
    stays = mig_checks.check_no_change_under_running(
        PlanView(p, [on("s", 0, S_AT), on("w", 1)], wipe)
    )
    assert [(v.constraint, v.job) for v in stays] == [("mig_reconfigure", "s")]
    moved = PlanView(p, [queued("s"), on("w", 1)], wipe)
    assert list(mig_checks.check_no_change_under_running(moved)) == []
    keep = (
        LayoutChange("n0", GpuLayout(0, (MigInstance("3g.40gb", 0), MigInstance("4g.40gb", 4)))),
    )
    assert kinds(p, [on("s", 0, S_AT), queued("t"), on("w", 1)], keep) != []  # 4g.40gb only at 0
    keep = (
        LayoutChange("n0", GpuLayout(0, (MigInstance("3g.40gb", 0), MigInstance("3g.40gb", 4)))),
    )
    assert kinds(p, [on("s", 0, S_AT), queued("t"), on("w", 1)], keep) == []
    under_w = (LayoutChange("n0", GpuLayout(1, (MigInstance("1g.10gb", 0),))),)
    hit = mig_checks.check_no_change_under_running(
        PlanView(p, [on("s", 0, S_AT), on("w", 1)], under_w)
    )
    assert [v.job for v in hit] == ["w"]


def test_check_non_preemptible_slice() -> None:
    p = problem(preemptible=False)
    moved = PlanView(p, [on("s", 0, MigInstance("1g.10gb", 4))])
    assert [v.job for v in mig_checks.check_non_preemptible_slice(moved)] == ["s"]
    assert list(mig_checks.check_non_preemptible_slice(PlanView(p, [on("s", 0, S_AT)]))) == []


def test_a_partitioned_gpu_draws_idle_power_and_its_slices_their_watts_above_it() -> None:
    """8 GPUs x idle 50 W, w's whole GPU (idle replaced by its 100 W), s adds 100 W on GPU 0."""
    plan = [on("s", 0, S_AT), queued("t"), on("w", 1)]
    exact = 7 * GPU.idle_watts + 100.0 + 100.0
    assert kinds(problem(power=exact), plan) == []
    assert kinds(problem(power=exact - 1.0), plan) == ["power_budget"]
