"""The adapter end to end when things go wrong, on a real Slurm and a real DSFRO: a node
drained between the snapshot and the apply, a dead DSFRO service (fallback to Slurm's own
scheduling), the adapter killed mid-round and restarted, malformed demands."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from solver.client import Client
from solver.slurm.commands import Result, run_subprocess
from solver.slurm.decide import Action
from solver.slurm.record import decode
from solver.wire import JobState, SolveRequest, SolveResponse
from tests.slurm_cluster_helpers import (
    GPUS,
    JOBS,
    NODES,
    Cluster,
    MakeAdapter,
    assert_runs_as_planned,
    by_job,
    demand,
    job_script,
)

SAME_PLAN_BUDGET = 5.0
"""Seconds of a round whose plan a test compares with another's: the solve proves its plan
optimal long before (the same plan for the same state only holds for a gap closed)."""


def submit(slurm: Cluster, tmp_path: Path, count: int) -> list[int]:
    script = job_script(tmp_path)
    return [
        slurm.sbatch(m, demand(m, lo, hi), "--gres=gpu:h100:1", script=script)
        for m, lo, hi in JOBS[:count]
    ]


def test_a_node_drained_after_the_snapshot_gets_nothing_and_its_jobs_wait(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    ids = submit(slurm, tmp_path, 6)
    adapter = make_adapter(dsfro)
    drained: list[str] = []
    real = adapter.client

    class DrainAfterSolve:
        """The real client; once the plan is back, the node of its first job drains."""

        def solve(self, request: SolveRequest, **kwargs: Any) -> SolveResponse:
            response: SolveResponse = real.solve(request, **kwargs)
            for a in response.plan.assignments:
                if a.state == JobState.JOB_STATE_RUNNING and not drained:
                    drained.append(a.placement[0].node)
                    slurm.drain(drained[0])
            return response

    adapter.client = DrainAfterSolve()
    report = adapter.round()
    assert report.outcome == "planned" and drained
    got = by_job(report)
    waiting = [d for d in got.values() if d.reason == "node_unavailable"]
    placed = [d for d in got.values() if d.action is Action.PLACE]
    assert waiting and placed  # applied partly
    assert all(d.target is not None and drained[0] in d.target.nodes for d in waiting)
    assert all(d.target is not None and drained[0] not in d.target.nodes for d in placed)
    slurm.wait_running([d.job_id for d in placed])
    jobs = slurm.jobs()
    for d in waiting:  # never released: no job waits on a drained node
        assert jobs[d.job_id].held and decode(jobs[d.job_id].admin_comment).state == ""
    for d in placed:
        assert_runs_as_planned(slurm, tmp_path, d)
    adapter.client = real
    again = by_job(adapter.round())  # planned anew, around the drained node
    for i in ids:
        t = again[i].target
        assert t is None or drained[0] not in t.nodes, again[i]


def test_a_dead_dsfro_releases_nothing_then_falls_back_to_slurm(
    slurm: Cluster, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    ids = submit(slurm, tmp_path, 3)
    adapter = make_adapter(dead, fallback_after=1.5, solve_timeout=2.0)
    first = adapter.round()
    assert first.outcome == "no_plan" and first.error.startswith("UNAVAILABLE")
    assert all(slurm.jobs()[i].held for i in ids)  # nothing released
    time.sleep(1.6)
    second = adapter.round()
    assert second.outcome == "fallback"
    assert {by_job(second)[i].action for i in ids} == {Action.FALLBACK}
    jobs = slurm.wait_running(ids)
    for i in ids:  # Slurm ran them as submitted: 1 GPU, no clock set by the adapter
        assert [g.count for _, g in jobs[i].allocation if g] == [1]
        assert jobs[i].tres_freq == "" and decode(jobs[i].admin_comment).state == "fallback"
    assert not list((tmp_path / "plans").iterdir())


def test_a_job_slurm_never_starts_where_it_is_placed_goes_back_to_slurm(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    """DSFRO plans GPUs, not memory: every node but the last has its memory taken by CPU jobs,
    the last one GPU taken, so an 8-GPU job asking 20 GB is placed where it cannot start. It
    was held and placed anew for ever; after two such placements Slurm gets it as submitted."""
    last = f"node{NODES}"
    for n in range(1, NODES):
        slurm.sbatch(f"mem{n}", None, f"--nodelist=node{n}", "--mem=60000", hold=False)
    gpu = slurm.sbatch("gpu", None, f"--nodelist={last}", "--gres=gpu:h100:1", hold=False)
    job = slurm.sbatch("big", demand("gpt3-1.3b", GPUS, GPUS), f"--gres=gpu:h100:{GPUS}",
                       "--mem=20000", script=job_script(tmp_path))  # fmt: skip
    slurm.wait_running([gpu])
    adapter = make_adapter(dsfro, replan_after=0.5, max_stale_placements=2)
    seen: list[tuple[Action, str]] = []
    for _ in range(8):
        d = by_job(adapter.round()).get(job)
        if d is not None:
            seen.append((d.action, d.reason))
            if d.action is Action.FALLBACK:
                break
        time.sleep(0.6)
    assert seen.count((Action.PLACE, "planned")) == 2, seen
    assert seen.count((Action.REHOLD, "placement_stale")) == 2, seen
    assert seen[-1] == (Action.FALLBACK, "never_started"), seen
    record = decode(slurm.jobs()[job].admin_comment)
    assert record.state == "fallback" and not slurm.jobs()[job].held
    slurm.run("scancel", str(gpu))
    running = slurm.wait_running([job])[job]
    assert [name for name, _ in running.allocation] == [last]  # where its memory was


def test_an_adapter_killed_mid_round_loses_nothing(
    slurm: Cluster, dsfro: str, make_adapter: MakeAdapter, tmp_path: Path
) -> None:
    ids = submit(slurm, tmp_path, 6)

    class Killed(BaseException):
        """What SIGKILL does to the adapter: nothing after it runs."""

    def dies_before_releasing(argv: Sequence[str], timeout: float) -> Result:
        if tuple(argv[:2]) == ("scontrol", "release"):
            raise Killed
        return run_subprocess(argv, timeout)

    # The two rounds must plan alike: a budget the solve closes its gap well within (it did in
    # 1 s, but not always with two test suites beside it: one job landed on another node).
    first = make_adapter(dsfro, runner=dies_before_releasing, budget=SAME_PLAN_BUDGET)
    with pytest.raises(Killed):
        first.round()
    jobs = slurm.jobs()
    killed = {i: decode(jobs[i].admin_comment).target for i in ids}
    assert any(killed.values()) and all(jobs[i].held for i in ids)  # updated, none released
    restarted = make_adapter(dsfro, budget=SAME_PLAN_BUDGET)  # a new process: nothing in memory
    report = restarted.round()
    assert report.outcome == "planned"
    got = by_job(report)
    placed = [got[i] for i in ids if got[i].action is Action.PLACE]
    # The same state in Slurm gives the same plan: what the killed round had begun is done.
    assert {i: got[i].target for i in ids} == killed
    slurm.wait_running([d.job_id for d in placed])
    for d in placed:
        assert_runs_as_planned(slurm, tmp_path, d)
    jobs = slurm.jobs()
    for i in ids:  # every job is running as planned or still held: none lost
        assert i in jobs and (jobs[i].state == "RUNNING" or jobs[i].held)
    after = by_job(restarted.round())
    assert {after[d.job_id].action for d in placed} == {Action.KEEP}


def test_malformed_demands_are_reported_and_skipped_and_the_loop_lives(
    slurm: Cluster,
    dsfro: str,
    make_adapter: MakeAdapter,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = submit(slurm, tmp_path, 2)
    zero_layers = {
        "parameters": 1e9,
        "layers": 0,
        "hidden_size": 2048,
        "attention_heads": 16,
        "sequence_length": 2048,
        "global_batch_size": 256,
    }
    bad = {
        "dsfro:{not json": "comment: malformed JSON after 'dsfro:'",
        demand("gpt-99", 1, 2): 'comment: model: unknown model "gpt-99"',
        'dsfro:{"model":"gpt3-1.3b","max_gpus":"two"}': "comment: max_gpus: expected an integer",
        'dsfro:{"model":"gpt3-1.3b","gpu_count":2}': "comment: gpu_count: unknown key",
        "dsfro:" + json.dumps({"model": zero_layers}): "model.layers",  # DSFRO's own check
    }
    ids = {slurm.sbatch("bad", comment, "--gres=gpu:h100:1"): why for comment, why in bad.items()}
    adapter = make_adapter(dsfro, interval=0.2, poll=0.1)
    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="dsfro.slurm"):
        adapter.run(stop, max_rounds=2)
    assert adapter.rounds == 2
    decisions = [r for r in caplog.records if getattr(r, "event", "") == "decision"]
    skipped = {r.job: (r.reason, r.detail) for r in decisions if r.action == "skip"}  # type: ignore[attr-defined]
    assert set(skipped) == set(ids)
    for job_id, why in ids.items():
        reason, detail = skipped[job_id]
        assert reason == ("rejected_by_dsfro" if why == "model.layers" else "malformed_demand")
        assert why in detail, detail
    jobs = slurm.wait_running(good)
    for job_id, why in ids.items():  # left held, the reason readable in Slurm
        assert jobs[job_id].held
        assert why in decode(jobs[job_id].admin_comment).error
    rounds = [r for r in caplog.records if getattr(r, "event", "") == "round"]
    assert [r.outcome for r in rounds] == ["planned", "planned"]  # type: ignore[attr-defined]


def test_the_client_of_a_dead_service_fails_fast() -> None:
    """The fallback test relies on this: no DSFRO answer hangs a round past its timeout."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with Client(f"127.0.0.1:{port}") as c, pytest.raises(Exception, match="UNAVAILABLE"):
        c.solve(SolveRequest(), timeout=2.0)
    assert time.monotonic() - start < 2.5
