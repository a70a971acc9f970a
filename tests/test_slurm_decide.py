"""A plan -> one decision per job, with its reason (pure: the captured ``placed`` state, plans
written by hand)."""

from __future__ import annotations

import json
from dataclasses import replace

from solver.slurm.decide import Action, Decision, Rules, decide, fallback
from solver.slurm.record import Original, Record, Target, comment_digest
from solver.slurm.site import Site
from solver.slurm.snapshot import Snapshot, build_snapshot
from solver.slurm.state import SlurmNode, parse_sinfo, parse_squeue
from solver.wire import GpuSlice, JobAssignment, JobState, Plan, QueueReason
from tests.slurm_helpers import captured
from tests.test_slurm_snapshot import NOW, snapshot

RUN, QUEUED = JobState.JOB_STATE_RUNNING, JobState.JOB_STATE_QUEUED
DEFAULT_RULES = Rules()


def running(
    job: str, slices: dict[str, int], dp: int = 1, tp: int = 1, pp: int = 1, mhz: int = 1605
) -> JobAssignment:
    return JobAssignment(
        job=job,
        state=RUN,
        gpu_type="H100-80GB",
        num_gpus=sum(slices.values()),
        data_parallel=dp,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        sm_clock_mhz=mhz,
        placement=[GpuSlice(node=n, gpu_indices=list(range(k))) for n, k in slices.items()],
    )


def queued(job: str) -> JobAssignment:
    return JobAssignment(
        job=job,
        state=QUEUED,
        queue_reason=QueueReason.QUEUE_REASON_INSUFFICIENT_RESOURCES,
        queue_detail="its GPUs went to jobs of more value",
    )


def fresh(*drained: str, busy: bool = False) -> dict[str, SlurmNode]:
    """The nodes read just before applying; their GPUs free unless `busy` (the plans written
    here ignore who holds them; ``within_free_gpus`` has tests of its own)."""
    sinfo = json.loads(captured("placed", "sinfo"))
    for node in sinfo["nodes"]:
        node["state_flags"] = ["DRAIN"] if node["name"] in drained else []
        if not busy:
            node["gres_used"] = "gpu:h100:0(IDX:N/A)"
    return {n.name: n for n in parse_sinfo(json.dumps(sinfo))}


def by_job(decisions: list[Decision]) -> dict[int, Decision]:
    return {d.job_id: d for d in decisions}


def run(
    plan: list[JobAssignment],
    snap: Snapshot | None = None,
    rules: Rules = DEFAULT_RULES,
    drained: tuple[str, ...] = (),
    now: float = NOW,
    busy: bool = False,
) -> dict[int, Decision]:
    snap = snap or snapshot("placed")
    return by_job(decide(snap, Plan(assignments=plan), fresh(*drained, busy=busy), rules, now))


def test_a_waiting_job_is_placed_as_planned() -> None:
    d = run([running("8", {"node4": 4}, dp=2, tp=2)])[8]
    assert (d.action, d.reason) == (Action.PLACE, "planned")
    assert d.target == Target("H100-80GB", "h100", ("node4",), 4, 2, 2, 1, 1605)
    assert d.target.gres() == "gpu:h100:4" and d.target.num_gpus == 4


def test_a_job_planned_onto_a_node_slurm_powered_down_is_placed_there() -> None:
    """Slurm resumes a powered-down node when a job is sent to it; a node powering down or
    failed can't take it."""
    sinfo = json.loads(captured("placed", "sinfo"))
    snap = snapshot("placed")
    for flags, action in ((["POWERED_DOWN"], Action.PLACE), (["POWERING_DOWN"], Action.WAIT)):
        for node in sinfo["nodes"]:
            node["state_flags"] = flags if node["name"] == "node4" else []
        nodes = {n.name: n for n in parse_sinfo(json.dumps(sinfo))}
        plan = Plan(assignments=[running("8", {"node4": 4}, dp=2, tp=2)])
        d = by_job(decide(snap, plan, nodes, DEFAULT_RULES, NOW))[8]
        assert d.action is action, flags


def test_a_plan_slurm_cant_express_or_that_no_longer_fits_waits() -> None:
    got = run(
        [running("8", {"node3": 4, "node4": 2}, dp=6), running("11", {"node4": 2}), queued("12")],
        drained=("node4",),
    )
    assert (got[8].action, got[8].reason) == (Action.WAIT, "uneven_placement")
    assert "node3:4 + node4:2" in got[8].detail
    assert (got[11].action, got[11].reason) == (Action.WAIT, "node_unavailable")
    assert got[11].detail.startswith("node4 no longer usable")
    assert (got[12].action, got[12].reason) == (Action.WAIT, "queued")
    assert got[12].detail.startswith("insufficient_resources: its GPUs went")


def test_running_jobs_kept_reclocked_moved_or_stopped() -> None:
    got = run(
        [
            running("9", {"node1": 4}, pp=4, mhz=1785),  # as it runs
            running("10", {"node1": 4}, tp=2, pp=2, mhz=1605),  # same shape, lower clock
            running("13", {"node4": 8}, tp=4, pp=2, mhz=1785),  # moved
            queued("14"),  # stopped
        ]
    )
    assert (got[9].action, got[9].reason) == (Action.KEEP, "planned")
    assert (got[10].action, got[10].reason, got[10].detail) == (
        Action.RECLOCK,
        "clock_changed",
        "1785 -> 1605 MHz",
    )
    assert got[10].target is not None and got[10].target.nodes == ("node1",)
    assert (got[13].action, got[13].reason) == (Action.REQUEUE, "moved")
    assert got[13].target is not None and got[13].target.nodes == ("node4",)
    assert (got[14].action, got[14].reason, got[14].target) == (Action.REQUEUE, "preempted", None)
    assert got[8].action is Action.WAIT and got[8].reason == "not_in_plan"


def test_a_job_slurm_may_not_requeue_is_never_moved() -> None:
    snap = snapshot("placed")
    t = snap.tracked["13"]
    snap.tracked["13"] = replace(t, job=replace(t.job, requeue=False))
    d = run([running("13", {"node4": 8}, tp=4, pp=2)], snap)[13]
    assert (d.action, d.reason) == (Action.KEEP, "not_requeueable")


def test_a_move_waits_for_the_checkpoint_grace() -> None:
    plan = [running("13", {"node4": 8}, tp=4, pp=2, mhz=1785)]
    rules = Rules(checkpoint_grace=30)
    assert run(plan, rules=rules)[13].action is Action.CHECKPOINT
    snap = snapshot("placed")
    t = snap.tracked["13"]
    snap.tracked["13"] = replace(t, record=t.record.with_(checkpoint_at=NOW - 10))
    d = run(plan, snap, rules)[13]
    assert (d.action, d.reason, d.detail) == (Action.KEEP, "checkpoint_grace", "20 s left")
    assert run(plan, snap, rules, now=NOW + 25)[13].action is Action.REQUEUE


def test_a_released_job_whose_node_drained_or_that_waited_too_long_is_held_again() -> None:
    got = run([], drained=("node1",))
    assert (got[7].action, got[7].reason) == (Action.REHOLD, "node_unavailable")
    room = freed_snapshot()  # job 10 ended: node1 has room for 7
    assert 7 not in run([], room)  # released 25 s before NOW: it may still start
    late = run([], room, rules=Rules(replan_after=10))
    assert (late[7].action, late[7].reason) == (Action.REHOLD, "placement_stale")


def freed_snapshot() -> Snapshot:
    """The captured ``placed`` state with job 10 ended: node1 has four free GPUs."""
    data = json.loads(captured("placed", "squeue"))
    for job in data["jobs"]:
        if job["job_id"] == 10:
            job["job_state"] = "COMPLETED"
    sinfo = json.loads(captured("placed", "sinfo"))
    sinfo["nodes"][0]["gres_used"] = "gpu:h100:4(IDX:0-3)"
    nodes = parse_sinfo(json.dumps(sinfo))
    return build_snapshot(nodes, parse_squeue(json.dumps(data)), Site(), now=NOW, budget_seconds=2)


def test_a_released_job_whose_gpus_another_job_holds_is_held_again_at_once() -> None:
    """Job 7 was released onto node1, which jobs 9 and 10 fill: its GPUs are not held for it
    and the next plan could promise them again (found from outside: two 4-GPU jobs planned
    onto the 8-GPU node a job in its checkpoint grace still held). Held again, planned anew."""
    snap = snapshot("placed")
    assert snap.crowded == {7}
    d = run([], snap)[7]
    assert (d.action, d.reason) == (Action.REHOLD, "gpus_taken")


def test_a_job_is_released_only_onto_gpus_free_now() -> None:
    """Node2's eight GPUs are job 13's (sinfo, read just before applying): a job planned there
    waits, unless 13 is requeued in the same round; then the GPUs it frees are counted once."""
    plan = [running("8", {"node2": 4}), running("11", {"node2": 4}), running("12", {"node2": 1})]
    got = run(plan, busy=True)
    for job in (8, 11, 12):
        assert (got[job].action, got[job].reason) == (Action.WAIT, "gpus_busy")
        assert got[job].detail == f"node2: fewer than {4 if job != 12 else 1} GPUs free now"
    moved = run([*plan, running("13", {"node4": 8}, tp=4, pp=2)], busy=True)
    assert moved[13].action is Action.REQUEUE and moved[13].target is not None
    assert [moved[j].action for j in (8, 11, 12)] == [Action.PLACE, Action.PLACE, Action.WAIT]
    # A move onto GPUs not free is requeued held, to be placed next round.
    onto_busy = run([running("13", {"node3": 8}, tp=4, pp=2)], busy=True)[13]
    assert (onto_busy.action, onto_busy.target) == (Action.REQUEUE, None)
    assert onto_busy.detail.endswith("node3: fewer than 8 GPUs free now")


def test_a_job_kept_after_its_checkpoint_signal_has_its_mark_cleared() -> None:
    """Signalled for a move the next plan dropped: the mark is cleared, so a later move signals
    again and waits the whole grace (before, it was requeued at once, with no signal)."""
    snap = snapshot("placed")
    t = snap.tracked["13"]
    snap.tracked["13"] = replace(t, record=replace(t.record, checkpoint_at=NOW - 100))
    d = run([running("13", {"node2": 8}, tp=4, pp=2, mhz=1785)], snap)[13]
    assert (d.action, d.reason) == (Action.UNMARK, "planned")


def test_malformed_demands_are_reported() -> None:
    d = run([])[15]
    assert (d.action, d.reason) == (Action.SKIP, "malformed_demand")
    assert d.detail == 'comment: max_gpus: expected an integer from 1 to 1,000,000, got "eight"'


def test_without_a_plan_held_jobs_wait_then_fall_back_to_slurm() -> None:
    snap = snapshot("placed")
    waiting = by_job(fallback(snap, "UNAVAILABLE: connection refused", release=False))
    assert {waiting[j].action for j in (8, 11, 12)} == {Action.WAIT}
    assert waiting[8].reason == "dsfro_unavailable"
    assert {waiting[j].action for j in (9, 10, 13, 14)} == {Action.KEEP}
    released = by_job(fallback(snap, "UNAVAILABLE", release=True))
    assert {released[j].action for j in (8, 11, 12)} == {Action.FALLBACK}
    assert {released[j].action for j in (9, 10, 13, 14)} == {Action.KEEP}
    assert released[15].action is Action.SKIP and 7 not in released


def test_fallback_leaves_a_job_dsfro_refused_held() -> None:
    """A demand DSFRO refused (its record says invalid) is not given to Slurm by fallback:
    like one the adapter refuses, it waits until its comment is fixed."""
    snap = snapshot("placed")
    t = snap.tracked["8"]
    error = "rejected by DSFRO: jobs[0].tenant: must be printable"
    refused = replace(t.record, state="invalid", error=error, refused=comment_digest(t.job.comment))
    snap.tracked["8"] = replace(t, record=refused)
    d = by_job(fallback(snap, "UNAVAILABLE", release=True))[8]
    assert (d.action, d.reason) == (Action.WAIT, "invalid_demand")
    assert d.detail == f"UNAVAILABLE; its demand was refused: {error}"
    # Its comment fixed since (the refused one was another): given back like any other.
    fixed = replace(t, record=replace(refused, refused=comment_digest("dsfro:{}")))
    snap.tracked["8"] = fixed
    assert by_job(fallback(snap, "UNAVAILABLE", release=True))[8].action is Action.FALLBACK


def test_an_untyped_gpu_request_is_placed_with_an_untyped_gres() -> None:
    """Job 8 asked for ``--gres=gpu:1`` (no type): Slurm 22.05 refuses to give it a typed GRES
    by update ("Invalid GRES specification"), so the target's GRES is untyped; the nodes'
    single type decides the GPUs anyway."""
    snap = snapshot("placed")
    t = snap.tracked["8"]
    snap.tracked["8"] = replace(t, job=replace(t.job, tres_per_node="gres:gpu:1"))
    d = run([running("8", {"node4": 4})], snap)[8]
    assert d.action is Action.PLACE and d.target is not None
    assert d.target.gres() == "gpu:4"
    typed = run([running("11", {"node4": 1})])[11]
    assert typed.target is not None and typed.target.gres() == "gpu:h100:1"


def test_nodes_of_two_gres_types_of_one_gpu_type_are_not_one_placement() -> None:
    """Two GRES types mapped to one GPU type (a site file's choice): a job's GRES has one type,
    so a placement over both waits, and one on a node takes that node's own GRES type (before,
    every job took the type of the last node read and never started)."""
    snap = snapshot("placed")
    snap.nodes["node4"] = replace(snap.nodes["node4"], gpu_type="h100nvl")
    got = run([running("8", {"node3": 2, "node4": 2}), running("11", {"node4": 1})], snap)
    assert (got[8].action, got[8].reason) == (Action.WAIT, "uneven_placement")
    assert got[8].detail == "nodes of GRES types h100, h100nvl; a job has one"
    assert got[11].target is not None and got[11].target.gres() == "gpu:h100nvl:1"


def test_a_job_placed_again_and_again_that_slurm_never_starts_goes_back_to_slurm() -> None:
    """Its memory or CPUs fit none of the nodes DSFRO gave it (DSFRO plans GPUs only): it was
    held again after every ``replan_after`` and placed anew, possibly onto the same node,
    for ever."""
    snap = snapshot("placed")
    t = snap.tracked["8"]
    original = Original((), 1, "gres:gpu:h100:1", "")
    plan = [running("8", {"node4": 4}, dp=2, tp=2)]
    for stale, action in ((1, Action.PLACE), (2, Action.FALLBACK)):
        record = Record("placed", NOW - 400, original=original, stale=stale)
        snap.tracked["8"] = t.__class__(t.job, t.demand, record)
        d = run(plan, snap)[8]
        assert d.action is action
    assert d.reason == "never_started" and "placed 2 times and never started" in d.detail
    d = run(plan, snap, rules=Rules(max_stale_placements=3))[8]
    assert d.action is Action.PLACE
