"""Energy three ways (issue 19): to each run's own makespan, at an equal horizon (every run of a
comparison padded with its cluster's idle power to the longest span), and the jobs' own per
sample; in the summary, the comparison's table, CSV and figure data, and ``dsfro simulate``.
Expected values worked out in the comments."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from solver.cli.main import main
from solver.simulate import figures, outputs
from solver.simulate.core import JobRecord, PowerSegment, SimulationLog
from solver.simulate.metrics import JOULES_PER_KWH, Summary, equal_horizon, summarize

ROOT = Path(__file__).resolve().parent.parent


def run(policy: str, seed: int, end: float, watts: float, **kw: Any) -> SimulationLog:
    """One job submitted at 100 s, finished at ``end``, the cluster drawing ``watts`` meanwhile;
    the job drew 1,200 W of it and trained 3,000 samples; 500 W idle floor."""
    job = JobRecord(
        job_id="a", tenant="t", workload="w", requested_gpus=1, weight=1.0, submit_s=100.0,
        first_start_s=100.0, finish_s=end, deadline_s=None, isolated_s=end - 100.0,
        samples=3000.0, gpu_seconds=end - 100.0, energy_j=1200.0 * (end - 100.0),
        migrations=0, preemptions=0,
    )  # fmt: skip
    segment = PowerSegment(100.0, end, watts, watts, None, 1, 1, 8)
    values: dict[str, Any] = {"rounds": (), "end_s": end, "idle_watts": 500.0}
    return SimulationLog(policy, seed, "small", (job,), power=(segment,), **(values | kw))


def test_a_single_run_is_at_its_own_span_unless_a_horizon_is_given() -> None:
    s = summarize(run("dsfro", 1, 1100.0, 2000.0))
    assert (s.span_s, s.horizon_s, s.idle_watts) == (1000.0, 1000.0, 500.0)
    assert s.energy_kwh == pytest.approx(2e6 / JOULES_PER_KWH)  # 2,000 W x 1,000 s
    assert s.energy_horizon_kwh == s.energy_kwh
    assert s.jobs_energy_kwh == pytest.approx(1.2e6 / JOULES_PER_KWH)
    assert s.jobs_energy_per_sample_j == pytest.approx(1.2e6 / 3000)  # 400 J
    padded = summarize(run("dsfro", 1, 1100.0, 2000.0), horizon_s=3000.0)
    assert padded.horizon_s == 3000.0  # + 500 W x 2,000 s
    assert padded.energy_horizon_kwh == pytest.approx(3e6 / JOULES_PER_KWH)
    assert padded.energy_kwh == s.energy_kwh  # the own-makespan figure is unchanged
    shorter = summarize(run("dsfro", 1, 1100.0, 2000.0), horizon_s=10.0)
    assert shorter.horizon_s == 1000.0  # never shorter than the run
    assert Summary.from_dict(json.loads(json.dumps(padded.to_dict()))) == padded


def test_runs_compared_are_padded_to_the_longest_span_of_their_seed() -> None:
    fast = summarize(run("dsfro", 1, 1100.0, 2000.0))  # span 1,000 s, 2e6 J
    slow = summarize(run("fifo", 1, 3100.0, 1000.0))  # span 3,000 s, 3e6 J
    alone = summarize(run("dsfro", 2, 600.0, 2000.0))  # seed 2: its own span, 500 s
    a, b, c = equal_horizon([fast, slow, alone])
    assert (a.horizon_s, b.horizon_s, c.horizon_s) == (3000.0, 3000.0, 500.0)
    # dsfro seed 1: 2e6 J + 500 W x 2,000 s = 3e6 J, as much as fifo's once both stop at 3,000 s
    assert a.energy_horizon_kwh == pytest.approx(3e6 / JOULES_PER_KWH)
    assert b.energy_horizon_kwh == pytest.approx(3e6 / JOULES_PER_KWH)
    assert c.energy_horizon_kwh == c.energy_kwh
    assert equal_horizon([a, b, c]) == [a, b, c]  # idempotent
    assert equal_horizon([fast], horizon_s=5000.0)[0].horizon_s == 5000.0


def test_the_comparison_shows_three_energies_and_its_ratio_uses_the_equal_horizon(
    tmp_path: Path,
) -> None:
    summaries = [summarize(run("dsfro", 1, 1100.0, 2000.0)), summarize(run("gavel", 1, 3100.0,
                 1000.0))]  # fmt: skip
    (dsfro, gavel) = outputs.comparison_rows(summaries, ["gavel"])
    assert dsfro.mean["energy_kwh"] == pytest.approx(2e6 / JOULES_PER_KWH)  # 0.67 x gavel's
    assert dsfro.mean["energy_horizon_kwh"] == pytest.approx(3e6 / JOULES_PER_KWH)
    assert dsfro.mean["horizon_s"] == 3000.0 and gavel.mean["horizon_s"] == 3000.0
    assert dsfro.mean["jobs_energy_per_sample_j"] == pytest.approx(400.0)
    assert dsfro.ratios[("energy_horizon_kwh", "gavel")] == pytest.approx(1.0)
    assert ("energy_kwh", "gavel") not in dsfro.ratios
    md, table, _ = outputs.write_comparison(summaries, tmp_path, "cmp", ["gavel"])
    with table.open(newline="") as f:
        header = next(csv.reader(f))
    energy = [h for h in header if "energy" in h or h == "horizon_s"]
    assert energy == [
        "energy_kwh",
        "energy_horizon_kwh",
        "horizon_s",
        "jobs_energy_per_sample_j",
        "energy_horizon_kwh/gavel",
    ]
    text = md.read_text()
    for label in ("energy to own makespan (kWh)", "energy at equal horizon (kWh)",
                  "jobs' J/sample", "energy at equal horizon (kWh) / gavel"):  # fmt: skip
        assert label in text, label
    assert "| small | dsfro | 1 |" in text and "| 0.5556 | 0.8333 | 3000 | 400 |" in text


def test_the_figure_has_a_panel_per_energy() -> None:
    summaries = equal_horizon([summarize(run("dsfro", 1, 1100.0, 2000.0)),
                               summarize(run("fifo", 1, 3100.0, 1000.0))])  # fmt: skip
    own = figures.energy_jct_points(summaries, "energy_kwh")
    fair = figures.energy_jct_points(summaries, "energy_horizon_kwh")
    jobs = figures.energy_jct_points(summaries, "jobs_energy_per_sample_j")
    assert len(own["dsfro"]) == len(fair["dsfro"]) == len(jobs["fifo"]) == 1
    assert own["dsfro"][0] == pytest.approx((1000.0, 2e6 / JOULES_PER_KWH))
    assert fair["dsfro"][0] == pytest.approx((1000.0, 3e6 / JOULES_PER_KWH))
    assert jobs["fifo"][0] == pytest.approx((3000.0, 1200.0))  # 1,200 W x 3,000 s / 3,000
    assert [k for k, _ in figures.ENERGY_VIEWS] == [
        "energy_kwh",
        "energy_horizon_kwh",
        "jobs_energy_per_sample_j",
    ]


def test_dsfro_simulate_reports_the_three_energies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,submit_time_s,tenant,workload,num_gpus,duration_s\n"
        "a,0,t,gavel-resnet-50-bs64,1,600\nb,30,t,gavel-resnet-50-bs64,4,1200\n"
    )
    cluster = ROOT / "instances" / "sim" / "philly-a-cluster.json"
    base = ["simulate", "--trace", str(trace), "--cluster", str(cluster)]
    assert main([*base, "--policy", "fifo", "--energy-horizon", "1d", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for key in ("energy_kwh", "energy_horizon_kwh", "horizon_s", "jobs_energy_per_sample_j"):
        assert f"  {key} " in printed, key
    one = json.loads((tmp_path / "t-fifo-s1-summary.json").read_text())
    assert one["horizon_s"] == 86_400.0  # philly-a's cluster idles at 20,416 W
    assert one["idle_watts"] == pytest.approx(20_416.0)
    pad = 20_416.0 * (86_400.0 - one["span_s"]) / JOULES_PER_KWH
    assert one["energy_horizon_kwh"] == pytest.approx(one["energy_kwh"] + pad)

    out = tmp_path / "cmp"
    args = [*base, "--compare", "--policies", "fifo,zeus", "--seeds", "1", "--workers", "1"]
    assert main([*args, "--out", str(out)]) == 0
    capsys.readouterr()
    runs = [json.loads((out / f"t-{p}-s1-summary.json").read_text()) for p in ("fifo", "zeus")]
    longest = max(r["span_s"] for r in runs)
    assert [r["horizon_s"] for r in runs] == [longest, longest]  # rewritten at the equal horizon
    with (out / "t-comparison.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["horizon_s"] for r in rows} == {str(longest)}
