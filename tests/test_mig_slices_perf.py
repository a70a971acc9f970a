"""The performance model of slice jobs (solver.perfmodel.slices): the share rule, measured MIG
points winning over it, memory and bounds, and the power of a partitioned GPU."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from solver.domain import (
    Allocation,
    Cluster,
    GpuSlice,
    Job,
    JobAssignment,
    JobState,
    ModelSpec,
    Node,
    ObjectiveWeights,
    Problem,
    ProfilePoint,
    Shape,
    ThroughputProfile,
)
from solver.mig import MigInstance, SliceRequest
from solver.perfmodel import budgets, throughput
from solver.perfmodel.configs import build_config_set
from solver.perfmodel.facts import type_facts
from solver.perfmodel.slices import build_slice_configs, slice_configs, slice_profiles, slice_share
from solver.scoring.objective import partitioned_idle_watts, score_plan
from tests.mig_cases import GEOMETRY, GPU, T

SMALL = ModelSpec(125e6, 12, 768, 12, 1024, 32)


def cluster() -> Cluster:
    node = Node("n0", T, 8, frozenset(), "r0", 100.0)
    return Cluster({T: GPU}, (node,), mig={T: GEOMETRY})


def whole_point(sps: float = 100.0, watts: float = 300.0, memory: float = 8.0) -> ProfilePoint:
    return ProfilePoint(T, 1, 1, 1, 1410, sps, watts, memory)


ANY = SliceRequest()


def profiled(*points: ProfilePoint, slices: SliceRequest | None = ANY, **kw: object) -> Job:
    request = slices
    return Job("p", "t", 1.0, ThroughputProfile(points), 1, 1, frozenset(), slices=request, **kw)  # type: ignore[arg-type]


def configs_of(job: Job) -> dict[tuple[str, int], tuple[float, float, float, bool, bool]]:
    c = cluster()
    out = slice_configs(job, type_facts(c), c.mig)
    return {
        (x.mig_profile, x.sm_clock_mhz): (
            x.samples_per_second,
            x.watts,
            x.memory_per_gpu_gib,
            x.measured,
            x.kept_only,
        )
        for x in out
    }


def test_slice_share_is_the_smaller_of_the_sm_and_memory_shares() -> None:
    assert slice_share(GEOMETRY, "1g.10gb") == pytest.approx(1 / 8)  # 1/7 SMs, 1/8 memory
    assert slice_share(GEOMETRY, "1g.20gb") == pytest.approx(1 / 7)  # 1/7 SMs, 2/8 memory
    assert slice_share(GEOMETRY, "2g.20gb") == pytest.approx(2 / 8)
    assert slice_share(GEOMETRY, "3g.40gb") == pytest.approx(3 / 7)
    assert slice_share(GEOMETRY, "4g.40gb") == pytest.approx(4 / 8)
    assert slice_share(GEOMETRY, "7g.80gb") == pytest.approx(1.0)


def test_profiles_within_bounds_plus_the_running_one() -> None:
    bounded = profiled(whole_point(), slices=SliceRequest("1g.20gb", "2g.20gb"))
    assert [p.name for p in slice_profiles(bounded, GEOMETRY)] == ["1g.20gb", "2g.20gb"]
    on = Allocation(Shape(T, 1, 1, 1), 1410, (GpuSlice("n0", (0,)),), MigInstance("3g.40gb", 0))
    running = dataclasses.replace(bounded, current=on)
    names = [p.name for p in slice_profiles(running, GEOMETRY)]
    assert names == ["1g.20gb", "2g.20gb", "3g.40gb"]
    assert slice_profiles(dataclasses.replace(bounded, slices=None), GEOMETRY) == []


def test_a_profiled_job_scales_its_one_gpu_point_by_the_share() -> None:
    got = configs_of(profiled(whole_point(100.0, 300.0)))
    sps, watts, memory, measured, kept = got["1g.10gb", 1410]
    assert sps == pytest.approx(100.0 / 8)
    assert watts == pytest.approx((300.0 - GPU.idle_watts) / 8)  # above idle
    assert (memory, measured, kept) == (8.0, False, False)
    assert got["3g.40gb", 1410][0] == pytest.approx(300.0 / 7)
    assert got["7g.80gb", 1410][:2] == pytest.approx((100.0, 250.0))
    # (lower clocks come from the whole point carried by the clock model, then scaled)
    assert got["1g.10gb", 990][0] < got["1g.10gb", 1410][0]


def test_a_point_measured_on_the_profile_wins_over_the_scaled_estimate() -> None:
    mig = ProfilePoint(T, 1, 1, 1, 1410, 60.0, 80.0, 8.0, mig_profile="3g.40gb")
    got = configs_of(profiled(whole_point(100.0, 300.0), mig))
    assert got["3g.40gb", 1410] == (60.0, 80.0, 8.0, True, False)
    # only its measured clock: nothing is carried below it
    assert [k for k in got if k[0] == "3g.40gb"] == [("3g.40gb", 1410)]
    assert got["1g.10gb", 1410][0] == pytest.approx(100.0 / 8)  # other profiles: scaled


def test_memory_decides_the_smallest_profile() -> None:
    got = configs_of(profiled(whole_point(memory=15.0)))
    profiles = {p for p, _ in got}
    assert profiles == {"1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}  # not 1g.10gb


def test_the_running_instance_is_kept_even_over_its_memory() -> None:
    on = Allocation(Shape(T, 1, 1, 1), 1410, (GpuSlice("n0", (0,)),), MigInstance("1g.10gb", 0))
    got = configs_of(profiled(whole_point(memory=15.0), current=on))
    assert got["1g.10gb", 1410][4] is True  # kept_only: usable only where it runs
    assert got["1g.20gb", 1410][4] is False


def test_a_model_job_is_its_one_gpu_estimate_on_the_instance_memory_scaled() -> None:
    job = Job("m", "t", 1.0, SMALL, 1, 4, frozenset(), slices=SliceRequest())
    got = configs_of(job)
    facts = type_facts(cluster())[T]
    for profile in ("1g.10gb", "3g.40gb"):
        p = GEOMETRY.profiles[profile]
        gpu = dataclasses.replace(GPU, memory_gib=p.memory_gib)
        est = throughput.estimate(
            SMALL, gpu, Shape(T, 1, 1, 1), 1275,
            gpus_per_node=facts.gpus_per_node, network_bandwidth_gbps=facts.network_bandwidth_gbps,
        )  # fmt: skip
        assert est is not None
        share = slice_share(GEOMETRY, profile)
        sps, watts, memory, measured, _ = got[profile, 1275]
        assert sps == pytest.approx(share * est.samples_per_second)
        assert watts == pytest.approx(share * (est.watts - GPU.idle_watts))
        assert memory == pytest.approx(est.memory_per_gpu_gib) and memory <= p.memory_gib
        assert measured is False


def test_no_slice_configurations_for_jobs_of_more_than_one_gpu_or_without_slices() -> None:
    wide = Job("w", "t", 1.0, SMALL, 2, 4, frozenset(), slices=SliceRequest())
    plain = Job("q", "t", 1.0, SMALL, 1, 4, frozenset())
    c = cluster()
    assert build_slice_configs((wide, plain), type_facts(c), c.mig) == {}


def test_jobs_alike_get_their_own_configurations_as_if_each_were_alone() -> None:
    """Jobs of one architecture, bounds and types share their rows (computed once); each job
    still gets configurations named for it, equal to its own; a job bounded otherwise, one
    limited to another type, and one on an instance now get theirs."""
    on = Allocation(Shape(T, 1, 1, 1), 1410, (GpuSlice("n0", (0,)),), MigInstance("3g.40gb", 4))
    jobs = (
        Job("a", "t", 1.0, SMALL, 1, 4, frozenset(), slices=SliceRequest()),
        Job("b", "t", 1.0, SMALL, 1, 4, frozenset(), slices=SliceRequest()),
        Job(
            "c", "t", 1.0, SMALL, 1, 4, frozenset(), slices=SliceRequest(largest_profile="2g.20gb")
        ),
        Job("d", "t", 1.0, SMALL, 1, 4, frozenset({"other"}), slices=SliceRequest()),
        Job("e", "t", 1.0, SMALL, 1, 4, frozenset(), slices=SliceRequest(), current=on),
        profiled(whole_point()),
    )
    c = cluster()
    together = build_slice_configs(jobs, type_facts(c), c.mig)
    alone = {j.name: tuple(slice_configs(j, type_facts(c), c.mig)) for j in jobs}
    assert together == {name: configs for name, configs in alone.items() if configs}
    assert {c.job for c in together["b"]} == {"b"}
    assert len(together["c"]) < len(together["a"]) and "d" not in together


def _problem(*jobs: Job) -> Problem:
    return Problem(cluster(), jobs, ObjectiveWeights())


def test_the_config_set_carries_slices_apart_and_counts_them_in_the_best() -> None:
    mig = ProfilePoint(T, 1, 1, 1, 1410, 160.0, 80.0, 8.0, mig_profile="3g.40gb")
    fast = profiled(whole_point(100.0, 300.0), mig)
    s = build_config_set(_problem(fast))
    assert all(not c.mig_profile for c in s.by_job["p"])
    assert {c.mig_profile for c in s.slices["p"]} >= {"1g.10gb", "3g.40gb"}
    assert s.best_samples_per_second["p"] == 160.0  # the measured slice is its best
    again = pickle.loads(pickle.dumps(s))
    assert again.slices == s.slices and again.best_samples_per_second == {"p": 160.0}
    plain = build_config_set(_problem(profiled(whole_point(100.0, 300.0), slices=None)))
    assert plain.slices == {} and plain.best_samples_per_second["p"] == 100.0


def test_a_slice_draws_its_watts_above_idle_and_its_gpu_idle_once() -> None:
    c = cluster()
    [one] = [x for x in slice_configs(profiled(whole_point()), type_facts(c), c.mig)
             if x.mig_profile == "1g.10gb" and x.sm_clock_mhz == 1410]  # fmt: skip
    assert budgets.extra_watts(c, one) == one.watts == budgets.extra_watts_per_gpu(c, one)
    assert budgets.partitioned_gpu_watts(c, T, [one, one]) == pytest.approx(50.0 + 2 * one.watts)
    assert partitioned_idle_watts(c, [("n0", 0), ("n0", 3)]) == 100.0


def test_the_energy_term_counts_a_partitioned_gpu_idle_once() -> None:
    c = cluster()
    jobs = [profiled(whole_point()), dataclasses.replace(profiled(whole_point()), name="q")]
    [one] = [x for x in slice_configs(jobs[0], type_facts(c), c.mig)
             if x.mig_profile == "1g.10gb" and x.sm_clock_mhz == 1410]  # fmt: skip
    p = _problem(*jobs)
    on = (GpuSlice("n0", (0,)),)
    plan = [
        JobAssignment("p", JobState.RUNNING, one, on, mig=MigInstance("1g.10gb", 0)),
        JobAssignment("q", JobState.RUNNING, one._replace(job="q"), on,
                      mig=MigInstance("1g.10gb", 1)),
    ]  # fmt: skip
    energy = score_plan(p, plan, {"p": 100.0, "q": 100.0}).energy
    assert energy == pytest.approx((50.0 + 2 * one.watts) / (8 * GPU.tdp_watts))
