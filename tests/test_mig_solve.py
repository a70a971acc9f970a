"""Slice jobs through the real entry point (Solver.solve, and Solve over gRPC on loopback), on
small snapshots whose right answer is known."""

from __future__ import annotations

import dataclasses

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.core.solver import Solver
from solver.domain import (
    Allocation,
    Backend,
    GpuSlice,
    Job,
    JobState,
    Plan,
    Problem,
    ProfilePoint,
    Shape,
    SolveResult,
    Termination,
    ThroughputProfile,
)
from solver.mig import GpuLayout, MigInstance
from solver.scoring.checker import check_plan
from solver.scoring.evaluation import evaluate_allocations
from tests.factories import A100_80GB, solve
from tests.mig_cases import ONE_G, on_instance, problem, small
from tests.service_helpers import serving


def solved(p: Problem) -> SolveResult:
    result = solve(p)
    assert check_plan(p, result.plan.assignments, result.plan.layout_changes) == []
    return result


def instances(result: SolveResult) -> dict[str, tuple[str, int, str, int]]:
    """Job -> (node, GPU, profile, start) of the jobs on instances."""
    out = {}
    for a in result.plan.assignments:
        if a.mig is not None:
            [s] = a.placement
            out[a.job] = (s.node, s.gpu_indices[0], a.mig.profile, a.mig.start)
    return out


def test_seven_1g_jobs_fill_one_a100() -> None:
    result = solved(problem(*(small(f"j{k}") for k in range(7))))
    on = instances(result)
    assert sorted(on) == [f"j{k}" for k in range(7)]
    assert sorted(v[3] for v in on.values()) == list(range(7))
    assert {v[:3] for v in on.values()} == {("n0", 0, ONE_G)}
    [change] = result.plan.layout_changes
    assert change.node == "n0" and [i.place for i in change.layout.instances] == [
        (ONE_G, s) for s in range(7)
    ]
    assert {a.config.sm_clock_mhz for a in result.plan.assignments if a.config} == {1410}
    assert result.plan.objective.migration == 1.0  # the one reconfiguration
    s = result.stats
    # The slice aggregate's bound leaves the reconfiguration and the idle power out: not tight.
    assert s.termination is Termination.FEASIBLE
    assert s.best_bound is not None and s.best_bound > s.objective


def test_on_the_scaled_model_alone_one_whole_job_beats_seven_slices() -> None:
    """s(1g.10gb) = 1/8: seven slices are worth 7/8 of the GPU, less a reconfiguration."""
    result = solved(problem(*(small(f"j{k}", measured=None) for k in range(7))))
    assert instances(result) == {} and result.plan.layout_changes == ()
    states = [a.state for a in result.plan.assignments]
    assert states.count(JobState.RUNNING) == 1


def test_a_job_that_needs_the_whole_memory_keeps_a_whole_gpu() -> None:
    big = small("big", measured=None, memory=60.0)  # fits only 7g.80gb: nothing to gain there
    result = solved(problem(big, *(small(f"j{k}") for k in range(6)), gpus=2))
    a = result.plan.assignment("big")
    assert a.state is JobState.RUNNING and a.mig is None
    [s] = a.placement
    on = instances(result)
    assert sorted(on) == [f"j{k}" for k in range(6)]
    assert {(v[0], v[1]) for v in on.values()} == {("n0", 1 - s.gpu_indices[0])}
    assert [c.layout.gpu_index for c in result.plan.layout_changes] == [1 - s.gpu_indices[0]]


def test_a_busy_instance_blocks_a_layout_change() -> None:
    busy = small("busy", current=on_instance("n0", 0, "7g.80gb", 0), preemptible=False)
    layout = GpuLayout(0, (MigInstance("7g.80gb", 0, "busy"),))
    result = solved(problem(busy, small("new"), layouts=(layout,)))
    assert instances(result) == {"busy": ("n0", 0, "7g.80gb", 0)}
    assert result.plan.assignment("new").state is JobState.QUEUED
    assert result.plan.layout_changes == ()


def test_a_layout_change_keeps_the_busy_instance_beside_the_new_one() -> None:
    busy = small("busy", current=on_instance("n0", 0, "4g.40gb", 0), preemptible=False)
    layout = GpuLayout(0, (MigInstance("4g.40gb", 0, "busy"),))
    result = solved(problem(busy, small("new"), layouts=(layout,)))
    on = instances(result)
    assert on["busy"] == ("n0", 0, "4g.40gb", 0)
    assert on["new"][:2] == ("n0", 0) and on["new"][3] >= 4  # in the free memory slices 4-7
    [change] = result.plan.layout_changes
    assert ("4g.40gb", 0) in change.layout.places()
    clocks = {a.config.sm_clock_mhz for a in result.plan.assignments if a.config}
    assert len(clocks) == 1  # one clock per GPU


def test_free_instances_are_used_before_any_layout_change() -> None:
    # Non-preemptible: a preemptible one would give its GPU to "new" whole (worth more by the
    # objective, the consolidated variant finds it: tests/test_mig_consolidate.py).
    runs = small("runs", current=on_instance("n0", 0, "3g.40gb", 0), preemptible=False)
    layout = GpuLayout(0, (MigInstance("3g.40gb", 0, "runs"), MigInstance(ONE_G, 4)))
    result = solved(problem(runs, small("new"), layouts=(layout,)))
    on = instances(result)
    assert on == {"runs": ("n0", 0, "3g.40gb", 0), "new": ("n0", 0, ONE_G, 4)}
    assert result.plan.layout_changes == ()
    assert result.plan.assignment("runs").migrated is False


def test_auto_packs_slices_after_whole_gpus_and_bounds_them_by_the_slice_aggregate() -> None:
    """AUTO does not run the joint model: slices are packed after the whole-GPU plan, and the
    bound is the aggregated model's with slice configurations (solver.core.mig.slice_bound)."""
    result = solved(problem(*(small(f"j{k}") for k in range(7)), backend=Backend.AUTO))
    assert len(instances(result)) == 7
    s = result.stats
    assert s.best_bound is not None and s.best_bound >= s.objective
    assert s.relative_gap == pytest.approx((s.best_bound - s.objective) / s.objective)
    assert "slice bound" in s.detail
    assert result.stats.termination in (Termination.FEASIBLE, Termination.FALLBACK)
    assert "MIG: 7 jobs on instances" in result.stats.detail


def test_highs_proves_the_packed_plan_optimal_with_the_joint_model() -> None:
    result = solved(problem(*(small(f"j{k}") for k in range(7)), backend=Backend.HIGHS))
    assert len(instances(result)) == 7
    s = result.stats
    assert s.termination is Termination.OPTIMAL
    assert s.best_bound is not None and s.best_bound >= s.objective
    assert s.best_bound == pytest.approx(s.objective, rel=1e-6)
    assert "joint MIG model" in s.detail


def test_the_quick_plan_packs_slices_too() -> None:
    from solver.core.deadline import Clock, Deadline

    p = problem(*(small(f"j{k}") for k in range(7)))
    solver = Solver()
    result = solver.quick(p, Clock(Deadline.after(2.0, solver.settings, 7)), "test")
    assert check_plan(p, result.plan.assignments, result.plan.layout_changes) == []
    assert len(instances(result)) == 7 and result.stats.termination is Termination.FALLBACK


def test_the_quick_plan_converts_no_gpu_past_its_clock() -> None:
    """The service's answer for a solve whose worker died comes within its clock: packing
    slices converts no GPU once the clock is out (it had packed on without one for 0.6 s)."""
    from solver.core.deadline import Clock, Deadline

    p = problem(*(small(f"j{k}") for k in range(7)))
    solver = Solver()
    result = solver.quick(p, Clock(Deadline.after(1e-3, solver.settings, 7)), "test")
    assert check_plan(p, result.plan.assignments, result.plan.layout_changes) == []
    assert result.plan.layout_changes == () and instances(result) == {}
    assert result.stats.termination is Termination.FALLBACK


def test_the_first_plan_told_early_is_valid_with_kept_slices() -> None:
    busy = small("busy", current=on_instance("n0", 0, "3g.40gb", 0), preemptible=False)
    layout = GpuLayout(0, (MigInstance("3g.40gb", 0, "busy"),))
    p = problem(busy, small("other", measured=None), gpus=2, layouts=(layout,))
    told: list[Plan] = []
    result = Solver().solve(p, on_first_plan=told.append)
    [first] = told
    assert check_plan(p, first.assignments, first.layout_changes) == []
    assert first.assignment("busy").mig == MigInstance("3g.40gb", 0)
    assert result.plan.assignment("busy").mig == MigInstance("3g.40gb", 0)


def seven_small_request() -> pb.SolveRequest:
    req = pb.SolveRequest()
    req.cluster.gpu_types.add(
        name=A100_80GB, memory_gib=80, peak_tflops=312, memory_bandwidth_gbps=2039,
        intra_node_bandwidth_gbps=600, tdp_watts=400, idle_watts=50, sm_clocks_mhz=[1410, 1275],
    )  # fmt: skip
    req.cluster.nodes.add(name="m0", gpu_type=A100_80GB, gpu_count=1, rack="r0",
                          network_bandwidth_gbps=100)  # fmt: skip
    for k in range(7):
        j = req.jobs.add(name=f"s{k}", min_gpus=1, max_gpus=1)
        j.slices.allow = True
        j.profile.points.add(gpu_type=A100_80GB, num_gpus=1, tensor_parallel=1,
                             pipeline_parallel=1, sm_clock_mhz=1410, samples_per_second=100.0,
                             watts=300.0, memory_per_gpu_gib=8.0)  # fmt: skip
        j.profile.points.add(gpu_type=A100_80GB, num_gpus=1, tensor_parallel=1,
                             pipeline_parallel=1, sm_clock_mhz=1410, samples_per_second=40.0,
                             watts=40.0, memory_per_gpu_gib=8.0, mig_profile=ONE_G)  # fmt: skip
    req.options.backend = pb.BACKEND_HEURISTIC
    req.options.time_budget.FromSeconds(2)
    return req


def test_over_grpc_the_plan_names_slices_for_kubernetes_and_slurm() -> None:
    with serving() as (_, stub):
        response = stub.Solve(seven_small_request(), timeout=30)
    plan = response.plan
    assert len(plan.assignments) == 7
    for a in plan.assignments:
        assert a.placement[0].node == "m0" and list(a.placement[0].gpu_indices) == [0]
        assert a.mig_instance.profile == ONE_G
        assert a.mig_resource == "nvidia.com/mig-1g.10gb" and a.slurm_gres == "gpu:1g.10gb"
    assert sorted(a.mig_instance.start for a in plan.assignments) == list(range(7))
    [change] = plan.layout_changes
    assert change.node == "m0" and len(change.layout.instances) == 7
    assert response.stats.HasField("best_bound")
    assert response.stats.best_bound >= response.stats.objective


@pytest.mark.parametrize("backend", [Backend.HEURISTIC, Backend.AUTO, Backend.CPSAT, Backend.HIGHS])
def test_every_backend_gives_free_partitioned_gpus_back_to_a_whole_gpu_job(
    backend: Backend,
) -> None:
    """Both GPUs partitioned, no job on them: the two-GPU job (weight 2, less two
    reconfigurations) beats the one-GPU job (worth at most 1, whole or on a free instance);
    every backend runs it on both GPUs changed back to whole, and a bound, where one is
    proven, is above the plan."""
    import dataclasses

    layouts = (GpuLayout(0, (MigInstance(ONE_G, 0),)), GpuLayout(1, (MigInstance("3g.40gb", 4),)))
    from solver.domain import ProfilePoint, ThroughputProfile
    from tests.mig_cases import T

    two = ThroughputProfile((ProfilePoint(T, 2, 1, 1, 1410, 200.0, 600.0, 8.0),))
    big = dataclasses.replace(
        small("big", measured=None, slices=None), workload=two, min_gpus=2, max_gpus=2, weight=2.0
    )
    p = problem(big, small("s"), gpus=2, layouts=layouts, backend=backend)
    result = solved(p)
    plan = result.plan
    a = plan.assignment("big")
    assert a.state is JobState.RUNNING and a.mig is None
    assert sorted(i for s in a.placement for i in s.gpu_indices) == [0, 1]
    assert sorted(c.layout.gpu_index for c in plan.layout_changes) == [0, 1]
    assert all(not c.layout.instances for c in plan.layout_changes)
    assert plan.assignment("s").state is JobState.QUEUED
    bound = result.stats.best_bound
    assert bound is None or bound >= plan.objective.total - 1e-9


def test_the_solves_objective_is_evaluate_plans_on_the_snapshots_cluster() -> None:
    """Each of two 8-GPU nodes has a GPU held by a running slice job; an 8-GPU job runs on
    four GPUs of each and keeps them. The whole-GPU paths see seven GPUs a node, where two
    nodes are the least; on the snapshot's cluster one node is (EvaluatePlan counts the spread,
    and the solve reported 0.01 more than it scored)."""
    layouts = (GpuLayout(7, (MigInstance(ONE_G, 0, "s0"),)),)
    base = problem(gpus=8, layouts=layouts)
    n0 = base.cluster.nodes[0]
    n1 = dataclasses.replace(
        n0, name="n1", mig_layouts=(GpuLayout(7, (MigInstance(ONE_G, 0, "s1"),)),)
    )
    cluster = dataclasses.replace(base.cluster, nodes=(n0, n1))
    spread = Allocation(
        Shape(A100_80GB, 8, 1, 1),
        1410,
        (GpuSlice("n0", (0, 1, 2, 3)), GpuSlice("n1", (0, 1, 2, 3))),
    )
    points = (ProfilePoint(A100_80GB, 8, 1, 1, 1410, 700.0, 2400.0, 10.0),)
    big = Job("big", "t", 1.0, ThroughputProfile(points), 8, 8, frozenset(), current=spread,
              preemptible=False)  # fmt: skip
    jobs = (
        small("s0", current=on_instance("n0", 7, ONE_G, 0), preemptible=False),
        small("s1", current=on_instance("n1", 7, ONE_G, 0), preemptible=False),
        big,
    )
    p = dataclasses.replace(base, cluster=cluster, jobs=jobs)
    result = solved(p)
    assert result.plan.assignment("big").state is JobState.RUNNING
    allocations = {
        a.job: Allocation(a.config.shape, a.config.sm_clock_mhz, a.placement, a.mig)
        if a.config is not None and a.state is JobState.RUNNING
        else None
        for a in result.plan.assignments
    }
    ev = evaluate_allocations(p, allocations, result.plan.layout_changes)
    assert not ev.violations and ev.plan is not None
    assert ev.plan.objective.locality == pytest.approx(result.plan.objective.locality)
    assert ev.plan.objective.total == pytest.approx(result.plan.objective.total, abs=1e-9)
    assert result.stats.objective == pytest.approx(ev.plan.objective.total, abs=1e-9)


@pytest.mark.parametrize("gpus", [1, 8])
def test_the_joint_model_s_size_is_estimated_closely_before_it_is_built(gpus: int) -> None:
    """solver.exact.mig_model.estimate_size: within a few percent above what is built (0.98-1.03
    of it on the examples and generated snapshots of 2-8 nodes)."""
    from solver.exact.mig_model import estimate_size
    from solver.exact.mig_plans import build_mig
    from solver.perfmodel.configs import build_config_set

    p = problem(*(small(f"j{k}") for k in range(12)), gpus=gpus, backend=Backend.HIGHS)
    configs = build_config_set(p)
    built = build_mig(p, configs).num_variables
    assert built <= estimate_size(p, configs) <= 1.1 * built + 20


def test_a_joint_model_that_cannot_be_built_in_time_is_not_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model was built first and only then found too big: at 0.3 s an 80-job MIG snapshot
    on HiGHS answered at 0.85 s. Now its estimate decides, before any build."""
    from solver.core import mig_exact
    from solver.exact.mig_model import estimate_size
    from solver.perfmodel.configs import build_config_set

    p = problem(*(small(f"j{k}") for k in range(40)), gpus=8, backend=Backend.HIGHS)
    configs = build_config_set(p)
    packed = solved(dataclasses.replace(p, options=dataclasses.replace(
        p.options, backend=Backend.HEURISTIC))).plan  # fmt: skip
    estimate = estimate_size(p, configs)
    seconds = 0.5 * estimate * mig_exact.JOINT_BUILD_SECONDS_PER_VARIABLE
    assert seconds > mig_exact.MIN_JOINT_SECONDS

    def never(*_: object) -> None:
        raise AssertionError("built")

    monkeypatch.setattr(mig_exact, "build_mig", never)
    joint = mig_exact.joint_solve(p, configs, packed, seconds)
    assert joint is not None and joint.plan is packed and joint.bound is None
    assert joint.detail == f"joint MIG model not built: ~{estimate} variables, no time"
