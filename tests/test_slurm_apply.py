"""Decisions -> the exact Slurm commands, with a fake runner: fields, order, one release for
all, failures that leave a job held, plan files, records."""

from __future__ import annotations

import json
from pathlib import Path

from solver.slurm.apply import Applier, Outcome
from solver.slurm.decide import Action, Decision, Rules
from solver.slurm.record import Original, Record, decode
from tests.slurm_helpers import FakeRunner, fake_slurm
from tests.test_slurm_decide import queued, run, running
from tests.test_slurm_snapshot import NOW


def apply(
    decisions: list[Decision],
    tmp_path: Path | None = None,
    fail: dict[tuple[str, ...], str] | None = None,
) -> tuple[dict[int, Outcome], FakeRunner]:
    slurm, runner = fake_slurm()
    runner.fail = fail or {}
    out = Applier(slurm, plan_dir=tmp_path, workers=2, clock=lambda: NOW).apply(decisions)
    return {o.decision.job_id: o for o in out}, runner


def test_placing_sets_nodes_gres_clock_and_record_then_releases_all_at_once(
    tmp_path: Path,
) -> None:
    got = run(
        [
            running("8", {"node4": 4}, dp=2, tp=2),
            running("11", {"node4": 1}),
            running("12", {"node2": 2, "node3": 2}, dp=4),
        ]
    )
    outcomes, runner = apply([got[8], got[11], got[12]], tmp_path)
    assert all(o.applied for o in outcomes.values())
    fields = runner.fields(12)
    assert (fields["NumNodes"], fields["NodeList"], fields["Gres"], fields["TresFreq"]) == (
        "2",
        "node2,node3",
        "gpu:h100:2",
        "gpu:1605",
    )
    record = decode(fields["AdminComment"])
    assert record.state == "placed" and record.at == NOW and record.target == got[12].target
    # What it asked Slurm for, and when it was submitted (Slurm rewrites that at a requeue).
    assert record.original == Original((), 1, "gres:gpu:h100:1", "", 1796230765.0)
    [release] = runner.writes("release")
    assert release[:2] == ("scontrol", "release")
    assert sorted(release[2].split(","), key=int) == ["8", "11", "12"]
    assert runner.calls[-1] == release  # after every update
    plan = json.loads((tmp_path / "12.json").read_text())
    assert (plan["nodes"], plan["data_parallel"], plan["sm_clock_mhz"]) == (
        ["node2", "node3"],
        4,
        1605,
    )
    env = (tmp_path / "8.env").read_text().splitlines()
    assert "DSFRO_TENSOR_PARALLEL=2" in env and "DSFRO_NODES=node4" in env
    assert "DSFRO_POWER_LIMIT_WATTS=0.0" in env  # the plan set no limit


def test_the_plan_files_carry_the_power_limit_for_a_prolog(tmp_path: Path) -> None:
    assignment = running("8", {"node4": 4}, dp=2, tp=2)
    assignment.power_limit_watts = 612.5
    got = run([assignment])
    assert got[8].target is not None and got[8].target.power_limit_watts == 612.5
    outcomes, runner = apply([got[8]], tmp_path)
    assert outcomes[8].applied
    assert json.loads((tmp_path / "8.json").read_text())["power_limit_watts"] == 612.5
    assert "DSFRO_POWER_LIMIT_WATTS=612.5" in (tmp_path / "8.env").read_text().splitlines()
    record = decode(runner.fields(8)["AdminComment"])  # kept in the record, read back
    assert record.target == got[8].target


def test_a_failed_update_leaves_the_job_held_and_the_others_go() -> None:
    got = run([running("8", {"node4": 4}), running("11", {"node4": 1})])
    error = "Requested node configuration is not available"
    outcomes, runner = apply([got[8], got[11]], fail={("scontrol", "update", "JobId=8"): error})
    assert not outcomes[8].applied and error in outcomes[8].error
    assert outcomes[11].applied
    assert runner.writes("release") == [("scontrol", "release", "11")]


def test_a_failed_release_is_retried_one_by_one_to_name_the_job() -> None:
    got = run([running("8", {"node4": 4}), running("11", {"node4": 1})])
    outcomes, _runner = apply(
        [got[8], got[11]],
        fail={
            ("scontrol", "release", "8,11"): "Invalid job id",
            ("scontrol", "release", "11"): "gone",
        },
    )
    assert outcomes[8].applied and not outcomes[11].applied and "gone" in outcomes[11].error


def test_a_move_requeues_held_then_places_and_releases() -> None:
    got = run([running("13", {"node4": 8}, tp=4, pp=2, mhz=1785), queued("14")])
    outcomes, runner = apply([got[13], got[14]])
    assert all(o.applied for o in outcomes.values())
    thirteen = [c for c in runner.calls if "13" in c or "JobId=13" in c]
    assert thirteen[0] == ("scontrol", "requeuehold", "13")
    assert thirteen[1][:3] == ("scontrol", "update", "JobId=13")
    assert "NodeList=node4" in thirteen[1]
    assert runner.writes("release") == [("scontrol", "release", "13")]
    fourteen = [c for c in runner.calls if "14" in c or "JobId=14" in c]
    assert fourteen[0] == ("scontrol", "requeuehold", "14")  # stopped: held, not released
    assert decode(runner.fields(14)["AdminComment"]).state == "requeued"


def test_a_refused_requeue_changes_nothing_else() -> None:
    got = run([running("13", {"node4": 8}, tp=4, pp=2)])
    outcomes, runner = apply([got[13]], fail={("scontrol", "requeuehold"): "not requeueable"})
    assert not outcomes[13].applied and runner.writes("update") == []
    assert runner.writes("release") == []


def test_checkpoint_signal_and_reclock() -> None:
    from solver.slurm.decide import Rules

    got = run(
        [running("13", {"node4": 8}, tp=4, pp=2), running("10", {"node1": 4}, tp=2, pp=2)],
        rules=Rules(checkpoint_grace=30),
    )
    assert got[13].action is Action.CHECKPOINT and got[10].action is Action.RECLOCK
    _outcomes, runner = apply([got[13], got[10]])
    assert ("scancel", "--signal=USR1", "--full", "13") in runner.calls
    assert decode(runner.fields(13)["AdminComment"]).checkpoint_at == NOW
    assert runner.fields(10)["TresFreq"] == "gpu:1605"
    record = decode(runner.fields(10)["AdminComment"])
    assert record.target is not None and record.target.sm_clock_mhz == 1605
    assert runner.writes("requeuehold") == [] and runner.writes("release") == []


def test_fallback_gives_the_job_back_its_own_request(tmp_path: Path) -> None:
    from solver.slurm.decide import fallback
    from tests.test_slurm_snapshot import snapshot

    snap = snapshot("placed")
    t = snap.tracked["8"]  # as if the adapter had placed it once and then requeued it
    original = Original(("node2",), 1, "gres:gpu:h100:1", "gpu:1200")
    snap.tracked["8"] = t.__class__(t.job, t.demand, Record("requeued", 1.0, original=original))
    (tmp_path / "8.json").write_text("{}")
    decisions = [d for d in fallback(snap, "UNAVAILABLE", release=True) if d.job_id in (8, 11)]
    _outcomes, runner = apply(decisions, tmp_path)
    eight = runner.fields(8)
    assert (eight["NodeList"], eight["NumNodes"], eight["TresFreq"], eight["Gres"]) == (
        "node2",
        "1",
        "gpu:1200",
        "gpu:h100:1",
    )
    assert decode(eight["AdminComment"]).state == "fallback"
    assert list(runner.fields(11)) == ["AdminComment"]  # never changed: nothing to restore
    assert not (tmp_path / "8.json").exists()
    assert sorted(runner.writes("release")[0][2].split(",")) == ["11", "8"]


def test_a_malformed_demand_is_written_once() -> None:
    d = run([])[15]  # the capture has the record of this error already: no write
    outcomes, runner = apply([d])
    assert runner.calls == [] and outcomes[15].applied
    d = Decision(d.job, d.action, d.reason, d.detail)  # as when first seen
    outcomes, runner = apply([d])
    record = decode(runner.fields(15)["AdminComment"])
    assert record.state == "invalid" and "max_gpus" in record.error
    again = Decision(d.job, d.action, d.reason, d.detail, record=record)
    outcomes, runner = apply([again])
    assert runner.calls == [] and outcomes[15].applied


def test_a_kept_job_loses_its_checkpoint_mark_and_a_reclock_too() -> None:
    from dataclasses import replace

    snap_decisions = run([running("13", {"node2": 8}, tp=4, pp=2, mhz=1785)])
    thirteen = snap_decisions[13]
    marked = replace(thirteen.record or Record(""), checkpoint_at=NOW - 100)
    unmark = Decision(thirteen.job, Action.UNMARK, "planned", record=marked)
    _outcomes, runner = apply([unmark])
    record = decode(runner.fields(13)["AdminComment"])
    assert record.checkpoint_at is None and record.target == marked.target
    reclocked = run([running("10", {"node1": 4}, tp=2, pp=2)])[10]
    reclock = replace(reclocked, record=replace(reclocked.record or Record(""), checkpoint_at=1.0))
    _outcomes, runner = apply([reclock])
    assert decode(runner.fields(10)["AdminComment"]).checkpoint_at is None


def test_fallback_gives_a_job_that_asked_for_no_gres_none() -> None:
    """Its record says it asked for no GRES: Gres=gpu:0 (Slurm 22.05 keeps what the adapter
    set otherwise; an empty Gres= leaves "gres:" behind)."""
    from solver.slurm.decide import fallback
    from tests.test_slurm_snapshot import snapshot

    snap = snapshot("placed")
    t = snap.tracked["8"]
    original = Original((), 1, "", "")
    snap.tracked["8"] = t.__class__(t.job, t.demand, Record("requeued", 1.0, original=original))
    decisions = [d for d in fallback(snap, "UNAVAILABLE", release=True) if d.job_id == 8]
    _outcomes, runner = apply(decisions)
    assert runner.fields(8)["Gres"] == "gpu:0"


def test_the_record_keeps_the_first_submit_time() -> None:
    got = run([running("8", {"node4": 4}, dp=2, tp=2)])
    _outcomes, runner = apply([got[8]])
    original = decode(runner.fields(8)["AdminComment"]).original
    assert original is not None and original.submit_time == got[8].job.submit_time > 0


def test_a_stale_placement_is_counted_in_the_record_and_kept_by_the_next() -> None:
    """The count survives the adapter (it is in Slurm): at the limit the job goes back."""
    from tests.test_slurm_decide import freed_snapshot

    late = run([], freed_snapshot(), rules=Rules(replan_after=10))[7]
    assert (late.action, late.reason) == (Action.REHOLD, "placement_stale")
    before = late.record or Record("")
    _outcomes, runner = apply([late])
    assert runner.writes("hold")
    assert decode(runner.fields(7)["AdminComment"]).stale == before.stale + 1
    placed = run([running("8", {"node4": 1})])[8]
    stale = Decision(placed.job, placed.action, placed.reason, placed.detail, placed.target,
                     Record("placed", NOW - 400, stale=1))  # fmt: skip
    _outcomes, runner = apply([stale])
    assert decode(runner.fields(8)["AdminComment"]).stale == 1
