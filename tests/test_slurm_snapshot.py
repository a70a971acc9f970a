"""Slurm's state -> the SolveRequest: which nodes and GPUs, which jobs, in which shape; the
request passes the service's own validation."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC

import pytest

from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.slurm.demand import Demand
from solver.slurm.record import Original, Record
from solver.slurm.site import Site
from solver.slurm.snapshot import Snapshot, allowed_types, build_snapshot, typed_only
from solver.slurm.state import parse_sinfo, parse_squeue
from tests.slurm_helpers import captured

NOW = 1796230800.0
"""A little after the captures."""


def snapshot(state: str, sinfo: str | None = None, **kwargs: object) -> Snapshot:
    nodes = parse_sinfo(sinfo or captured(state, "sinfo"))
    jobs = parse_squeue(captured(state, "squeue"))
    return build_snapshot(nodes, jobs, Site(), now=NOW, budget_seconds=2, **kwargs)  # type: ignore[arg-type]


def unavailable(snap: Snapshot) -> dict[str, list[int]]:
    return {n.name: list(n.unavailable_gpu_indices) for n in snap.request.cluster.nodes}


def test_jobs_without_demand_hold_their_gpus_and_held_jobs_wait() -> None:
    snap = snapshot("mixed")
    assert validate_request(snap.request, Limits()) == []
    assert unavailable(snap) == {
        "node1": list(range(7)),  # jobs 1 and 2, Slurm's
        "node2": [0, 1, 2, 3],
        "node3": [],
        "node4": list(range(8)),  # drained: nothing new starts there
    }
    [gpu] = snap.request.cluster.gpu_types
    assert gpu.name == "H100-80GB" and list(gpu.sm_clocks_mhz)[-1] == 1785
    assert {n.gpu_type for n in snap.request.cluster.nodes} == {"H100-80GB"}
    jobs = {j.name: j for j in snap.request.jobs}
    assert sorted(jobs) == ["3", "4"] and [t.running for t in snap.tracked.values()] == [None] * 2
    three, four = jobs["3"], jobs["4"]
    assert (three.min_gpus, three.max_gpus) == (1, 4)
    assert list(three.allowed_gpu_types) == ["H100-80GB"]  # it asked for gpu:h100
    assert three.model.hidden_size == 2048 and three.preemptible
    assert (four.min_gpus, four.max_gpus, four.tenant, four.weight) == (1, 1, "team-a", 2.0)
    assert not four.preemptible  # sbatch --no-requeue
    assert not three.HasField("current_allocation")
    assert three.age.seconds == NOW - 1796230393
    assert snap.request.options.time_budget.seconds == 2


def test_placed_jobs_run_where_slurm_put_them_in_the_recorded_shape() -> None:
    snap = snapshot("placed")
    assert validate_request(snap.request, Limits()) == []
    jobs = {j.name: j for j in snap.request.jobs}
    assert sorted(jobs, key=int) == ["8", "9", "10", "11", "12", "13", "14"]
    ten = jobs["10"].current_allocation
    assert (ten.gpu_type, ten.data_parallel, ten.tensor_parallel, ten.pipeline_parallel) == (
        "H100-80GB",
        1,
        2,
        2,
    )
    assert [(s.node, list(s.gpu_indices)) for s in ten.placement] == [("node1", [4, 5, 6, 7])]
    assert ten.sm_clock_mhz == 1785
    assert not jobs["8"].HasField("current_allocation")
    # node1 is full of DSFRO's own jobs, which it may move: nothing is unavailable there.
    assert unavailable(snap)["node1"] == [] and unavailable(snap)["node4"] == list(range(8))
    [(seven, record)] = snap.reserved
    assert seven.job_id == 7 and record.target is not None and record.target.nodes == ("node1",)
    [(fifteen, error)] = snap.malformed
    assert fifteen.job_id == 15 and "max_gpus" in error


def test_a_released_job_holds_its_planned_gpus() -> None:
    data = json.loads(captured("placed", "squeue"))
    for job in data["jobs"]:  # job 10 ended: node1 has 4 free GPUs, 2 of them promised to 7
        if job["job_id"] == 10:
            job["job_state"] = "COMPLETED"
    sinfo = json.loads(captured("placed", "sinfo"))
    sinfo["nodes"][0]["gres_used"] = "gpu:h100:4(IDX:0-3)"
    nodes = parse_sinfo(json.dumps(sinfo))
    snap = build_snapshot(nodes, parse_squeue(json.dumps(data)), Site(), now=NOW, budget_seconds=2)
    assert unavailable(snap)["node1"] == [4, 5]


def test_a_drained_node_keeps_its_running_jobs_unless_evacuating() -> None:
    sinfo = json.loads(captured("placed", "sinfo"))
    sinfo["nodes"][2]["state_flags"] = ["DRAIN"]  # node3, where job 14 runs
    text = json.dumps(sinfo)
    kept = snapshot("placed", text)
    assert kept.tracked["14"].running is not None and unavailable(kept)["node3"] == []
    moved = snapshot("placed", text, evacuate_drained=True)
    assert moved.tracked["14"].evacuating and moved.tracked["14"].running is None
    assert unavailable(moved)["node3"] == list(range(8))
    assert not {j.name: j for j in moved.request.jobs}["14"].HasField("current_allocation")


def test_down_nodes_and_other_partitions_are_left_out() -> None:
    sinfo = json.loads(captured("mixed", "sinfo"))
    sinfo["nodes"][2]["state"] = "down"
    snap = snapshot("mixed", json.dumps(sinfo))
    assert "node3" not in unavailable(snap) and snap.ignored_nodes == {"node3": "down"}
    other = snapshot("mixed", partition="other")
    assert other.request.jobs == [] and other.request.cluster.nodes == []


def test_the_site_gives_nodes_their_base_power_and_the_request_stays_valid() -> None:
    nodes = parse_sinfo(captured("mixed", "sinfo"))
    jobs = parse_squeue(captured("mixed", "squeue"))
    site = Site(base_watts={"node1": 1100.0})
    snap = build_snapshot(nodes, jobs, site, now=NOW, budget_seconds=2)
    base = {
        n.name: n.base_watts if n.HasField("base_watts") else None
        for n in snap.request.cluster.nodes
    }
    assert base["node1"] == 1100.0
    assert all(v is None for k, v in base.items() if k != "node1")
    assert validate_request(snap.request, Limits()) == []


def test_a_node_slurm_powered_down_is_sent_suspended_and_used_after_the_up_ones() -> None:
    """Slurm's power saving: an idle POWERED_DOWN node is in the snapshot as suspended (it was
    left out, so DSFRO never placed a job there and Slurm never resumed it); a powering-down
    one stays out. The waiting job fits an up node's free GPUs: it goes there, nothing wakes
    (waking for jobs that fit no up node: tests/test_power_states.py)."""
    from solver.app.pipeline import solve_request
    from solver.core.solver import Solver
    from solver.wire import NodePowerState

    sinfo = json.loads(captured("mixed", "sinfo"))
    sinfo["nodes"][2]["state_flags"] = ["POWERED_DOWN"]  # node3, idle
    snap = snapshot("mixed", json.dumps(sinfo))
    node3 = next(n for n in snap.request.cluster.nodes if n.name == "node3")
    assert node3.power_state == NodePowerState.NODE_POWER_STATE_SUSPENDED
    assert "node3" not in snap.ignored_nodes
    assert validate_request(snap.request, Limits()) == []
    solver = Solver()
    try:
        plan = solve_request(snap.request, solver).result.plan
    finally:
        solver.close()
    [placed] = [a for a in plan.assignments if a.placement]
    assert {s.node for s in placed.placement} == {"node2"} and plan.power_actions == ()
    sinfo["nodes"][2]["state_flags"] = ["POWERING_DOWN"]
    snap = snapshot("mixed", json.dumps(sinfo))
    assert "node3" in snap.ignored_nodes


def test_a_job_asking_for_a_gpu_type_without_nodes_is_not_sent() -> None:
    data = json.loads(captured("mixed", "squeue"))
    data["jobs"][2]["tres_per_node"] = "gres:gpu:a100:2"
    jobs = parse_squeue(json.dumps(data))
    snap = build_snapshot(
        parse_sinfo(captured("mixed", "sinfo")), jobs, Site(), now=NOW, budget_seconds=2
    )
    [(job, why)] = snap.unplaceable
    assert job.job_id == 3 and why == "no node in the snapshot has A100-80GB"
    assert [j.name for j in snap.request.jobs] == ["4"]


def test_a_site_grid_puts_the_hour_now_and_the_next_hours_in_the_snapshot(tmp_path: object) -> None:
    """At 17:40 UTC: the 17:00 row from now, then 18:00 (20 min later), 19:00 and 20:00 with
    three hours asked for; the request stays valid. Outside the schedule: carbon-blind."""
    from datetime import datetime
    from pathlib import Path

    from solver.slurm.site import site_from_dict

    path = Path(str(tmp_path)) / "grid.csv"
    rows = "".join(f"2026-12-02T{h:02d}:00:00,{100 + h},{0.01 * h}\n" for h in range(24))
    path.write_text("time,carbon_g_per_kwh,price_per_kwh\n" + rows)
    now = NOW + 2400
    assert datetime.fromtimestamp(now, tz=UTC).strftime("%d %H:%M") == "02 17:40"
    site = site_from_dict({"grid": {"schedule": str(path), "hours": 3, "min_saving": 0.2}})
    nodes = parse_sinfo(captured("mixed", "sinfo"))
    jobs = parse_squeue(captured("mixed", "squeue"))
    snap = build_snapshot(nodes, jobs, site, now=now, budget_seconds=2)
    grid = snap.request.cluster.grid
    assert [p.start.ToSeconds() for p in grid.points] == [0, 1200, 4800, 8400]
    assert [p.carbon_g_per_kwh for p in grid.points] == [117.0, 118.0, 119.0, 120.0]
    assert grid.points[0].price_per_kwh == 0.17 and grid.min_saving == pytest.approx(0.2)
    assert validate_request(snap.request, Limits()) == []
    for outside in (NOW - 86400, NOW + 86400):  # before its first row, after its last hour
        snap = build_snapshot(nodes, jobs, site, now=outside, budget_seconds=2)
        assert not snap.request.cluster.HasField("grid")


def _with_jobs(edit: object) -> Snapshot:
    """The ``mixed`` state with its squeue edited by `edit` (a function of the job list)."""
    data = json.loads(captured("mixed", "squeue"))
    assert callable(edit)
    edit(data["jobs"])
    nodes = parse_sinfo(captured("mixed", "sinfo"))
    return build_snapshot(nodes, parse_squeue(json.dumps(data)), Site(), now=NOW, budget_seconds=2)


def _job(jobs: list[dict[str, object]], job_id: int) -> dict[str, object]:
    return next(j for j in jobs if j["job_id"] == job_id)


def test_a_demand_on_a_job_slurm_schedules_is_ignored_not_reported() -> None:
    """Job 5 waits in Slurm's own queue (not held) with a broken demand: it is Slurm's, and no
    error goes into its AdminComment (before, one did)."""

    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, 5)["comment"] = 'dsfro:{"model":"nope"}'

    snap = _with_jobs(edit)
    assert snap.malformed == [] and "5" not in snap.tracked


def test_a_job_asking_for_gpus_per_job_or_task_is_reported_not_placed() -> None:
    """``--gpus=4`` (TresPerJob) can't be turned into GPUs per node by ``scontrol update``
    (Slurm: "Invalid GRES specification"): the job is told how to ask, not retried forever."""

    def edit(jobs: list[dict[str, object]]) -> None:
        three = _job(jobs, 3)
        three["tres_per_node"], three["tres_per_job"] = "", "gres:gpu:4"

    snap = _with_jobs(edit)
    [(job, error)] = snap.malformed
    assert job.job_id == 3 and "3" not in snap.tracked
    assert error.startswith("the job asks for GPUs as gres:gpu:4 (--gpus or --gpus-per-task)")


def test_slurms_own_deadline_counts_only_with_the_work_left() -> None:
    """Slurm's --deadline without remaining_samples in the demand: DSFRO can't judge it (it
    refused such a job: "remaining_samples: must be > 0 when time_to_deadline is set"), so it
    is not sent; with them it is."""

    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, 3)["deadline"] = int(NOW) + 3 * 3600
        four = _job(jobs, 4)
        four["deadline"] = int(NOW) + 3 * 3600
        four["comment"] = 'dsfro:{"model":"llama2-7b","remaining_samples":1000}'

    snap = _with_jobs(edit)
    assert validate_request(snap.request, Limits()) == []
    jobs = {j.name: j for j in snap.request.jobs}
    assert not jobs["3"].HasField("time_to_deadline")
    assert jobs["4"].time_to_deadline.seconds == 3 * 3600


def test_a_requeued_jobs_age_and_deadline_count_from_its_first_submission() -> None:
    """Slurm rewrites SubmitTime at each requeue; the record keeps the first one (before, each
    requeue made the job young again and pushed its deadline back)."""
    first = 1796220000.0

    def edit(jobs: list[dict[str, object]]) -> None:
        three = _job(jobs, 3)
        three["comment"] = 'dsfro:{"model":"gpt3-1.3b","remaining_samples":10,"deadline":"5h"}'
        record = Record("requeued", NOW - 60, original=Original(submit_time=first))
        three["admin_comment"] = record.encode()

    snap = _with_jobs(edit)
    three = next(j for j in snap.request.jobs if j.name == "3")
    assert three.age.seconds == NOW - first
    assert three.time_to_deadline.seconds == first + 5 * 3600 - NOW


def test_a_requeued_jobs_defaults_are_those_of_its_own_request() -> None:
    """Job 3 asked for 4 GPUs of any type (``--gres=gpu:4``); the adapter last placed it on 2
    h100s and requeued it. Its default GPU limit and types come from what it asked for, kept in
    the record, not from the Gres the adapter wrote (before: max_gpus 2, h100 only)."""

    def edit(jobs: list[dict[str, object]]) -> None:
        three = _job(jobs, 3)
        three["comment"] = 'dsfro:{"model":"gpt3-1.3b"}'
        three["tres_per_node"] = "gres:gpu:h100:2"
        original = Original(tres_per_node="gres:gpu:4", node_count=1)
        three["admin_comment"] = Record("requeued", NOW - 60, original=original).encode()

    three = next(j for j in _with_jobs(edit).request.jobs if j.name == "3")
    assert (three.min_gpus, three.max_gpus) == (1, 4)
    assert list(three.allowed_gpu_types) == []


def test_evacuation_moves_only_jobs_that_may_move() -> None:
    """Job 14 runs on node3, drained: with --evacuate-drained it is moved, unless its demand
    says "preemptible": false or Slurm may not requeue it (before, it was requeued anyway)."""
    for edit in ('"preemptible": false', "no-requeue"):
        squeue = json.loads(captured("placed", "squeue"))
        fourteen = next(j for j in squeue["jobs"] if j["job_id"] == 14)
        if edit == "no-requeue":
            fourteen["requeue"] = False
        else:
            fourteen["comment"] = fourteen["comment"].rstrip("}") + ', "preemptible": false}'
        sinfo = json.loads(captured("placed", "sinfo"))
        sinfo["nodes"][2]["state_flags"] = ["DRAIN"]
        nodes, jobs = parse_sinfo(json.dumps(sinfo)), parse_squeue(json.dumps(squeue))
        snap = build_snapshot(
            nodes, jobs, Site(), now=NOW, budget_seconds=2, evacuate_drained=True
        )
        t = snap.tracked["14"]
        assert not t.evacuating and t.running is not None, edit


def test_a_typed_gres_request_keeps_its_type() -> None:
    """Slurm 22.05 can't change a job's GRES type by update (the job never starts): a job
    asking for gpu:h100 runs on H100s only, and one whose demand allows only other types is
    reported instead of placed where it can't start."""
    site = Site()
    (job,) = [j for j in parse_squeue(captured("mixed", "squeue")) if j.job_id == 3]
    assert job.tres_per_node == "gres:gpu:h100:2"
    any_type = Demand("model", {}, allowed_gpu_types=())
    assert allowed_types(any_type, job, site) == ("H100-80GB",)
    other = Demand("model", {}, allowed_gpu_types=("A100-80GB",))
    assert allowed_types(other, job, site) == ()
    assert typed_only(other, job, site).startswith("its --gres names h100")
    untyped = replace(job, tres_per_node="gres:gpu:4")
    assert allowed_types(other, untyped, site) == ("A100-80GB",)
    assert typed_only(other, untyped, site) == ""
