"""Metrics and output files of simulated runs, on logs built by hand (expected values worked out
in the comments)."""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from solver.simulate import figures, outputs
from solver.simulate.core import JobRecord, PowerSegment, QueueRecord, RoundRecord, SimulationLog
from solver.simulate.metrics import JOULES_PER_KWH, Summary, jain_index, summarize

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def job(job_id: str, tenant: str, submit: float, **kw: Any) -> JobRecord:
    values: dict[str, Any] = {
        "workload": "resnet50",
        "requested_gpus": 2,
        "weight": 1.0,
        "first_start_s": None,
        "finish_s": None,
        "deadline_s": None,
        "isolated_s": 100.0,
        "samples": 0.0,
        "gpu_seconds": 0.0,
        "energy_j": 0.0,
        "migrations": 0,
        "preemptions": 0,
    }
    return JobRecord(job_id=job_id, tenant=tenant, submit_s=submit, **(values | kw))


def rnd(index: int, solver: float, budget: float) -> RoundRecord:
    return RoundRecord(
        index=index,
        time_s=60.0 * index,
        solver_seconds=solver,
        budget_seconds=budget,
        jobs_waiting=0,
        jobs_running=1,
        gpus_busy=2,
        gpus_available=8,
        predicted_watts=1000.0,
        budget_watts=1200.0,
        migrations=0,
        starts=1,
        preemptions=0,
    )


def seg(
    start: float,
    end: float,
    true: float,
    predicted: float,
    budget: float | None,
    busy: int,
    computing: int,
    available: int,
) -> PowerSegment:
    return PowerSegment(start, end, true, predicted, budget, busy, computing, available)


JOBS = (
    # JCT 100, queue 0, deadline 150 hit, rho 100/50 = 2
    job("a", "t1", 0.0, first_start_s=0.0, finish_s=100.0, deadline_s=150.0, isolated_s=50.0,
        samples=1000.0, energy_j=36_000.0, migrations=1),
    # JCT 200, queue 20, deadline 200 missed (finished 210), rho 200/100 = 2
    job("b", "t1", 10.0, first_start_s=30.0, finish_s=210.0, deadline_s=200.0,
        samples=2000.0, energy_j=72_000.0, preemptions=1),
    # JCT 100, queue 30, no deadline, rho 100/100 = 1
    job("c", "t2", 20.0, first_start_s=50.0, finish_s=120.0, samples=1000.0,
        energy_j=18_000.0, migrations=2, preemptions=1),
    # never started, deadline 300 (a miss), rho up to end_s: (240 - 40) / 80 = 2.5
    job("d", "t2", 40.0, deadline_s=300.0, isolated_s=80.0),
)  # fmt: skip
ROUNDS = (
    rnd(0, 0.1, 0.5),
    rnd(1, 0.2, 0.5),
    rnd(2, 0.4, 0.5),
    rnd(3, 1.0, 0.5),  # over its budget
    rnd(4, 3.0, 0.0),  # no budget: in the percentiles, not in the budget share
)
POWER = (
    seg(0, 100, 1000, 900, 1200, 4, 4, 8),  # within the budget
    seg(100, 150, 1500, 1100, 1200, 8, 6, 8),  # true over by 300/1200 = 0.25
    seg(150, 150, 9000, 9000, 1000, 8, 8, 8),  # zero length: ignored
    seg(150, 180, 800, 1300, 1000, 2, 2, 4),  # predicted over by 300/1000 = 0.3
    seg(180, 240, 400, 400, None, 0, 0, 4),  # no budget
)


def make_log(policy: str = "dsfro", seed: int = 1, **kw: Any) -> SimulationLog:
    values: dict[str, Any] = {"jobs": JOBS, "rounds": ROUNDS, "power": POWER, "end_s": 240.0}
    return SimulationLog(policy=policy, seed=seed, scenario="small", **(values | kw))


def test_job_metrics() -> None:
    s = summarize(make_log())
    assert (s.jobs_total, s.jobs_finished, s.jobs_unfinished) == (4, 3, 1)
    # JCTs [100, 100, 200]; p95 at rank 0.95 * 2 = 1.9: 100 + 0.9 * 100
    assert s.jct_mean_s == pytest.approx(400 / 3)
    assert s.jct_median_s == 100.0
    assert s.jct_p95_s == pytest.approx(190.0)
    # queueing [0, 20, 30] (d never started); p95 at rank 1.9: 20 + 0.9 * 10
    assert s.queue_mean_s == pytest.approx(50 / 3)
    assert s.queue_median_s == 20.0
    assert s.queue_p95_s == pytest.approx(29.0)
    assert s.makespan_s == 210.0  # last finish 210 - first submit 0
    assert s.migrations_per_job == 0.75  # (1 + 0 + 2 + 0) / 4
    assert s.preemptions_per_job == 0.5  # (0 + 1 + 1 + 0) / 4
    assert s.deadline_jobs == 3
    assert s.deadline_hit_rate == pytest.approx(1 / 3)  # a hit; b late; d unfinished


def test_energy_power_and_utilisation() -> None:
    s = summarize(make_log())
    # 1000 x 100 + 1500 x 50 + 800 x 30 + 400 x 60 = 223 000 J (the zero-length segment: 0)
    assert s.energy_kwh == pytest.approx(223_000 / JOULES_PER_KWH)
    assert s.jobs_energy_kwh == pytest.approx(126_000 / JOULES_PER_KWH)
    assert s.samples == 4000.0
    assert s.energy_per_sample_j == pytest.approx(223_000 / 4000)
    # budget in force for 100 + 50 + 30 = 180 s; true over it for 50 s, predicted for 30 s
    assert s.over_budget_share == pytest.approx(50 / 180)
    assert s.max_excess == pytest.approx(0.25)
    assert s.predicted_over_budget_share == pytest.approx(30 / 180)
    assert s.predicted_max_excess == pytest.approx(0.3)
    # available GPU-s 8 x 100 + 8 x 50 + 4 x 30 + 4 x 60 = 1560; busy 400 + 400 + 60 = 860;
    # computing 400 + 300 + 60 = 760
    assert s.utilisation_busy == pytest.approx(860 / 1560)
    assert s.utilisation_computing == pytest.approx(760 / 1560)


def test_fairness_and_solver_time() -> None:
    s = summarize(make_log())
    # rho: a 2, b 2 (t1: mean 2); c 1, d 2.5 up to end_s (t2: mean 1.75)
    assert s.fairness_by_tenant == {"t1": pytest.approx(2.0), "t2": pytest.approx(1.75)}
    assert s.fairness_max_rho == pytest.approx(2.5)
    assert s.fairness_max_tenant_rho == pytest.approx(2.0)
    # Jain: 3.75^2 / (2 x (4 + 3.0625)) = 14.0625 / 14.125
    assert s.fairness_jain == pytest.approx(14.0625 / 14.125)
    # solver [0.1, 0.2, 0.4, 1.0, 3.0]: p50 0.4; p99 at rank 3.96: 1.0 + 0.96 x 2.0
    assert s.rounds == 5
    assert s.solver_p50_s == pytest.approx(0.4)
    assert s.solver_p99_s == pytest.approx(2.92)
    assert s.solver_max_s == 3.0
    # budgeted rounds: 1 of 4 over; ratios [0.2, 0.4, 0.8, 2.0], p99 at rank 2.97
    assert s.solver_over_budget_share == 0.25
    assert s.solver_p99_budget_ratio == pytest.approx(0.8 + 0.97 * 1.2)


def test_jain_index() -> None:
    assert jain_index([1.0, 1.0, 1.0]) == 1.0
    assert jain_index([1.0, 0.0]) == 0.5
    assert jain_index([]) is None


def test_empty_and_unfinished_runs() -> None:
    empty = summarize(make_log(jobs=(), rounds=(), power=(), end_s=0.0))
    assert empty.jobs_total == 0 and empty.energy_kwh == 0.0
    for key in (
        "jct_mean_s",
        "jct_p95_s",
        "queue_mean_s",
        "makespan_s",
        "energy_per_sample_j",
        "over_budget_share",
        "max_excess",
        "utilisation_busy",
        "migrations_per_job",
        "deadline_hit_rate",
        "fairness_max_rho",
        "fairness_jain",
        "solver_p99_s",
        "solver_over_budget_share",
    ):
        assert getattr(empty, key) is None, key
    assert empty.fairness_by_tenant == {}
    assert Summary.from_dict(json.loads(json.dumps(empty.to_dict(), allow_nan=False))) == empty

    # nothing finished, no budget anywhere: every job with a deadline misses
    unfinished = tuple(replace(j, finish_s=None) for j in JOBS)
    unbudgeted = tuple(replace(p, budget_watts=None) for p in POWER)
    s = summarize(make_log(jobs=unfinished, power=unbudgeted))
    assert (s.jobs_finished, s.jobs_unfinished) == (0, 4)
    assert s.jct_mean_s is None and s.makespan_s is None
    assert s.queue_mean_s == pytest.approx(50 / 3)  # starts still count
    assert s.deadline_hit_rate == 0.0
    assert s.over_budget_share is None and s.predicted_max_excess is None
    # rho up to end_s 240: a 240/50, b 230/100, c 220/100, d 200/80
    assert s.fairness_max_rho == pytest.approx(4.8)


def test_summary_round_trips_through_json() -> None:
    s = summarize(make_log())
    assert Summary.from_dict(json.loads(json.dumps(s.to_dict(), allow_nan=False))) == s


# ---------------------------------------------------------------- files of a run


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_write_run(tmp_path: Path) -> None:
    log = make_log()
    summary = summarize(log)
    paths = outputs.write_run(log, summary, tmp_path / "out", "dsfro-1")
    assert [p.name for p in paths] == [
        "dsfro-1-summary.json",
        "dsfro-1-jobs.csv",
        "dsfro-1-rounds.csv",
        "dsfro-1-power.csv",
        "dsfro-1-tenants.csv",
    ]
    assert json.loads(paths[0].read_text()) == summary.to_dict()
    jobs = read_csv(paths[1])
    assert list(jobs[0]) == [*(f for f in JobRecord.__dataclass_fields__), "jct_s", "queue_s"]
    assert [(r["job_id"], r["jct_s"], r["queue_s"]) for r in jobs] == [
        ("a", "100.0", "0.0"),
        ("b", "200.0", "20.0"),
        ("c", "100.0", "30.0"),
        ("d", "", ""),
    ]
    rounds = read_csv(paths[2])
    assert len(rounds) == 5 and list(rounds[0]) == list(outputs.ROUND_COLUMNS)
    assert rounds[3]["solver_seconds"] == "1.0"
    power = read_csv(paths[3])
    assert len(power) == 5 and list(power[0]) == list(outputs.POWER_COLUMNS)
    assert power[4]["budget_watts"] == ""
    assert not list((tmp_path / "out").glob(".*"))  # no temporary file left


def test_failed_write_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log()
    (tmp_path / "r-jobs.csv").write_text("old\n")
    real_replace = os.replace
    calls = []

    def flaky_replace(src: Any, dst: Any) -> None:
        calls.append(dst)
        if len(calls) == 2:  # the jobs table
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(OSError, match="disk full"):
        outputs.write_run(log, summarize(log), tmp_path, "r")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r-jobs.csv", "r-summary.json"]
    assert (tmp_path / "r-jobs.csv").read_text() == "old\n"  # the old file untouched

    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------- comparison


def summary(policy: str, seed: int, jct: float, energy: float, **kw: Any) -> Summary:
    base = summarize(make_log())
    return replace(base, policy=policy, seed=seed, jct_mean_s=jct, energy_kwh=energy, **kw)


def test_comparison_ratios(tmp_path: Path) -> None:
    summaries = [
        summary("dsfro", 1, 100.0, 10.0, deadline_hit_rate=None),
        summary("dsfro", 2, 200.0, 14.0, deadline_hit_rate=0.5),
        summary("gavel", 1, 200.0, 12.0),
        summary("gavel", 2, 300.0, 12.0),
        summary("fifo", 1, 300.0, 24.0),
    ]
    rows = outputs.comparison_rows(summaries, ["gavel", "fifo"])
    dsfro = rows[0]
    assert [r.policy for r in rows] == ["dsfro", "gavel", "fifo"]
    assert dsfro.mean["jct_mean_s"] == 150.0 and dsfro.mean["energy_kwh"] == 12.0
    assert dsfro.mean["deadline_hit_rate"] == 0.5  # mean of the seeds where it is defined
    assert dsfro.ratios[("jct_mean_s", "gavel")] == pytest.approx(150 / 250)
    assert dsfro.ratios[("energy_horizon_kwh", "gavel")] == 1.0  # equal spans: no padding
    assert dsfro.ratios[("jct_mean_s", "fifo")] == 0.5
    assert dsfro.ratios[("energy_horizon_kwh", "fifo")] == 0.5
    assert dsfro.seed_ratios[1][("jct_mean_s", "gavel")] == 0.5  # paired: 100 / 200
    assert dsfro.seed_ratios[2][("jct_mean_s", "fifo")] is None  # fifo has no seed 2

    md, table, tenants = outputs.write_comparison(summaries, tmp_path, "cmp", ["gavel", "fifo"])
    assert [(r["policy"], r["tenant"], r["runs"]) for r in read_csv(tenants)] == [
        ("dsfro", "t1", "2"),
        ("dsfro", "t2", "2"),
        ("gavel", "t1", "2"),
        ("gavel", "t2", "2"),
        ("fifo", "t1", "1"),
        ("fifo", "t2", "1"),
    ]
    rows_csv = read_csv(table)
    assert [(r["policy"], r["seed"]) for r in rows_csv] == [
        ("dsfro", "1"),
        ("dsfro", "2"),
        ("dsfro", "mean"),
        ("gavel", "1"),
        ("gavel", "2"),
        ("gavel", "mean"),
        ("fifo", "1"),
        ("fifo", "mean"),
    ]
    mean = rows_csv[2]
    assert mean["runs"] == "2" and mean["jct_mean_s"] == "150.0"
    assert mean["jct_mean_s/gavel"] == "0.6" and mean["energy_horizon_kwh/fifo"] == "0.5"
    assert rows_csv[1]["jct_mean_s/fifo"] == ""
    assert rows_csv[5]["jct_mean_s/gavel"] == "1.0"
    text = md.read_text()
    assert "mean JCT (s) / gavel" in text
    assert "| small | dsfro | 2 | 150 |" in text and "| 0.600 | 1.000 | 0.500 | 0.500 |" in text

    with pytest.raises(ValueError, match="seed 1"):
        outputs.comparison_rows([*summaries, summaries[0]])


# ---------------------------------------------------------------- figures


def test_figure_data() -> None:
    logs = [make_log("dsfro", 1), make_log("dsfro", 2), make_log("fifo", 1)]
    cdf = figures.jct_cdf_data(logs)
    assert cdf == {"dsfro": [100.0, 100.0, 100.0, 100.0, 200.0, 200.0], "fifo": [100, 100, 200]}
    points = figures.energy_jct_points([summarize(g) for g in logs])
    assert len(points["dsfro"]) == 2 and len(points["fifo"]) == 1
    assert points["dsfro"][1] == pytest.approx((400 / 3, 223_000 / 3.6e6))
    power = figures.power_series(logs[0])
    assert power["true"] == ([0, 100, 100, 150, 150, 180, 180, 240], [1000, 1000, 1500, 1500,
                             800, 800, 400, 400])  # fmt: skip
    budget = power["budget"][1]
    assert budget[:6] == [1200, 1200, 1200, 1200, 1000, 1000] and math.isnan(budget[6])
    busy = figures.utilisation_series(logs[0])["busy"][1]
    assert busy == [0.5, 0.5, 1.0, 1.0, 0.5, 0.5, 0.0, 0.0]
    first = figures.first_seed_per_policy(list(reversed(logs)))
    assert [(g.policy, g.seed) for g in first] == [("fifo", 1), ("dsfro", 1)]


def test_write_figures(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    logs = [make_log("dsfro", 1), make_log("fifo", 1)]
    paths = figures.write_figures(logs, tmp_path, "cmp")
    assert [p.name for p in paths] == [
        "cmp-jct-cdf.png",
        "cmp-energy-jct.png",
        "cmp-power.png",
        "cmp-utilisation.png",
    ]
    for p in paths:
        assert p.read_bytes().startswith(PNG_MAGIC)


def test_per_tenant_metrics_against_the_queues_entitlement(tmp_path: Path) -> None:
    jobs = (
        replace(JOBS[0], gpu_seconds=720.0, normalized_s=50.0),
        replace(JOBS[1], gpu_seconds=1440.0, normalized_s=130.0, borrowed_gpu_seconds=360.0),
        *JOBS[2:],
    )
    log = make_log(jobs=jobs, queues=(QueueRecord("t1", 2.0, 4.0),))
    s = summarize(log)
    t1, t2 = s.tenants["t1"], s.tenants["t2"]
    assert (t1.weight, t1.jobs, t1.finished) == (2.0, 2, 2)
    # JCTs 100 and 200: p95 at rank 0.95, 100 + 0.95 * 100; rho 2 and 2
    assert t1.jct_mean_s == 150.0 and t1.jct_p95_s == pytest.approx(195.0)
    assert (t1.rho_mean, t1.rho_max) == (2.0, 2.0)
    assert t1.gpu_hours == pytest.approx(0.6) and t1.normalized_hours == pytest.approx(0.05)
    # t1 has work over [0, 100] u [10, 210] = 210 s with 4 nominal GPUs: 840 GPU-s
    assert t1.entitled_gpu_hours == pytest.approx(840 / 3600)
    assert t1.entitlement_share == pytest.approx(2160 / 840)
    assert t1.borrowed_gpu_hours == pytest.approx(0.1)
    # t2 declares no queue: no entitlement; d unfinished counts up to the end (rho 2.5)
    assert t2.weight is None and t2.entitled_gpu_hours is None and t2.entitlement_share is None
    assert (t2.jobs, t2.finished, t2.rho_max) == (2, 1, 2.5)
    assert s.fairness_jain_entitlement == 1.0  # one tenant with a queue
    assert Summary.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    paths = outputs.write_run(log, s, tmp_path, "r")
    rows = read_csv(paths[4])
    assert [(r["tenant"], r["entitled_gpu_hours"]) for r in rows] == [
        ("t1", str(840 / 3600)),
        ("t2", ""),
    ]
    text = outputs.tenants_markdown([s])
    assert "| small | dsfro | t1 | 1 | 150 | 195 | 2 | 2 | 0.6 | 0.2333 | 2.57 | 0.1 |" in text


def test_a_run_stopped_early_gives_no_work_interval_to_jobs_not_yet_submitted() -> None:
    """--max-time: a job submitted after the end is neither busy time nor a rho."""
    from solver.simulate.tenant_metrics import busy_seconds

    jobs = [job("a", "t", 0.0, finish_s=50.0), job("b", "t", 80.0), job("late", "t", 500.0)]
    assert busy_seconds(jobs, 200.0) == pytest.approx(50.0 + 120.0)
    assert busy_seconds([job("late", "t", 500.0)], 200.0) == 0.0
