"""The parts of slice packing one by one: a GPU's layout while packing (search.mig_gpus), the
packer's passes (search.slices), the whole-GPU problem and kept slices (core.mig), the
reconfiguration term (scoring.objective) and the shared clock (scoring.mig_checks)."""

from __future__ import annotations

import dataclasses

import pytest

from solver.core.mig import (
    _less_quota,
    kept_slices,
    uses_mig,
    whole_gpus_only,
    whole_problem,
)
from solver.domain import POWER, GpuSlice, JobAssignment, JobState, Problem, Quota, TenantQueue
from solver.mig import GpuLayout, LayoutChange, MigInstance, SliceRequest
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.scoring.objective import reconfiguration_cost, reconfigured_gpus, score_plan
from solver.search.mig_gpus import MigGpu
from solver.search.slices import Packer, pack_slices
from tests.factories import solve
from tests.mig_cases import GEOMETRY, ONE_G, on_instance, problem, small


def gpu(*instances: MigInstance) -> MigGpu:
    return MigGpu.of("n0", 0, "r0", GEOMETRY, instances)


def _running(p: Problem, job: str, gpu_index: int) -> JobAssignment:
    """`job` running whole on GPU `gpu_index` of n0 at its fastest one-GPU configuration."""
    config = max(
        (c for c in build_config_set(p).by_job[job] if c.num_gpus == 1 and not c.mig_profile),
        key=lambda c: c.samples_per_second,
    )
    return JobAssignment(job, JobState.RUNNING, config, (GpuSlice("n0", (gpu_index,)),))


# ---------------------------------------------------------------- MigGpu


def test_a_new_instance_leaves_room_for_the_larger_ones() -> None:
    _, new = gpu().new_layout("3g.40gb") or ([], None)
    assert new == MigInstance("3g.40gb", 4)  # 4g.40gb can still go at 0
    assert gpu().new_layout("7g.80gb") == ([MigInstance("7g.80gb", 0)], MigInstance("7g.80gb", 0))


def test_free_instances_stay_unless_they_are_in_the_way() -> None:
    g = gpu(MigInstance(ONE_G, 0), MigInstance(ONE_G, 6))
    layout, new = g.new_layout("3g.40gb") or ([], None)
    assert new == MigInstance("3g.40gb", 4)  # at 0 it would drop 1g@0; at 4, 1g@6
    assert {i.place for i in layout} == {(ONE_G, 0), ("3g.40gb", 4)}
    g.instances[0] = MigInstance(ONE_G, 0, "x")
    assert g.new_layout("7g.80gb") is None  # a job's instance never goes


def test_assign_changed_and_change() -> None:
    g = gpu(MigInstance(ONE_G, 0))
    assert not g.changed() and g.change() is None
    g.assign("a", (ONE_G, 0))
    assert g.jobs() == ["a"] and g.free_instances() == []
    with pytest.raises(ValueError):
        g.assign("b", (ONE_G, 0))
    g.instances.append(MigInstance(ONE_G, 3, "b"))
    change = g.change()
    assert change == LayoutChange(
        "n0", GpuLayout(0, (MigInstance(ONE_G, 0), MigInstance(ONE_G, 3)))
    )


# ---------------------------------------------------------------- the packer


def queued(*names: str) -> list[JobAssignment]:
    return [JobAssignment(n, JobState.QUEUED) for n in names]


def test_waiting_jobs_most_valuable_first_and_only_with_slices() -> None:
    p = problem(small("lo", measured=10.0), small("hi", measured=60.0), small("no", slices=None))
    packer = Packer(p, build_config_set(p), queued("lo", "hi", "no"), {})
    assert [j.name for j in packer.waiting()] == ["hi", "lo"]


def test_existing_free_instances_go_first_on_the_fullest_gpu() -> None:
    layouts = (
        GpuLayout(0, (MigInstance(ONE_G, 0), MigInstance(ONE_G, 1))),
        GpuLayout(1, (MigInstance(ONE_G, 0),)),
    )
    p = problem(small("a"), gpus=3, layouts=layouts)
    plan = pack_slices(p, build_config_set(p), queued("a"), {})
    a = plan.assignment("a")
    assert a.placement == (GpuSlice("n0", (1,)),) and a.mig == MigInstance(ONE_G, 0)
    assert plan.layout_changes == ()


def test_spare_gpus_are_partitioned_on_the_node_with_fewest_of_them() -> None:
    p = dataclasses.replace(problem(small("a"), gpus=2))
    n0 = p.cluster.nodes[0]
    n1 = dataclasses.replace(n0, name="n1", gpu_count=1)
    p = dataclasses.replace(p, cluster=dataclasses.replace(p.cluster, nodes=(n0, n1)))
    plan = pack_slices(p, build_config_set(p), queued("a"), {})
    assert plan.assignment("a").placement == (GpuSlice("n1", (0,)),)
    [change] = plan.layout_changes
    assert change.node == "n1" and reconfigured_gpus(p.cluster, plan.layout_changes) == 1


def test_a_power_budget_keeps_a_slice_out() -> None:
    idle = 50.0
    only = SliceRequest("", ONE_G)
    p = problem(small("a", slices=only), power=idle + 39.0)  # its slice draws 40 W above idle
    plan = pack_slices(p, build_config_set(p), queued("a"), {})
    assert plan.assignment("a").state is JobState.QUEUED
    p = problem(small("a", slices=only), power=idle + 40.0)
    assert pack_slices(p, build_config_set(p), queued("a"), {}).assignment("a").mig is not None


def test_a_conversion_that_does_not_pay_is_undone() -> None:
    p = problem(small("whole", measured=None), small("b", measured=None))
    configs = build_config_set(p)
    [c] = [c for c in configs.by_job["whole"] if c.sm_clock_mhz == 1410]
    base = [JobAssignment("whole", JobState.RUNNING, c, (GpuSlice("n0", (0,)),)), *queued("b")]
    plan = pack_slices(p, configs, base, {})
    assert plan.assignment("whole").mig is None and plan.assignment("whole").config == c
    assert plan.layout_changes == ()
    assert check_plan(p, plan.assignments, plan.layout_changes) == []


def test_a_conversion_that_pays_is_made_unless_the_time_is_up() -> None:
    """Seven measured slice jobs are worth 7 x 40 % of the one on the whole GPU; past
    `stop_at` no GPU is converted (the plan is still whole and valid)."""
    p = problem(*(small(f"j{k}") for k in range(7)))
    configs = build_config_set(p)
    [c] = [c for c in configs.by_job["j0"] if c.sm_clock_mhz == 1410]
    base = [JobAssignment("j0", JobState.RUNNING, c, (GpuSlice("n0", (0,)),)),
            *(a for k in range(1, 7) for a in queued(f"j{k}"))]  # fmt: skip
    plan = pack_slices(p, configs, base, {})
    assert len(plan.layout_changes) == 1 and plan.assignment("j0").mig is not None
    late = pack_slices(p, configs, base, {}, stop_at=0.0)
    assert late.layout_changes == () and late.assignment("j0").config == c
    assert check_plan(p, late.assignments, late.layout_changes) == []


def test_a_running_slice_job_goes_back_to_its_own_instance() -> None:
    runs = small("runs", current=on_instance("n0", 0, "2g.20gb", 2))
    layout = GpuLayout(0, (MigInstance(ONE_G, 0), MigInstance("2g.20gb", 2, "runs")))
    p = problem(runs, layouts=(layout,))
    plan = pack_slices(p, build_config_set(p), queued("runs"), {})
    a = plan.assignment("runs")
    assert a.mig == MigInstance("2g.20gb", 2) and not a.migrated and plan.layout_changes == ()


# ---------------------------------------------------------------- core.mig


def test_uses_mig_and_whole_gpus_only() -> None:
    """Partitioned GPUs that hold a job (marked busy, or a job's current allocation) are left
    out of the whole-GPU problem; a partitioned GPU no job is on stays in it."""
    free = GpuLayout(1, (MigInstance(ONE_G, 0),))
    busy = GpuLayout(2, (MigInstance(ONE_G, 0, "other"),))
    held = GpuLayout(3, (MigInstance(ONE_G, 0),))
    runs = small("runs", current=on_instance("n0", 3, ONE_G, 0))
    p = problem(small("a", slices=None), runs, gpus=4, layouts=(free, busy, held))
    assert uses_mig(p)
    node = whole_gpus_only(p).cluster.nodes[0]
    assert node.unavailable_gpu_indices == {2, 3}
    assert {x.gpu_index for x in node.mig_layouts} == {2, 3}  # GPU 1 is whole to them
    plain = problem(small("a", slices=None), gpus=4)
    assert not uses_mig(plain) and whole_gpus_only(plain) is plain


def test_a_partitioned_gpu_no_job_holds_goes_back_to_whole_for_a_whole_gpu_job() -> None:
    """Small jobs that left a GPU partitioned do not keep it from a whole-GPU job: the plan runs
    the job there and changes the GPU back to whole, at one reconfiguration."""
    p = problem(small("big", slices=None), layouts=(GpuLayout(0, (MigInstance(ONE_G, 0),)),))
    result = solve(p)
    plan = result.plan
    a = plan.assignment("big")
    assert a.state is JobState.RUNNING and a.mig is None
    assert a.placement == (GpuSlice("n0", (0,)),)
    assert plan.layout_changes == (LayoutChange("n0", GpuLayout(0)),)
    assert check_plan(p, plan.assignments, plan.layout_changes) == []
    assert reconfigured_gpus(p.cluster, plan.layout_changes) == 1


def test_the_packer_changes_back_to_whole_only_the_partitioned_gpus_a_whole_job_uses() -> None:
    layouts = (GpuLayout(0, (MigInstance(ONE_G, 0),)), GpuLayout(1, (MigInstance(ONE_G, 0),)))
    p = problem(small("big", slices=None), small("s"), gpus=2, layouts=layouts)
    base = _running(p, "big", 1)
    plan = pack_slices(p, build_config_set(p), [base, JobAssignment("s", JobState.QUEUED)], {})
    assert plan.layout_changes == (LayoutChange("n0", GpuLayout(1)),)
    assert plan.assignment("s").mig == MigInstance(ONE_G, 0)  # the free instance of GPU 0
    assert plan.assignment("s").placement == (GpuSlice("n0", (0,)),)
    assert check_plan(p, plan.assignments, plan.layout_changes) == []


def test_kept_slices_share_the_clock_of_most_value_and_leave_the_rest() -> None:
    a = small("a", current=on_instance("n0", 0, ONE_G, 0, 1410), preemptible=False)
    b = small("b", current=on_instance("n0", 0, ONE_G, 1, 1275), preemptible=False)
    c = small("c", current=on_instance("n0", 0, ONE_G, 2))  # preemptible: not kept
    layout = GpuLayout(0, tuple(MigInstance(ONE_G, s, n) for s, n in enumerate("abc")))
    p = problem(a, b, c, layouts=(layout,))
    kept, blocked = kept_slices(p, build_config_set(p))
    assert blocked == [] and sorted(kept) == ["a", "b"]
    # measured at 1410 only: the one clock both have
    assert {k[0].sm_clock_mhz for k in kept.values()} == {1410}
    assert kept["b"][1:] == (("n0", 0), MigInstance(ONE_G, 1))


def test_kept_slices_without_a_common_clock_are_blocked() -> None:
    a = small("a", current=on_instance("n0", 0, "3g.40gb", 0), preemptible=False)
    layout = GpuLayout(0, (MigInstance("3g.40gb", 0, "a"),))
    p = problem(a, layouts=(layout,))
    configs = build_config_set(p)
    configs = dataclasses.replace(configs, slices={})
    assert kept_slices(p, configs) == ({}, ["a"])


def test_the_whole_problem_leaves_out_partitioned_gpus_kept_jobs_and_their_draw() -> None:
    a = small("a", current=on_instance("n0", 0, ONE_G, 0), preemptible=False)
    layout = GpuLayout(0, (MigInstance(ONE_G, 0, "a"),))
    p = problem(a, small("b"), gpus=2, layouts=(layout,), power=1000.0)
    p = dataclasses.replace(p, cluster=dataclasses.replace(
        p.cluster, rack_power_budgets_watts={"r0": 900.0},
        queues=(TenantQueue("t", quotas={"A100-80GB": Quota(2.0), POWER: Quota(500.0)}),),
    ))  # fmt: skip
    kept, _ = kept_slices(p, build_config_set(p))
    rest = whole_problem(p, kept)
    assert [j.name for j in rest.jobs] == ["b"]
    assert rest.cluster.nodes[0].unavailable_gpu_indices == {0}
    assert rest.cluster.power_budget_watts == pytest.approx(960.0)  # 40 W above idle
    assert rest.cluster.rack_power_budgets_watts["r0"] == pytest.approx(860.0)
    [q] = rest.cluster.queues
    assert q.quotas["A100-80GB"].nominal == 1.0 and q.quotas[POWER].nominal == 460.0


def test_less_quota_keeps_lending_limits_and_unlimited_power() -> None:
    p = problem(small("a"))
    [c] = [c for c in build_config_set(p).slices["a"] if c.mig_profile == ONE_G]
    q = TenantQueue("t", "co", quotas={"A100-80GB": Quota(3.0, None, 1.0)})
    less = _less_quota(q, c)
    assert less.quotas["A100-80GB"] == Quota(2.0, None, 1.0)
    assert POWER not in less.quotas


# ---------------------------------------------------------------- objective and checker


def test_a_reconfiguration_costs_a_migration_of_weight_one() -> None:
    layout = GpuLayout(0, (MigInstance(ONE_G, 0),))
    p = problem(small("a", slices=None), gpus=2, layouts=(layout,))
    same = LayoutChange("n0", layout)
    other = LayoutChange("n0", GpuLayout(1, (MigInstance("7g.80gb", 0),)))
    assert reconfigured_gpus(p.cluster, [same]) == 0
    assert reconfigured_gpus(p.cluster, [same, other]) == 1
    assert reconfiguration_cost(p.weights) == p.weights.migration
    plan = [JobAssignment("a", JobState.QUEUED)]
    assert score_plan(p, plan, {"a": 100.0}, [other]).migration == 1.0
    assert score_plan(p, plan, {"a": 100.0}).migration == 0.0


def test_the_jobs_of_one_gpu_share_its_clock() -> None:
    p = problem(small("a"), small("b"))
    configs = build_config_set(p).slices
    [ca] = [c for c in configs["a"] if c.mig_profile == ONE_G and c.sm_clock_mhz == 1410]
    [cb] = [c for c in configs["b"] if c.mig_profile == ONE_G]
    on = (GpuSlice("n0", (0,)),)
    change = LayoutChange("n0", GpuLayout(0, (MigInstance(ONE_G, 0), MigInstance(ONE_G, 1))))
    plan = [
        JobAssignment("a", JobState.RUNNING, ca, on, mig=MigInstance(ONE_G, 0)),
        JobAssignment("b", JobState.RUNNING, cb, on, mig=MigInstance(ONE_G, 1)),
    ]
    assert [v.constraint for v in check_plan(p, plan, [change])] == []
    slower = cb._replace(sm_clock_mhz=1275)
    plan[1] = dataclasses.replace(plan[1], config=slower)
    assert [v.constraint for v in check_plan(p, plan, [change])] == ["mig_clock"]
