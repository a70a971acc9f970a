"""Simulator input found wrong from outside (issue 19, point 5): each case as a user meets it,
``dsfro simulate`` on small files, with the error (exit 2, naming the field or row, nothing
written) or the documented behaviour it now gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.cli.main import main
from solver.simulate.core import SimulationError
from solver.simulate.engine import Simulation
from solver.simulate.policies import make_policy
from solver.simulate.scenario import load_scenario
from solver.simulate.settings import EngineSettings
from solver.simulate.trace import read_trace
from tests.simulate_helpers import HEADER, trace_file

ROOT = Path(__file__).resolve().parent.parent
RESNET = "gavel-resnet-50-bs64"
"""Measured on V100 at 1, 2 and 4 GPUs: a job the cluster below runs, cheaply."""
IDLE_W = 16 * 36.7
"""Two 8-GPU V100-16GB servers idle (models/gpus.json: 36.7 W each): 587.2 W."""


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """Two V100-16GB servers of philly-a's cluster, no budget."""
    full = json.loads((ROOT / "instances" / "sim" / "philly-a-cluster.json").read_text())
    types = [t for t in full["gpu_types"] if t["name"] == "V100-16GB"]
    nodes = [n for n in full["nodes"] if n["gpu_type"] == "V100-16GB"][:2]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"gpu_types": types, "nodes": nodes}))
    return path


def power(tmp_path: Path, watts: float) -> Path:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"steps": [{"start_s": 0, "watts": watts}]}))
    return path


def simulate(
    capsys: pytest.CaptureFixture[str], trace: Path, cluster: Path, out: Path, *extra: str
) -> tuple[int, str]:
    code = main(["simulate", "--trace", str(trace), "--cluster", str(cluster), *extra,
                 "--out", str(out)])  # fmt: skip
    return code, capsys.readouterr().err


def test_a_budget_under_the_idle_floor_plus_headroom_names_the_step(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """600 W is above the idle floor (587.2 W) but 600 x 0.93 = 558 W is not: was exit 1, an
    internal error of the first round."""
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,600")
    p, out = power(tmp_path, 600), tmp_path / "out"
    code, err = simulate(capsys, trace, cluster, out, "--power-schedule", str(p),
                         "--power-headroom", "0.07")  # fmt: skip
    assert code == 2 and not out.exists()
    assert err.splitlines() == [
        f"{p}:steps[0].watts: 600 W less the power headroom of 7 % is 558 W, below the idle "
        f"power of the cluster's GPUs ({IDLE_W:g} W): no plan can meet it; give at least "
        f"{IDLE_W / 0.93:.1f} W or a smaller headroom (--power-headroom)"
    ]
    with pytest.raises(SimulationError, match=r"steps\[0\]\.watts: 600 W less"):  # the engine too
        scenario = load_scenario(trace, cluster, p, settings=EngineSettings(power_headroom=0.07))
        Simulation(scenario.cluster, scenario.sim_jobs(), make_policy("fifo"),
                   schedule=scenario.power, settings=scenario.settings)  # fmt: skip


def test_a_budget_over_the_services_limit_names_the_step(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,600")
    p = power(tmp_path, 1e11)
    code, err = simulate(capsys, trace, cluster, tmp_path / "out", "--power-schedule", str(p))
    assert code == 2
    assert err.splitlines() == [f"{p}:steps[0].watts: must be at most 1e+10 W, got 1e+11"]


def test_a_job_of_1e13_seconds_is_refused_by_row(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was accepted: the run went on through ten simulated years of hourly rounds, to an
    internal error (the job's age over the service's limit). A year is the longest a job may be."""
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,1e13")
    code, err = simulate(capsys, trace, cluster, tmp_path / "out", "--policy", "fifo")
    assert code == 2
    assert err.splitlines() == [
        f"{trace}:2:duration_s: must be a finite number > 0 and at most 31536000 (a year), "
        "got '1e13'"
    ]
    year = trace_file(tmp_path, f"a,0,t,{RESNET},1,31536000")
    assert read_trace(year)[0].duration_s == 365 * 86_400.0


def test_a_budget_too_small_for_any_job_names_each_row(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """650 W leaves 62.8 W above the idle floor, less than any configuration of either job
    needs: was exit 0 after a day of empty rounds, nothing finished."""
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,600", f"b,5,t,{RESNET},2,600")
    p, out = power(tmp_path, 650), tmp_path / "out"
    code, err = simulate(capsys, trace, cluster, out, "--power-schedule", str(p))
    assert code == 2 and not out.exists()
    lines = err.splitlines()
    assert [line.split(" fits ")[0] for line in lines] == [
        f"{trace}:2: job 'a'",
        f"{trace}:3: job 'b'",
    ]
    assert "the largest budget (" + f"{p}:steps[0].watts, 650 W) less the headroom of 0 % " \
        "leaves 62.8 W above the cluster's floor" in lines[0]  # fmt: skip


def test_a_budget_below_the_floor_with_node_base_power_is_an_error_naming_the_step(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Enough for the GPUs' idle power, not with each node's base power: was an internal
    error (exit 1) at the first round."""
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,600")
    p, out = power(tmp_path, 650), tmp_path / "out"
    flags = ["--power-schedule", str(p), "--power-saving", "on", "--node-base-watts", "400"]
    code, err = simulate(capsys, trace, cluster, out, *flags)
    assert code == 2 and not out.exists()
    assert f"{p}:steps[0].watts: 650 W" in err
    assert "below the idle power of the cluster's GPUs and its nodes' base power" in err


def test_a_policy_that_runs_nothing_stops_the_run_with_exit_1(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """760 W fits the job at a low clock, not fifo's top clock: fifo runs nothing for a day of
    rounds; the run stops, its files are written, and the exit status says it (was 0)."""
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,600")
    out = tmp_path / "out"
    code, err = simulate(capsys, trace, cluster, out, "--power-schedule",
                         str(power(tmp_path, 760)), "--policy", "fifo")  # fmt: skip
    assert code == 1
    assert "the policy ran nothing for 289 rounds with 1 jobs waiting" in err
    summary = json.loads((out / "t-fifo-s1-summary.json").read_text())
    assert (summary["jobs_finished"], summary["jobs_unfinished"]) == (0, 1)


def test_every_fault_of_a_row_is_reported(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four faults in one row, one of them (the workload) found against the cluster: the
    cluster's checks used to be skipped once any row had a fault."""
    trace = trace_file(tmp_path, "a,-5,,gpt5,1,0")
    code, err = simulate(capsys, trace, cluster, tmp_path / "out")
    assert code == 2
    assert [line.split(": ")[0] for line in err.splitlines()] == [
        f"{trace}:2:submit_time_s",
        f"{trace}:2:tenant",
        f"{trace}:2:duration_s",
        f"{trace}:2:workload",
    ]
    assert "unknown workload 'gpt5'" in err


def test_the_wires_limits_are_named_by_row(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A deadline over ten years or a weight over 1000 passed the trace check, then failed the
    whole scenario (exit 1) without a row."""
    header = HEADER + ",deadline_s,weight"
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,600,1e13,", f"b,0,t,{RESNET},1,600,,5000",
                       header=header)  # fmt: skip
    code, err = simulate(capsys, trace, cluster, tmp_path / "out")
    assert code == 2
    assert [line.split(": ")[0] for line in err.splitlines()] == [
        f"{trace}:2:deadline_s",
        f"{trace}:3:weight",
    ]


def test_max_time_reads_days(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--max-time 2d`` was refused; a three-day job is stopped at two days."""
    trace = trace_file(tmp_path, f"a,0,t,{RESNET},1,259200")
    out = tmp_path / "out"
    code, _ = simulate(capsys, trace, cluster, out, "--policy", "fifo", "--max-time", "2d")
    assert code == 0
    summary = json.loads((out / "t-fifo-s1-summary.json").read_text())
    assert summary["end_s"] == 172_800.0 and summary["jobs_unfinished"] == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ([], "give --scenario or --trace and --cluster"),
        (["--trace", "t.csv"], "--trace needs --cluster"),
        (["--scenario", "carbon-a", "--trace", "t.csv"], "give --scenario or --trace"),
        (["--scenario", "carbon-a", "--power-schedule", "p.json"], "--power-schedule is for"),
        (["--scenario", "carbon-a", "--cluster", "c.json"], "--cluster is for --trace runs"),
    ],
)
def test_inputs_that_do_not_go_together_are_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """A --power-schedule beside --scenario was silently ignored (the scenario's own ran)."""
    out = tmp_path / "out"
    assert main(["simulate", *flags, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
