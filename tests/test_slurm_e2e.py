"""The adapter end to end: a real Slurm 22.05 (tests/slurm_cluster_helpers.py), a real DSFRO
service on loopback, real ``sbatch``/``scontrol``. Jobs are placed as the plan says (node
lists, GRES counts and TresFreq read back from ``squeue --json``; the plan file read by the
job itself), a running job is reshaped by requeue and one moved off a drained node, and
``--dry-run`` changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC
from pathlib import Path

from solver.slurm.decide import Action
from solver.slurm.site import Site
from tests.slurm_cluster_helpers import (
    BUDGET,
    JOBS,
    ROOT,
    Cluster,
    MakeAdapter,
    assert_runs_as_planned,
    by_job,
    demand,
    job_script,
)


def test_eight_jobs_are_placed_as_the_plan_says(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    script = job_script(tmp_path)
    ids = [
        slurm.sbatch(m, demand(m, lo, hi), "--gres=gpu:h100:1", script=script) for m, lo, hi in JOBS
    ]
    # A power budget below the cluster's peak: DSFRO lowers clocks, and TresFreq shows it.
    adapter = make_adapter(dsfro, site=Site(power_budget_watts=16000))
    report = adapter.round()
    assert report.outcome == "planned", report.error
    assert report.response is not None
    plan = {a.job: a for a in report.response.plan.assignments}
    got = by_job(report)
    placed = [got[i] for i in ids if got[i].action is Action.PLACE]
    assert len(placed) >= 6, [(d.job_id, d.action, d.reason, d.detail) for d in got.values()]
    for d in placed:  # the decision is the plan's assignment, unchanged
        a = plan[str(d.job_id)]
        assert d.target is not None
        assert (
            d.target.data_parallel,
            d.target.tensor_parallel,
            d.target.pipeline_parallel,
            d.target.sm_clock_mhz,
            d.target.num_gpus,
        ) == (
            a.data_parallel,
            a.tensor_parallel,
            a.pipeline_parallel,
            a.sm_clock_mhz,
            a.num_gpus,
        )
        assert sorted(d.target.nodes) == sorted({s.node for s in a.placement})
    clocks = {d.target.sm_clock_mhz for d in placed if d.target}
    assert len(clocks) >= 2 and min(clocks) < 1785, clocks  # per job, below the top clock
    slurm.wait_running([d.job_id for d in placed])
    for d in placed:
        assert_runs_as_planned(slurm, tmp_path, d)
    jobs = slurm.jobs()
    for i in ids:
        if got[i].action is not Action.PLACE:  # queued by DSFRO: still held, untouched
            assert jobs[i].held and jobs[i].required_nodes == (), (i, got[i].reason)
    m = adapter.metrics.registry
    labels = {"action": "place", "reason": "planned"}
    assert m.get_sample_value("dsfro_slurm_decisions_total", labels) == len(placed)


def test_a_running_job_is_reshaped_by_requeue(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """Slurm's own jobs leave 4 GPUs free: the DSFRO job starts on 4. When one of them ends,
    DSFRO grows it to 8 GPUs; the adapter requeues it and it restarts in its new shape."""
    blockers = [
        slurm.sbatch(f"other{n}", None, f"-w node{n}", "--gres=gpu:h100:8", hold=False)
        for n in (2, 3, 4)
    ]
    small = slurm.sbatch("other1", None, "-w", "node1", "--gres=gpu:h100:4", hold=False)
    slurm.wait_running([*blockers, small])
    script = job_script(tmp_path)
    job = slurm.sbatch("grow", demand("gpt3-6.7b", 1, 8), "--gres=gpu:h100:1", script=script)
    adapter = make_adapter(dsfro)
    first = by_job(adapter.round())[job]
    assert first.action is Action.PLACE and first.target is not None
    assert (first.target.nodes, first.target.gpus_per_node) == (("node1",), 4)
    slurm.wait_running([job])
    assert_runs_as_planned(slurm, tmp_path, first)
    slurm.run("scancel", str(small))
    slurm.wait("node1's GPUs to free", lambda: small not in slurm.jobs())
    second = by_job(adapter.round())[job]
    assert (second.action, second.reason) == (Action.REQUEUE, "moved"), second
    assert second.target is not None and second.target.num_gpus == 8
    slurm.wait_running([job], seconds=slurm.cred_expire + 20)
    assert slurm.jobs()[job].restart_count == 1
    assert_runs_as_planned(slurm, tmp_path, second, restart=1)
    third = by_job(adapter.round())[job]
    assert third.action is Action.KEEP  # as planned: nothing moves twice


def test_a_job_on_a_drained_node_moves_to_another_by_requeue(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """With --evacuate-drained, draining a node moves its DSFRO jobs elsewhere: requeued,
    placed on another node, restarted there in the planned shape."""
    script = job_script(tmp_path)
    job = slurm.sbatch("mover", demand("gpt3-6.7b", 2, 8), "--gres=gpu:h100:1", script=script)
    adapter = make_adapter(dsfro, evacuate_drained=True)
    first = by_job(adapter.round())[job]
    assert first.action is Action.PLACE and first.target is not None
    slurm.wait_running([job])
    [old] = first.target.nodes
    slurm.drain(old)
    moved = by_job(adapter.round())[job]
    assert (moved.action, moved.reason) == (Action.REQUEUE, "evacuate_drained"), moved
    assert moved.target is not None and old not in moved.target.nodes
    slurm.wait_running([job], seconds=slurm.cred_expire + 20)
    assert slurm.jobs()[job].restart_count == 1
    assert_runs_as_planned(slurm, tmp_path, moved, restart=1)


def test_dry_run_prints_the_plan_and_changes_nothing(slurm: Cluster, dsfro: str) -> None:
    ids = [slurm.sbatch(m, demand(m, lo, hi), "--gres=gpu:h100:1") for m, lo, hi in JOBS[:3]]
    before = {i: (j.held, j.admin_comment, j.required_nodes) for i, j in slurm.jobs().items()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "solver.slurm",
            "--server",
            dsfro,
            "--dry-run",
            "--budget",
            str(BUDGET),
            "--log-format",
            "text",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("round 1: planned; DSFRO OPTIMAL")
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| job")]
    assert sorted(int(r.split("|")[1]) for r in rows) == ids
    assert any("| place | planned | node" in r for r in rows)
    after = {i: (j.held, j.admin_comment, j.required_nodes) for i, j in slurm.jobs().items()}
    assert after == before


def test_a_job_with_slack_waits_for_cleaner_hours_and_the_others_run(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """A site grid schedule: dirty now (400 gCO2/kWh), clean from two hours on (100). The job
    with a 12-hour deadline and 30 minutes of work stays held, queued DEFERRED; the job without
    a deadline is placed and runs."""
    from datetime import datetime, timedelta

    from solver.slurm.site import site_from_dict

    hour = datetime.now(UTC).replace(tzinfo=None, minute=0, second=0, microsecond=0)
    rows = "".join(
        f"{(hour + timedelta(hours=k)).isoformat()},{400 if k < 2 else 100}\n" for k in range(24)
    )
    schedule = tmp_path / "grid.csv"
    schedule.write_text("time,carbon_g_per_kwh\n" + rows)
    site = site_from_dict({"grid": {"schedule": str(schedule), "hours": 24}})
    script = job_script(tmp_path)
    # 30 minutes of gpt3-1.3b at its predicted best on one H100 is far below 1e9 samples: a
    # run of minutes; its deadline leaves hours of slack.
    patient = slurm.sbatch(
        "gpt3-1.3b",
        demand("gpt3-1.3b", 1, 1, remaining_samples=2e5, deadline="12h"),
        "--gres=gpu:h100:1",
        script=script,
    )
    urgent = slurm.sbatch(
        "bert-large", demand("bert-large", 1, 1), "--gres=gpu:h100:1", script=script
    )
    report = make_adapter(dsfro, site=site).round()
    assert report.outcome == "planned", report.error
    got = by_job(report)
    assert got[patient].action is Action.WAIT and got[patient].detail.startswith("deferred:")
    assert got[urgent].action is Action.PLACE
    slurm.wait_running([urgent])
    assert slurm.jobs()[patient].held
