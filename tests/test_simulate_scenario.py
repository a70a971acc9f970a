"""Scenarios (solver.simulate.scenario): the problems of every file of a scenario at once, the
cluster and power-schedule files, and the default scenarios with their checked-in files
(docs/simulation.md)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import ThroughputProfile
from solver.simulate.core import PowerSchedule, PowerStep, SimulationError
from solver.simulate.gavel_trace import steps_per_second
from solver.simulate.scenario import (
    Scenario,
    build_cluster,
    cluster_json,
    idle_watts,
    load_cluster,
    load_power_schedule,
    load_scenario,
    tdp_watts,
    write_power_schedule,
)
from solver.simulate.scenarios import scenario_gavel_physical, scenario_llm, write_default_scenarios
from solver.simulate.trace import cluster_pools, trace_text
from tests.simulate_helpers import trace_file

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "instances" / "sim"


def test_load_scenario_collects_the_problems_of_every_file(tmp_path: Path) -> None:
    trace = trace_file(tmp_path, "a,0,t,philly,9999,5", "b,-1,t,philly,1,5")
    bad_cluster = tmp_path / "c.json"
    bad_cluster.write_text('{"gpu_types": [], "nodes": []}')
    with pytest.raises(SimulationError) as e:
        load_scenario(trace, bad_cluster)
    submit = f"{trace}:3:submit_time_s: must be a finite number >= 0 and at most 315360000"
    assert e.value.problems == [
        f"{bad_cluster}:gpu_types: must not be empty",
        f"{bad_cluster}:nodes: must not be empty",
        f"{submit} (ten years), got '-1'",
    ]
    with pytest.raises(SimulationError) as e:
        load_scenario(trace, SIM / "philly-a-cluster.json")
    assert e.value.problems == [  # a bad row elsewhere no longer hides the cluster's checks
        f"{submit} (ten years), got '-1'",
        f"{trace}:2:num_gpus: needs 9999 GPUs, the cluster has 512 available",
    ]


# ---------------------------------------------------------------- cluster and power files


def test_cluster_from_a_snapshot_or_an_instance_file(tmp_path: Path) -> None:
    snapshot = load_cluster(SIM / "philly-a-cluster.json")
    assert sum(cluster_pools(snapshot).values()) == 512
    instance = load_cluster(ROOT / "instances" / "small.json")
    request = json_format.Parse((ROOT / "instances" / "small.json").read_text(), pb.SolveRequest())
    assert instance == request.cluster


def test_cluster_problems_name_file_and_field(tmp_path: Path) -> None:
    data = json.loads((SIM / "philly-a-cluster.json").read_text())
    data["nodes"][0]["gpu_count"] = 0
    p = tmp_path / "c.json"
    p.write_text(json.dumps(data))
    with pytest.raises(SimulationError) as e:
        load_cluster(p)
    assert e.value.problems == [f"{p}:nodes[0].gpu_count: must be > 0, got 0"]
    p.write_text(json.dumps({"cluster": data, "jobs": []}))
    with pytest.raises(SimulationError) as e:
        load_cluster(p)
    assert e.value.problems == [f"{p}:cluster.nodes[0].gpu_count: must be > 0, got 0"]
    p.write_text("{")
    with pytest.raises(SimulationError) as e:
        load_cluster(p)
    assert e.value.problems[0].startswith(f"{p}:1:2: malformed JSON")
    p.write_text('{"nodes": [{"gpus": 3}]}')
    with pytest.raises(SimulationError) as e:
        load_cluster(p)
    assert e.value.problems[0].startswith(f"{p}: not a valid ClusterSnapshot: ")


def test_power_schedule_round_trip(tmp_path: Path, cluster: pb.ClusterSnapshot) -> None:
    schedule = PowerSchedule((PowerStep(0.0, 70000.0), PowerStep(3600.5, None)), 7200.0)
    p = tmp_path / "p.json"
    write_power_schedule(schedule, p)
    assert load_power_schedule(p, cluster) == schedule
    p.write_text('{"steps": []}')
    assert load_power_schedule(p) == PowerSchedule()


def test_power_schedule_problems(tmp_path: Path, cluster: pb.ClusterSnapshot) -> None:
    p = tmp_path / "p.json"
    p.write_text(
        json.dumps(
            {
                "period_s": 86400,
                "steps": [
                    {"start_s": 32400, "watts": 70000},
                    {"start_s": 100, "watts": 60000},
                    {"start_s": 90000, "watts": -1},
                    {"start_s": 90001, "watts": 1000, "note": 1},
                ],
                "peak": True,
            }
        )
    )
    with pytest.raises(SimulationError) as e:
        load_power_schedule(p, cluster)
    assert e.value.problems == [
        f"{p}:peak: unknown field",
        f"{p}:steps[1].start_s: must be at least 60 s after the previous step's 32400",
        f"{p}:steps[2].start_s: must be in [0, period_s), got 90000",
        f"{p}:steps[2].watts: must be a number > 0 or null, got -1",
        f"{p}:steps[3].note: unknown field",
        f"{p}:steps[3].start_s: must be in [0, period_s), got 90001",
        f"{p}:steps[3].watts: 1000 W is below the idle power of the cluster's GPUs (20416 W)",
    ]


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        (
            {"period_s": 0.001, "steps": [{"start_s": 0, "watts": 7e4}]},
            "period_s: must be a number of seconds >= 60, got 0.001",
        ),
        (
            {
                "period_s": 3600,
                "steps": [{"start_s": 0, "watts": 7e4}, {"start_s": 30, "watts": 6e4}],
            },
            "steps[1].start_s: must be at least 60 s after the previous step's 0",
        ),
        (
            {
                "period_s": 3600,
                "steps": [{"start_s": 10, "watts": 7e4}, {"start_s": 3580, "watts": 6e4}],
            },
            "steps[1].start_s: must be at least 60 s before the next period's first step (at 3610)",
        ),
    ],
)
def test_a_budget_may_not_change_faster_than_a_minute(
    tmp_path: Path, schedule: dict[str, object], problem: str
) -> None:
    """A period of a millisecond was accepted, and each change is a round of the simulation:
    a run of a few hours never ended."""
    p = tmp_path / "p.json"
    p.write_text(json.dumps(schedule))
    with pytest.raises(SimulationError) as e:
        load_power_schedule(p)
    assert e.value.problems == [f"{p}:{problem}"] or e.value.problems[0].startswith(
        f"{p}:{problem}"
    )
    assert len(e.value.problems) == 1


# ---------------------------------------------------------------- the default scenarios


def test_scenario_a_philly_on_a_heterogeneous_cluster_with_a_binding_budget(
    philly: Scenario,
) -> None:
    s = philly
    pools = cluster_pools(s.cluster)
    assert sum(pools.values()) >= 512 and len(pools) >= 4
    assert pools == {"A100-80GB": 128, "P100-16GB": 128, "T4": 128, "V100-16GB": 128}
    assert len(s.jobs) >= 1000
    assert Counter(j.workload for j in s.jobs) == {"philly": 1100}
    assert max(j.num_gpus for j in s.jobs) <= 64
    budgets = [st.watts for st in s.power.steps]
    full, idle = tdp_watts(s.cluster), idle_watts(s.cluster)
    assert all(w is not None and idle < w < full for w in budgets)
    assert min(b for b in budgets if b is not None) < max(b for b in budgets if b is not None)
    assert s.settings.reference_gpu_type == "V100-16GB"


def test_scenario_b_llm_development(llm: Scenario) -> None:
    s = llm
    pools = cluster_pools(s.cluster)
    assert sum(pools.values()) >= 2048
    jobs = s.jobs
    assert 200 <= len(jobs) <= 800
    sizes = {j.num_gpus for j in jobs}
    assert min(sizes) == 8 and max(sizes) == 1024
    assert all(g & (g - 1) == 0 for g in sizes)
    by_type = {
        t: [j for j in jobs if j.tenant == t] for t in ("pretrain", "eval", "debug", "other")
    }
    assert all(by_type.values()) and sum(map(len, by_type.values())) == len(jobs)
    assert all(j.num_gpus >= 128 for j in by_type["pretrain"])
    assert {j.evaluation for j in by_type["eval"]} == {True}  # no optimizer state to restart
    assert not any(j.evaluation for t in ("pretrain", "debug", "other") for j in by_type[t])
    assert max(j.duration_s for j in by_type["pretrain"]) > 86_400  # runs for days
    assert all(j.duration_s <= 3 * 86_400 for j in jobs)
    assert max(j.submit_time_s for j in jobs) < 2 * 86_400
    gpu_time = {t: sum(j.num_gpus * j.duration_s for j in js) for t, js in by_type.items()}
    assert gpu_time["pretrain"] / sum(gpu_time.values()) > 0.85  # published: 95.48 %
    assert scenario_llm(1).jobs != jobs


def test_checked_in_scenario_files_equal_a_regeneration(tmp_path: Path) -> None:
    written = write_default_scenarios(tmp_path)
    assert sorted(p.name for p in written) == sorted(
        p.name for p in SIM.iterdir() if p.suffix in (".csv", ".json")
    )
    for p in written:
        assert (SIM / p.name).read_text() == p.read_text(), f"{p.name} is stale: regenerate it"


def test_checked_in_files_load_as_the_scenarios(philly: Scenario) -> None:
    s = load_scenario(
        SIM / "philly-a.csv", SIM / "philly-a-cluster.json", SIM / "philly-a-power.json"
    )
    assert s.jobs == philly.jobs
    assert cluster_json(s.cluster) == cluster_json(philly.cluster)
    assert s.power == philly.power


def test_build_cluster_counts_nodes_by_kind() -> None:
    from solver.offline.generate.spec import NodeKind

    c = build_cluster((NodeKind("V100-16GB", 8, 2.0), NodeKind("T4", 4, 3.0)))
    assert Counter(n.gpu_type for n in c.nodes) == {"V100-16GB": 2, "T4": 3}
    assert sorted(t.name for t in c.gpu_types) == ["T4", "V100-16GB"]
    assert not c.HasField("power_budget_watts")


def test_gavel_physical_is_gavels_trace_with_its_steps_on_its_cluster() -> None:
    s = scenario_gavel_physical(1)
    assert len(s.jobs) == 96 and Counter(j.num_gpus for j in s.jobs) == {1: 59, 2: 19, 4: 18}
    assert cluster_pools(s.cluster) == {"V100-16GB": 8, "P100-16GB": 16, "K80": 24}
    assert s.settings.fixed_rounds and s.settings.round_interval_s == 360.0
    assert s.settings.truth.round_sigma == 0.0
    # The first line: ResNet-18 (batch size 128), 925,982 steps on 4 GPUs, at time 0; its work
    # is exactly its steps (the profile in steps/s, V100 the reference type).
    first = s.jobs[0]
    assert (first.workload, first.num_gpus, first.submit_time_s) == ("gavel-resnet-18-bs128", 4, 0)
    (job,) = [j for j in s.sim_jobs() if j.name == first.job_id]
    assert isinstance(job.workload, ThroughputProfile)
    rate = {(p.gpu_type, p.num_gpus): p.samples_per_second for p in job.workload.points}
    assert rate[("V100-16GB", 4)] == steps_per_second("ResNet-18", 128, 4, "v100")
    assert first.duration_s * rate[("V100-16GB", 4)] == pytest.approx(925_982)
    assert rate[("K80", 1)] == steps_per_second("ResNet-18", 128, 1, "k80")  # no batch factor
    assert (SIM / "gavel-physical.csv").read_text() == trace_text(s.jobs)
