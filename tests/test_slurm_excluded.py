"""Node exclusions through the Slurm adapter: a job's ``--exclude`` (squeue's
``excluded_nodes``) and the nodes of its stale placements (the record's ``avoid``) become its
``excluded_nodes``; a job excluded from every node of its types is reported, not sent."""

from __future__ import annotations

import pytest

from solver.app.limits import Limits
from solver.app.validation import validate_request
from solver.slurm.decide import Action, Rules
from solver.slurm.record import Record, decode
from solver.slurm.snapshot import Snapshot
from solver.slurm.state import SlurmOutputError
from solver.wire import JobAssignment, JobState, QueueReason
from tests.test_slurm_apply import apply
from tests.test_slurm_decide import freed_snapshot, run, running
from tests.test_slurm_snapshot import NOW, _job, _with_jobs


def _excluding(job_id: int, hosts: str) -> Snapshot:
    def edit(jobs: list[dict[str, object]]) -> None:
        _job(jobs, job_id)["excluded_nodes"] = hosts

    return _with_jobs(edit)


def test_a_jobs_exclude_list_reaches_the_request_as_snapshot_nodes() -> None:
    snap = _excluding(3, "node[2-3],gpu9")
    assert validate_request(snap.request, Limits()) == []
    jobs = {j.name: j for j in snap.request.jobs}
    assert list(jobs["3"].excluded_nodes) == ["node2", "node3"]  # gpu9: not in the snapshot
    assert list(jobs["4"].excluded_nodes) == []
    assert snap.tracked["3"].job.excluded_nodes == ("node2", "node3", "gpu9")


def test_a_job_excluded_from_every_node_of_its_types_is_reported_not_sent() -> None:
    snap = _excluding(3, "node[1-4]")
    [(job, why)] = snap.unplaceable
    assert job.job_id == 3 and "--exclude names every node" in why
    assert [j.name for j in snap.request.jobs] == ["4"]


def test_a_malformed_exclude_list_names_the_field() -> None:
    with pytest.raises(SlurmOutputError, match=r"jobs\[\d+\]\.excluded_nodes"):
        _excluding(3, "node[3-")


def test_a_stale_placements_nodes_go_into_the_record_and_the_next_placement_keeps_them() -> None:
    late = run([], freed_snapshot(), rules=Rules(replan_after=10))[7]
    assert (late.action, late.reason) == (Action.REHOLD, "placement_stale")
    assert late.record is not None and late.record.target is not None
    _outcomes, runner = apply([late])
    marked = decode(runner.fields(7)["AdminComment"])
    assert marked.avoid == late.record.target.nodes == ("node1",)
    assert marked.stale == late.record.stale + 1
    assert decode(marked.encode()) == marked  # it lives in Slurm: it survives the adapter
    again = run([running("8", {"node4": 1})])[8]
    assert again.action is Action.PLACE
    moved = again.__class__(again.job, again.action, again.reason, again.detail, again.target,
                            Record("placed", NOW - 400, stale=1, avoid=("node1",)))  # fmt: skip
    _outcomes, runner = apply([moved])
    assert decode(runner.fields(again.job_id)["AdminComment"]).avoid == ("node1",)


def test_the_next_snapshot_excludes_the_avoided_nodes_beside_the_jobs_own() -> None:
    record = Record("placed", NOW - 400, stale=1, avoid=("node1", "gone7"))

    def edit(jobs: list[dict[str, object]]) -> None:
        three = _job(jobs, 3)
        three["admin_comment"], three["excluded_nodes"] = record.encode(), "node3"

    snap = _with_jobs(edit)
    assert snap.tracked["3"].record.avoid == ("node1", "gone7")
    jobs = {j.name: j for j in snap.request.jobs}
    assert list(jobs["3"].excluded_nodes) == ["node1", "node3"]
    assert validate_request(snap.request, Limits()) == []


def test_a_job_whose_stale_placements_leave_it_no_node_goes_back_to_slurm() -> None:
    """With more stale placements allowed than nodes hold it, the nodes it was placed on
    excluded leave it none: queued for want of a configuration, it would be held for ever."""
    snap = freed_snapshot()
    t = snap.tracked["8"]
    record = Record("placed", NOW - 400, stale=1, avoid=("node4",))
    snap.tracked["8"] = t.__class__(t.job, t.demand, record)
    nowhere = JobAssignment(
        job="8",
        state=JobState.JOB_STATE_QUEUED,
        queue_reason=QueueReason.QUEUE_REASON_NO_FEASIBLE_CONFIGURATION,
        queue_detail="the nodes it may use (excluded_nodes, node_selector, taints) cannot hold "
        "any of its configurations",
    )
    d = run([nowhere], snap, rules=Rules(max_stale_placements=3))[8]
    assert (d.action, d.reason) == (Action.FALLBACK, "never_started")
    assert "the nodes it was not placed on cannot hold it" in d.detail
    elsewhere = JobAssignment(
        job="8",
        state=JobState.JOB_STATE_QUEUED,
        queue_reason=QueueReason.QUEUE_REASON_INSUFFICIENT_RESOURCES,
        queue_detail="its GPUs or power went to jobs of more value",
    )
    assert run([elsewhere], snap, rules=Rules(max_stale_placements=3))[8].action is Action.WAIT
