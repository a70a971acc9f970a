"""Consolidating slices before the whole-GPU solve (solver.core.mig_consolidate,
solver.search.slice_prepack): when whole GPUs are short, small jobs that lose little on an
instance share one GPU and the GPUs they would hold go to a job that needs them."""

from __future__ import annotations

import time
from typing import Any

import pytest

from solver.core import mig
from solver.core.incumbent import infeasible
from solver.core.mig import whole_problem
from solver.core.mig_consolidate import consolidated, short_of_gpus
from solver.core.settings import SolverSettings
from solver.domain import (
    Allocation,
    GpuSlice,
    Job,
    JobAssignment,
    JobState,
    Plan,
    ProfilePoint,
    Shape,
    SolveResult,
    Termination,
    ThroughputProfile,
)
from solver.perfmodel.configs import build_config_set
from solver.scoring.checker import check_plan
from solver.search.slice_prepack import LOSSLESS_SHARE, LosslessPacker
from tests.factories import solve
from tests.mig_cases import ONE_G, T, large, problem, small


def test_small_jobs_share_a_gpu_so_the_large_job_runs() -> None:
    """Three GPUs: two small jobs that keep 95 % of their rate on a 1g.10gb instance and a
    job that needs two GPUs. On whole GPUs the small jobs take two and the large job waits;
    consolidated, both small jobs share one GPU and the large job runs on the other two."""
    p = problem(small("a", measured=95.0), small("b", measured=95.0), large(), gpus=3)
    assert short_of_gpus(p)
    r = solve(p)
    plan = r.plan
    assert check_plan(p, plan.assignments, plan.layout_changes) == []
    running = {a.job for a in plan.assignments if a.state is JobState.RUNNING}
    assert running == {"a", "b", "large"}
    on = {a.job: a.mig for a in plan.assignments if a.mig is not None}
    assert set(on) == {"a", "b"} and {m.profile for m in on.values()} == {ONE_G}
    gpus = {
        (s.node, i) for a in plan.assignments if a.mig for s in a.placement for i in s.gpu_indices
    }
    assert len(gpus) == 1
    assert "slices consolidated" in r.stats.detail


def test_jobs_that_lose_much_on_an_instance_keep_whole_gpus() -> None:
    """At 40 % of their rate on the instance the small jobs are worth more whole: the
    consolidated variant is not taken, the plain plan (small jobs whole) answers."""
    p = problem(small("a", measured=40.0), small("b", measured=40.0), large(), gpus=3)
    r = solve(p)
    assert all(a.mig is None for a in r.plan.assignments)
    assert "slices consolidated" not in r.stats.detail


def test_the_lossless_packer_skips_slow_instances() -> None:
    p = problem(small("fast", measured=95.0), small("slow", measured=40.0), gpus=1)
    configs = build_config_set(p)
    packer = LosslessPacker(
        p, configs, [JobAssignment(j.name, JobState.QUEUED) for j in p.jobs], {}
    )
    packer.pack()
    assert set(packer.packed) == {"fast"}
    config = packer.packed["fast"][0]
    assert config.samples_per_second >= LOSSLESS_SHARE * configs.best_samples_per_second["fast"]


def test_enough_gpus_no_split() -> None:
    p = problem(small("a", measured=95.0), large(), gpus=3)
    assert not short_of_gpus(p)


def test_gpus_of_non_preemptible_jobs_are_never_consolidated() -> None:
    """A non-preemptible job runs whole on GPU 0 and keeps it; the consolidated variant packs
    the small jobs on another GPU (it once partitioned GPU 0 too, left the held job no GPU,
    and the solve failed with a KeyError)."""
    held = Allocation(Shape(T, 1, 1, 1), 1410, (GpuSlice("n0", (0,)),))
    rate = ThroughputProfile((ProfilePoint(T, 1, 1, 1, 1410, 90.0, 300.0, 10.0),))
    fixed = Job("fixed", "t", 1.0, rate, 1, 1, frozenset(), current=held, preemptible=False)
    p = problem(fixed, small("a", measured=95.0), small("b", measured=95.0), large(), gpus=4)
    assert short_of_gpus(p)
    r = solve(p)
    plan = r.plan
    assert check_plan(p, plan.assignments, plan.layout_changes) == []
    kept = plan.assignment("fixed")
    assert kept.state is JobState.RUNNING and kept.mig is None
    assert [(s.node, s.gpu_indices) for s in kept.placement] == [("n0", (0,))]
    running = {a.job for a in plan.assignments if a.state is JobState.RUNNING}
    assert running == {"fixed", "a", "b", "large"}


def test_an_infeasible_whole_solve_leaves_the_plain_plan() -> None:
    """When the whole-GPU solve of the consolidated problem finds no plan, the variant gives
    way (None) instead of packing slices into a plan without the other jobs."""
    p = problem(small("a", measured=95.0), small("b", measured=95.0), large(), gpus=3)
    configs = build_config_set(p)
    out = consolidated(
        p, configs, {}, whole_problem, lambda q: infeasible(q, "no plan", wall_seconds=0.0)
    )
    assert out is None


def test_the_variant_keeps_its_time() -> None:
    """Past its instant the consolidating packer places no job and the variant gives way (at
    200 nodes and 400 slice jobs the packer alone took 1.15 s, and a 1 s call answered after
    2 s)."""
    p = problem(small("a", measured=95.0), small("b", measured=95.0), large(), gpus=3)
    configs = build_config_set(p)
    queued = [JobAssignment(j.name, JobState.QUEUED) for j in p.jobs]
    packer = LosslessPacker(p, configs, queued, {}, stop_at=time.monotonic() - 1.0)
    packer.pack()
    assert packer.packed == {}
    late = consolidated(p, configs, {}, whole_problem, solve, time.monotonic() - 1.0)
    assert late is None
    on_time = consolidated(p, configs, {}, whole_problem, solve, time.monotonic() + 30.0)
    assert on_time is not None


class _StillClock:
    """A clock that does not move: the instants a solve computes are exact."""

    @staticmethod
    def monotonic() -> float:
        return 1000.0


def test_the_variant_stops_where_the_slice_bound_needs_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a 2 s budget on 1,024 GPUs the variant took all of the MIG time and the snapshot
    answered without a bound: it now stops the slice LP's estimate before the end."""
    p = problem(small("a", measured=95.0), small("b", measured=95.0), large(), gpus=3)
    stops: list[float | None] = []

    def spy(*args: Any) -> tuple[Plan, SolveResult] | None:
        stops.append(args[5])
        return None

    monkeypatch.setattr(mig, "consolidated", spy)
    monkeypatch.setattr(mig, "time", _StillClock)
    mig.solve_with_slices(
        p,
        lambda q, *_: solve(q),
        time_left=lambda: 2.0,
        split_at=_StillClock.monotonic,
    )
    reserve = mig.BOUND_SECONDS_PER_JOB * len(p.jobs)
    # (the last call: the whole-GPU solve, a Solver's, runs the MIG path too, on the real clock)
    assert stops[-1] == pytest.approx(1000.0 + 2.0 - mig.answer_margin(p) - reserve, abs=1e-9)


def test_without_time_for_the_first_plan_in_half_the_variant_does_not_split_the_time() -> None:
    """The variant takes the second half of the whole-GPU time only where the first plan fits
    in the first: at 1 s on 1,024 GPUs the half was short of the first plan's estimate and the
    quick plan answered, 36 % below. Here the estimate (1 s) is over half of the about 1.7 s the
    whole-GPU paths have at a 2 s budget, and under all of it."""
    p = problem(small("a"), small("b"), large(), gpus=3)
    assert short_of_gpus(p)
    settings = SolverSettings(first_plan_seconds=1.0)
    result = solve(p, settings=settings)
    assert "quick plan" not in result.stats.detail
    assert result.stats.termination is not Termination.FALLBACK
    assert check_plan(p, result.plan.assignments, result.plan.layout_changes) == []
