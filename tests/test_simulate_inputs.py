"""Simulation inputs: trace files and their bad-input rules, the cluster and power-schedule files,
the Philly converter, the workload mix, and the two default scenarios with their checked-in
files (docs/simulation.md)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from google.protobuf import json_format

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.domain import ModelSpec, ThroughputProfile
from solver.perfmodel.catalog import load_architectures, load_gpu_catalog
from solver.simulate.core import PowerSchedule, PowerStep, SimulationError, TraceJob
from solver.simulate.llm import load_acme
from solver.simulate.philly import convert, philly_trace
from solver.simulate.scenario import (
    PHILLY_WINDOW,
    Scenario,
    build_cluster,
    cluster_json,
    idle_watts,
    load_cluster,
    load_power_schedule,
    load_scenario,
    scenario_llm,
    scenario_philly,
    tdp_watts,
    write_default_scenarios,
    write_power_schedule,
)
from solver.simulate.trace import (
    COLUMNS,
    check_trace_against,
    cluster_pools,
    read_trace,
    write_trace,
)
from solver.simulate.workload import WorkloadMix, runs

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "instances" / "sim"
HEADER = "job_id,submit_time_s,tenant,workload,num_gpus,duration_s"


def problems_of(path: Path) -> list[str]:
    with pytest.raises(SimulationError) as e:
        read_trace(path)
    return e.value.problems


def trace_file(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    p = tmp_path / "t.csv"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


@pytest.fixture(scope="module")
def philly() -> Scenario:
    return scenario_philly(0)


@pytest.fixture(scope="module")
def llm() -> Scenario:
    return scenario_llm(0)


@pytest.fixture(scope="module")
def cluster() -> pb.ClusterSnapshot:
    return scenario_philly(0).cluster


# ---------------------------------------------------------------- trace: one test per rule


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


@pytest.mark.parametrize("value", ["-5", "x", "nan", "inf", ""])
def test_bad_submit_time(tmp_path: Path, value: str) -> None:
    p = trace_file(tmp_path, f"a,{value},t,philly,1,5")
    assert problems_of(p) == [f"{p}:2:submit_time_s: must be a finite number >= 0, got {value!r}"]


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "x", ""])
def test_bad_gpu_count(tmp_path: Path, value: str) -> None:
    p = trace_file(tmp_path, f"a,0,t,philly,{value},5")
    assert problems_of(p) == [f"{p}:2:num_gpus: must be a positive integer, got {value!r}"]


@pytest.mark.parametrize("value", ["0", "-1", "inf", "x"])
def test_bad_duration(tmp_path: Path, value: str) -> None:
    p = trace_file(tmp_path, f"a,0,t,philly,1,{value}")
    assert problems_of(p) == [f"{p}:2:duration_s: must be a finite number > 0, got {value!r}"]


def test_bad_optional_columns(tmp_path: Path) -> None:
    p = trace_file(
        tmp_path, "a,0,t,philly,1,5,0,-1,maybe", header=HEADER + ",deadline_s,weight,preemptible"
    )
    assert problems_of(p) == [
        f"{p}:2:deadline_s: must be empty (no deadline) or a finite number > 0, got '0'",
        f"{p}:2:weight: must be empty (1) or a finite number > 0, got '-1'",
        f"{p}:2:preemptible: must be empty (true), true, false, 1 or 0, got 'maybe'",
    ]


def test_every_problem_of_a_file_at_once(tmp_path: Path) -> None:
    p = trace_file(tmp_path, "a,-1,t,philly,1,5", "b,0,t,philly,0,5", "c,0,t,philly,1,0")
    assert problems_of(p) == [
        f"{p}:2:submit_time_s: must be a finite number >= 0, got '-1'",
        f"{p}:3:num_gpus: must be a positive integer, got '0'",
        f"{p}:4:duration_s: must be a finite number > 0, got '0'",
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


def test_load_scenario_collects_the_problems_of_every_file(tmp_path: Path) -> None:
    trace = trace_file(tmp_path, "a,0,t,philly,9999,5", "b,-1,t,philly,1,5")
    bad_cluster = tmp_path / "c.json"
    bad_cluster.write_text('{"gpu_types": [], "nodes": []}')
    with pytest.raises(SimulationError) as e:
        load_scenario(trace, bad_cluster)
    assert e.value.problems == [
        f"{bad_cluster}:gpu_types: must not be empty",
        f"{bad_cluster}:nodes: must not be empty",
        f"{trace}:3:submit_time_s: must be a finite number >= 0, got '-1'",
    ]
    with pytest.raises(SimulationError) as e:
        load_scenario(trace, SIM / "philly-a-cluster.json")
    assert e.value.problems == [f"{trace}:3:submit_time_s: must be a finite number >= 0, got '-1'"]


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
        f"{p}:steps[1].start_s: must be after the previous step's 32400",
        f"{p}:steps[2].start_s: must be in [0, period_s), got 90000",
        f"{p}:steps[2].watts: must be a number > 0 or null, got -1",
        f"{p}:steps[3].note: unknown field",
        f"{p}:steps[3].start_s: must be in [0, period_s), got 90001",
        f"{p}:steps[3].watts: 1000 W is below the idle power of the cluster's GPUs (20416 W)",
    ]


# ---------------------------------------------------------------- the Philly converter


def test_philly_window_converts_with_relative_times() -> None:
    everything = philly_trace(PHILLY_WINDOW)
    assert len(everything) == 2500
    jobs = philly_trace(PHILLY_WINDOW, start=100, count=50)
    assert len(jobs) == 50
    assert jobs[0].submit_time_s == 0.0
    assert [j.job_id for j in jobs] == [f"philly-{i:05d}" for i in range(100, 150)]
    first = everything[100].submit_time_s
    for j, k in zip(jobs, everything[100:150], strict=True):
        assert j.submit_time_s == pytest.approx(k.submit_time_s - first)
        assert (j.num_gpus, j.duration_s, j.tenant, j.row) == (
            k.num_gpus,
            k.duration_s,
            k.tenant,
            k.row,
        )
    assert all(j.workload == "philly" and j.tenant.startswith("vc-") for j in jobs)
    assert [j.submit_time_s for j in everything] == sorted(j.submit_time_s for j in everything)
    drawn = philly_trace(PHILLY_WINDOW, start=None, count=10, seed=3)
    assert drawn == philly_trace(PHILLY_WINDOW, start=None, count=10, seed=3)


def test_philly_converter_cli(tmp_path: Path) -> None:
    out = tmp_path / "p.csv"
    assert convert([str(PHILLY_WINDOW), str(out), "--start", "5", "--count", "20"]) == 0
    assert read_trace(out) == philly_trace(PHILLY_WINDOW, start=5, count=20)
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,-3,0.5,1,\n")
    assert convert([str(bad), str(tmp_path / "x.csv")]) == 2
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(SimulationError) as e:
        philly_trace(bad)
    assert e.value.problems == [f"{bad}:2:timestamp: not a date and time: 'yesterday'"]
    with pytest.raises(SimulationError) as e:
        philly_trace(PHILLY_WINDOW, start=2400, count=200)
    assert e.value.problems == [
        f"{PHILLY_WINDOW}: start 2400 not in 0..2300 (2500 jobs, count 200)"
    ]


# ---------------------------------------------------------------- the workload mix


def test_mix_is_deterministic_and_independent_of_job_order(philly: Scenario) -> None:
    jobs = list(philly.jobs[:300])
    cluster = philly.cluster
    one = WorkloadMix(seed=7).realize_all(jobs, cluster)
    again = WorkloadMix(seed=7).realize_all(list(reversed(jobs)), cluster)
    assert one == list(reversed(again))
    other = WorkloadMix(seed=8).realize_all(jobs, cluster)
    assert [s.workload_name for s in one] != [s.workload_name for s in other]
    assert {s.measured for s in one} == {True, False}


def test_every_realized_job_runs_on_the_cluster(philly: Scenario, llm: Scenario) -> None:
    for scenario in (philly, llm):
        cluster = scenario.cluster
        pools = cluster_pools(cluster)
        gpus = load_gpu_catalog()
        nodes = {n.gpu_type: n for n in cluster.nodes}
        archs = load_architectures()
        for s in scenario.sim_jobs():
            n = s.trace.num_gpus
            assert 1 <= s.min_gpus <= n <= s.max_gpus <= max(pools.values())
            if isinstance(s.workload, ThroughputProfile):
                counts = {p.num_gpus for p in s.workload.points}
                assert n in counts and min(counts) == s.min_gpus and max(counts) == s.max_gpus
                assert all(p.num_gpus <= pools[p.gpu_type] for p in s.workload.points)
            else:
                assert isinstance(s.workload, ModelSpec)
                assert s.workload == archs[s.workload_name]
                assert any(
                    runs(
                        s.workload,
                        gpus[t],
                        n,
                        nodes[t].gpu_count,
                        nodes[t].network_bandwidth_gbps,
                    )
                    for t in pools
                    if n <= pools[t]
                )
            assert s.parameters > 0


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
    assert max(j.duration_s for j in by_type["pretrain"]) > 86_400  # runs for days
    assert all(j.duration_s <= 3 * 86_400 for j in jobs)
    assert max(j.submit_time_s for j in jobs) < 2 * 86_400
    gpu_time = {t: sum(j.num_gpus * j.duration_s for j in js) for t, js in by_type.items()}
    assert gpu_time["pretrain"] / sum(gpu_time.values()) > 0.85  # published: 95.48 %
    assert scenario_llm(1).jobs != jobs


def test_acme_statistics_are_the_published_ones() -> None:
    kalos = load_acme("Kalos")
    assert {t: (s.jobs_pct, s.gpu_time_pct) for t, s in kalos.items()} == {
        "Eval": (92.82, 0.42),
        "Pretrain": (3.22, 95.48),
        "Debug": (2.70, 1.59),
        "Other": (1.26, 2.51),
    }
    assert kalos["Pretrain"].gpus_box == (96, 256, 512, 512, 512)
    assert dict(kalos["Pretrain"].duration_cdf)[262144] == pytest.approx(0.9891)
    assert math.isclose(sum(s.gpu_time_pct for s in kalos.values()), 100, abs_tol=0.01)


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
