"""Reservations still to come: read from ``scontrol -o show reservation``, their nodes barred
to a job whose time limit reaches into them; and an ``--exclusive`` job released only onto a
node no other job of the round is released onto."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from solver.slurm.decide import Action
from solver.slurm.reservations import Reservation, barred_nodes, parse_reservations
from solver.slurm.site import Site
from solver.slurm.snapshot import build_snapshot
from solver.slurm.state import SlurmOutputError, parse_sinfo, parse_squeue
from tests.slurm_helpers import FakeClient, captured
from tests.test_slurm_decide import run, running
from tests.test_slurm_loop import adapter, place_all
from tests.test_slurm_snapshot import NOW, _job, snapshot

HOUR = 3600
LISTED = (
    "ReservationName=maint StartTime={start} EndTime={end} Duration=01:00:00 Nodes=node[2-3] "
    "NodeCnt=2 CoreCnt=64 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES "
    "TRES=cpu=64 Users=root Groups=(null) Accounts=(null) Licenses=(null) State={state} "
    "BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)\n"
)


def listed(start: float, state: str = "INACTIVE", hours: float = 1) -> str:
    return LISTED.format(start=int(start), end=int(start + hours * HOUR), state=state)


def test_scontrols_one_line_form_is_read() -> None:
    text = listed(NOW + HOUR) + listed(NOW - 60, "ACTIVE").replace("maint", "now").replace(
        "Nodes=node[2-3]", "Nodes=(null)"
    )
    assert parse_reservations(text) == [
        Reservation("maint", int(NOW + HOUR), int(NOW + 2 * HOUR), ("node2", "node3"), False),
        Reservation("now", int(NOW - 60), int(NOW - 60 + HOUR), (), True),
    ]
    assert parse_reservations("No reservations in the system\n") == []
    assert parse_reservations("") == []


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (listed(NOW).replace(f"StartTime={int(NOW)}", "StartTime=2026-12-07T18:06"), "StartTime"),
        (listed(NOW).replace("ReservationName=maint ", ""), "ReservationName"),
        (listed(NOW).replace("Nodes=node[2-3]", "Nodes=node[3-"), "Nodes"),
        ("garbage\n", "is not Key=value"),
    ],
)
def test_what_cannot_be_read_names_its_field(text: str, field: str) -> None:
    with pytest.raises(SlurmOutputError, match=r"scontrol -o show reservation: line 1") as e:
        parse_reservations(text)
    assert field in str(e.value)


def test_a_reservation_bars_only_jobs_whose_time_limit_reaches_into_it() -> None:
    [job] = [j for j in parse_squeue(captured("mixed", "squeue")) if j.job_id == 3]
    soon = parse_reservations(listed(NOW + HOUR))
    assert barred_nodes(replace(job, time_limit_minutes=90), soon, NOW) == {"node2", "node3"}
    assert barred_nodes(replace(job, time_limit_minutes=59), soon, NOW) == set()
    assert barred_nodes(replace(job, time_limit_minutes=None), soon, NOW) == {"node2", "node3"}
    # Its own reservation and one that has ended bar nothing.
    own = replace(job, time_limit_minutes=None, reservation="maint")
    assert barred_nodes(own, soon, NOW) == set()
    ended = parse_reservations(listed(NOW - 2 * HOUR))
    assert barred_nodes(replace(job, time_limit_minutes=None), ended, NOW) == set()


def test_squeues_time_limit_is_minutes_or_unlimited() -> None:
    squeue = json.loads(captured("mixed", "squeue"))
    _job(squeue["jobs"], 3)["time_limit"] = 90
    _job(squeue["jobs"], 4)["time_limit"] = 4294967294  # INFINITE
    jobs = {j.job_id: j.time_limit_minutes for j in parse_squeue(json.dumps(squeue))}
    assert (jobs[1], jobs[3], jobs[4], jobs[5]) == (525600, 90, None, None)


def test_waiting_jobs_are_kept_off_nodes_reserved_before_they_would_end() -> None:
    """In ``mixed``, jobs 3 and 4 wait with no time limit: a reservation of node2 and node3
    from an hour on bars both nodes to both; an active one is sinfo's (flagged RESERVED), not
    barred here; with a time limit of 30 minutes, job 3 may use them."""
    nodes, jobs = parse_sinfo(captured("mixed", "sinfo")), parse_squeue(captured("mixed", "squeue"))

    def excluded(reservations: str, limit: int | None = None) -> dict[str, set[str]]:
        limited = [replace(j, time_limit_minutes=limit) if j.job_id == 3 else j for j in jobs]
        snap = build_snapshot(
            nodes,
            limited,
            Site(),
            now=NOW,
            budget_seconds=2,
            reservations=parse_reservations(reservations),
        )
        return {j.name: set(j.excluded_nodes) for j in snap.request.jobs}

    assert excluded(listed(NOW + HOUR)) == {"3": {"node2", "node3"}, "4": {"node2", "node3"}}
    assert excluded(listed(NOW + HOUR), limit=30) == {"3": set(), "4": {"node2", "node3"}}
    assert excluded(listed(NOW - 60, "ACTIVE")) == {"3": set(), "4": set()}
    assert excluded("") == {"3": set(), "4": set()}


def test_an_exclusive_job_is_not_released_beside_another_onto_one_node() -> None:
    """Jobs 8 and 12 (exclusive) planned onto node3, empty: 12 is released though 8 comes
    first, and 8 waits for the next round; with 8 on node1, both go. An exclusive job planned
    onto a node where another job runs, or where one released and not started (7, two GPUs of
    node1) is promised, waits; and an exclusive job so promised keeps the whole node."""
    snap = snapshot("placed")
    snap.crowded = set()  # 7 released just now, its GPUs free
    [(seven, record)] = snap.reserved
    snap.reserved = [(seven, replace(record, at=NOW))]
    t = snap.tracked["12"]
    snap.tracked["12"] = replace(t, job=replace(t.job, exclusive=True))
    got = run([running("8", {"node3": 4}), running("12", {"node3": 1})], snap)
    assert (got[8].action, got[12].action) == (Action.WAIT, Action.PLACE)
    assert (got[8].reason, got[8].detail) == ("gpus_busy", "node3: fewer than 4 GPUs free now")
    got = run([running("8", {"node1": 4}), running("12", {"node3": 1})], snap)
    assert (got[8].action, got[12].action) == (Action.PLACE, Action.PLACE)
    for node in ("node2", "node1"):  # 13 runs on node2; 7 is promised two GPUs of node1
        busy = run([running("12", {node: 1})], snap, busy=node == "node2")[12]
        assert busy.action is Action.WAIT
        assert busy.detail == f"{node}: not every GPU free now (--exclusive)"
    snap.reserved = [(replace(seven, exclusive=True), replace(record, at=NOW))]
    beside = run([running("8", {"node1": 4})], snap)[8]
    assert (beside.action, beside.detail) == (Action.WAIT, "node1: fewer than 4 GPUs free now")


def test_a_round_reads_the_reservations_and_goes_on_without_them_when_it_cannot() -> None:
    """Node4 reserved from an hour on: the waiting jobs (no time limit) are kept off it. When
    scontrol fails, the round still plans, without them, and says so."""
    client = FakeClient(place_all)
    a, runner, _ = adapter(client)
    runner.reservations = listed(NOW + HOUR).replace("node[2-3]", "node4")
    report = a.round()
    assert report.outcome == "planned" and report.warnings == []
    sent = {j.name: list(j.excluded_nodes) for j in client.requests[-1].jobs}
    assert [sent[name] for name in ("8", "11", "12")] == [["node4"]] * 3
    assert sent["9"] == ["node4"]  # a running job too may not move there (it keeps its own)
    down = "slurm_load_reservations error: Unable to contact slurm controller"
    runner.fail[("scontrol", "-o")] = down
    report = a.round()
    assert report.outcome == "planned"
    assert report.warnings == [f"reservations unread: scontrol -o: exit 1: {down}"]
    assert all(not j.excluded_nodes for j in client.requests[-1].jobs)
