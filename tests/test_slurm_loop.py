"""The adapter's rounds with a fake Slurm (captured ``placed`` state) and a fake DSFRO:
fail-safe when DSFRO is out of reach or refuses, fallback after the configured time, a plan
applied partly when a node drains mid-round, dry-run, events, metrics; a round never raises."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import grpc
import pytest

from solver.client import InvalidRequest, Unavailable
from solver.client.errors import FieldViolation
from solver.slurm.apply import Applier
from solver.slurm.commands import Slurm
from solver.slurm.decide import Action
from solver.slurm.loop import Adapter, Settings
from solver.slurm.site import Site, SiteError
from solver.slurm.table import decisions_table
from solver.wire import JobState, Plan, QueueReason, SolveRequest, SolveResponse, Termination
from tests.slurm_helpers import FakeClient, FakeRunner, captured
from tests.test_slurm_decide import running
from tests.test_slurm_snapshot import NOW


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def roomy_sinfo() -> dict[str, object]:
    """The captured ``placed`` nodes with room for new work, as ``roomy_squeue`` leaves it:
    node1 half free (job 10 ended), node4 up and idle (not drained)."""
    sinfo = json.loads(captured("placed", "sinfo"))
    sinfo["nodes"][0]["gres_used"] = "gpu:h100:4(IDX:0-3)"
    sinfo["nodes"][3]["state_flags"] = []
    return sinfo  # type: ignore[no-any-return]


def roomy_squeue() -> str:
    data = json.loads(captured("placed", "squeue"))
    for job in data["jobs"]:
        if job["job_id"] == 10:
            job["job_state"] = "COMPLETED"
    return json.dumps(data)


def place_all(request: SolveRequest) -> SolveResponse:
    """Every waiting job on node4 with one GPU; running jobs as they are."""
    out = SolveResponse()
    for job in request.jobs:
        if job.HasField("current_allocation"):
            a = job.current_allocation
            out.plan.assignments.append(
                running(
                    job.name,
                    {s.node: len(s.gpu_indices) for s in a.placement},
                    a.data_parallel,
                    a.tensor_parallel,
                    a.pipeline_parallel,
                    a.sm_clock_mhz,
                )
            )
        else:
            out.plan.assignments.append(running(job.name, {"node4": 1}))
    return out


def adapter(client: FakeClient, **settings: object) -> tuple[Adapter, FakeRunner, Clock]:
    runner, clock = FakeRunner("placed"), Clock()
    runner.outputs = {"sinfo": json.dumps(roomy_sinfo()), "squeue": roomy_squeue()}
    slurm = Slurm(runner)
    s = Settings(budget=1, fallback_after=60, **settings)  # type: ignore[arg-type]
    applier = Applier(slurm, clock=clock)
    return Adapter(slurm, client, Site(), s, applier, clock=clock), runner, clock


def test_a_plan_is_applied() -> None:
    a, runner, _ = adapter(FakeClient(place_all))
    report = a.round()
    assert report.outcome == "planned" and report.error == ""
    assert sorted(runner.writes("release")[0][2].split(",")) == ["11", "12", "8"]
    assert {d.job_id: d.action for d in report.decisions if d.action is Action.KEEP} == {
        9: Action.KEEP,
        13: Action.KEEP,
        14: Action.KEEP,
    }
    m = a.metrics.registry
    assert m.get_sample_value("dsfro_slurm_rounds_total", {"outcome": "planned"}) == 1
    labels = {"action": "place", "reason": "planned"}
    assert m.get_sample_value("dsfro_slurm_decisions_total", labels) == 3
    assert m.get_sample_value("dsfro_slurm_jobs", {"kind": "waiting"}) == 3
    assert m.get_sample_value("dsfro_slurm_jobs", {"kind": "reserved"}) == 1


def test_dsfro_out_of_reach_releases_nothing_then_falls_back() -> None:
    down = Unavailable(grpc.StatusCode.UNAVAILABLE, "connection refused", "rid", 3)
    a, runner, clock = adapter(FakeClient(error=down))
    first = a.round()
    assert first.outcome == "no_plan" and first.error == "UNAVAILABLE: connection refused"
    assert runner.calls == []  # nothing touched
    assert {d.reason for d in first.decisions if d.action is Action.WAIT} == {"dsfro_unavailable"}
    clock.now += 59
    assert a.round().outcome == "no_plan" and runner.calls == []
    assert a.metrics.registry.get_sample_value("dsfro_slurm_dsfro_unreachable_seconds") == 59
    clock.now += 1
    third = a.round()
    assert third.outcome == "fallback"
    assert sorted(runner.writes("release")[0][2].split(",")) == ["11", "12", "8"]
    assert runner.writes("requeuehold") == []  # running jobs are left alone
    a.client = FakeClient(place_all)  # DSFRO is back: the clock of the outage stops
    assert a.round().outcome == "planned" and a.failing_since is None


def test_without_dsfro_a_released_job_whose_node_drained_is_held_again() -> None:
    down = Unavailable(grpc.StatusCode.UNAVAILABLE, "connection refused", "rid", 1)
    a, runner, _ = adapter(FakeClient(error=down))
    sinfo = roomy_sinfo()
    sinfo["nodes"][0]["state_flags"] = ["DRAIN"]  # type: ignore[index]  # node1, job 7's
    runner.outputs["sinfo"] = json.dumps(sinfo)
    report = a.round()
    assert report.outcome == "no_plan"
    assert runner.calls == [("scontrol", "hold", "7")]  # to fall back with its own request


def test_jobs_dsfro_rejects_are_reported_and_the_rest_solved_at_once() -> None:
    calls: list[list[str]] = []

    def answer(request: SolveRequest) -> SolveResponse:
        calls.append([j.name for j in request.jobs])
        if "11" in calls[-1]:
            i = calls[-1].index("11")
            raise InvalidRequest(
                grpc.StatusCode.INVALID_ARGUMENT,
                "invalid request",
                "rid",
                1,
                [
                    FieldViolation(
                        f"jobs[{i}].model.hidden_size", "must be divisible by attention_heads"
                    )
                ],
            )
        return place_all(request)

    a, runner, _ = adapter(FakeClient(answer))
    report = a.round()
    assert report.outcome == "planned" and len(calls) == 2 and "11" not in calls[1]
    d = {d.job_id: d for d in report.decisions}[11]
    assert (d.action, d.reason) == (Action.SKIP, "rejected_by_dsfro")
    assert d.detail == "model.hidden_size: must be divisible by attention_heads"
    assert "max_gpus" not in runner.fields(11).get("NodeList", "")
    assert "model.hidden_size" in runner.fields(11)["AdminComment"]
    assert sorted(runner.writes("release")[0][2].split(",")) == ["12", "8"]


def test_a_refusal_about_the_cluster_is_no_plan() -> None:
    bad = InvalidRequest(
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid",
        "rid",
        1,
        [FieldViolation("cluster.power_budget_watts", "too low")],
    )
    a, runner, _ = adapter(FakeClient(error=bad))
    report = a.round()
    assert report.outcome == "no_plan" and report.error.startswith("INVALID_ARGUMENT")
    assert runner.calls == []


def test_unreadable_slurm_and_bugs_end_the_round_not_the_loop() -> None:
    a, runner, _ = adapter(FakeClient(place_all))
    runner.fail = {("squeue",): "slurm_load_jobs error: Unable to contact slurm controller"}
    report = a.round()
    assert report.outcome == "slurm_error" and "Unable to contact" in report.error
    assert a.client.requests == []  # type: ignore[attr-defined]
    runner.fail = {}
    a.client = FakeClient(lambda r: 1 / 0)  # type: ignore[arg-type,return-value]
    assert a.round().outcome == "no_plan"
    a.slurm.nodes = lambda: 1 / 0  # type: ignore[assignment,method-assign,return-value]
    report = a.round()
    assert report.outcome == "error" and report.error.startswith("ZeroDivisionError")


def test_a_node_drained_between_snapshot_and_apply_gets_nothing_new() -> None:
    def answer(request: SolveRequest) -> SolveResponse:
        out = SolveResponse()
        out.plan.assignments.extend([running("8", {"node2": 2}), running("11", {"node4": 1})])
        return out

    a, runner, _ = adapter(FakeClient(answer))
    sinfo = roomy_sinfo()
    sinfo["nodes"][1]["state_flags"] = ["DRAIN"]  # type: ignore[index]  # node2
    reads = []

    def before(argv: tuple[str, ...]) -> None:
        if argv[:2] == ("sinfo", "--json"):
            reads.append(argv)
            if len(reads) == 2:  # the fresh read just before applying
                runner.outputs["sinfo"] = json.dumps(sinfo)

    runner.before = before
    report = a.round()
    got = {d.job_id: d for d in report.decisions}
    assert (got[8].action, got[8].reason) == (Action.WAIT, "node_unavailable")
    assert got[11].action is Action.PLACE
    assert runner.writes("release") == [("scontrol", "release", "11")]
    assert runner.fields(8) == {}


def test_dry_run_touches_nothing_and_prints_the_plan() -> None:
    a, runner, _ = adapter(FakeClient(place_all), dry_run=True)
    report = a.round()
    assert runner.calls == [] and report.outcomes == []
    table = decisions_table(report)
    assert table.startswith("round 1: planned")
    assert "| 8 | gpt3-2.7b | place | planned | node4 | 1 | H100-80GB | 1 x 1 x 1 | 1605 |" in table
    assert "| 15 | bad | skip | malformed_demand |" in table


def test_the_loop_runs_a_round_when_the_queue_changes() -> None:
    a, _runner, _ = adapter(
        FakeClient(lambda r: SolveResponse(plan=Plan())), interval=3600, poll=0.01
    )
    states = iter(["a", "a", "a", "b"])

    def fingerprint() -> str:
        return next(states, "b")

    a.slurm.fingerprint = fingerprint  # type: ignore[method-assign]
    stop = threading.Event()
    a.run(stop, max_rounds=2)  # round 1 at start; round 2 only because "a" became "b"
    assert a.rounds == 2


@pytest.mark.parametrize("code", ["DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"])
def test_late_or_busy_dsfro_is_no_plan(code: str) -> None:
    from solver.client import DsfroError

    error = DsfroError(grpc.StatusCode[code], "late", "rid", 1)
    a, runner, _ = adapter(FakeClient(error=error))
    assert a.round().outcome == "no_plan" and runner.calls == []
    assert a.metrics.registry.get_sample_value("dsfro_slurm_solve_errors_total", {"code": code})


def test_decisions_are_logged_as_json_lines(caplog: pytest.LogCaptureFixture) -> None:
    from solver.slurm.observe import JsonFormatter

    a, _, _ = adapter(FakeClient(place_all))
    with caplog.at_level("INFO", logger="dsfro.slurm"):
        a.round()
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records]
    place = next(x for x in lines if x.get("event") == "decision" and x["job"] == 8)
    assert (place["action"], place["reason"], place["applied"]) == ("place", "planned", True)
    assert place["target"] == "node4 x1 H100-80GB dp1 tp1 pp1 @1605 MHz"
    [round_] = [x for x in lines if x.get("event") == "round"]
    assert round_["outcome"] == "planned" and set(round_["seconds"]) >= {"read", "solve", "apply"}


def test_an_infeasible_answer_keeps_what_runs_and_says_why() -> None:
    """DSFRO answers INFEASIBLE (running non-preemptible jobs over a budget): no plan, nothing
    touched, held jobs wait with DSFRO's reason, and the round is not counted as planned
    (before: "planned", the reason dropped, `last_plan` refreshed)."""

    def answer(request: SolveRequest) -> SolveResponse:
        out = SolveResponse()
        out.stats.termination = Termination.TERMINATION_INFEASIBLE
        out.stats.detail = "cluster draws 6740 W over its budget 4500 W"
        return out

    a, runner, _ = adapter(FakeClient(answer))
    report = a.round()
    assert report.outcome == "infeasible" and a.failing_since is None
    assert report.error == "DSFRO: INFEASIBLE: cluster draws 6740 W over its budget 4500 W"
    assert runner.writes("release") == [] and runner.writes("requeuehold") == []
    held = {d.job_id: d for d in report.decisions if d.job_id in (8, 11, 12)}
    assert {(d.action, d.reason, d.detail) for d in held.values()} == {
        (Action.WAIT, "infeasible", report.error)
    }
    m = a.metrics.registry
    assert m.get_sample_value("dsfro_slurm_rounds_total", {"outcome": "infeasible"}) == 1
    assert m.get_sample_value("dsfro_slurm_last_plan_timestamp_seconds") == 0


def test_sighup_reads_the_site_file_again_and_a_bad_one_keeps_the_old() -> None:
    """The site file was read at start only: a new power budget needed a restart."""
    seen: list[SolveRequest] = []

    def record(request: SolveRequest) -> SolveResponse:
        seen.append(request)
        return place_all(request)

    a, _runner, _ = adapter(FakeClient(record), interval=0, poll=0.01)
    sources: Iterator[Site | SiteError] = iter(
        [Site(power_budget_watts=12_000.0), SiteError("site.json: malformed JSON")]
    )

    def source() -> Site:
        got = next(sources)
        if isinstance(got, SiteError):
            raise got
        return got

    a.site_source = source
    stop = threading.Event()
    a.run(stop, max_rounds=1)
    assert not seen[-1].cluster.HasField("power_budget_watts")
    a.reload.set()
    a.run(stop, max_rounds=2)
    assert seen[-1].cluster.power_budget_watts == 12_000.0
    a.reload.set()
    a.run(stop, max_rounds=3)  # the broken file is not taken: the rounds go on with the old
    assert seen[-1].cluster.power_budget_watts == 12_000.0
    m = a.metrics.registry
    assert m.get_sample_value("dsfro_slurm_site_reloads_total", {"outcome": "loaded"}) == 1
    assert m.get_sample_value("dsfro_slurm_site_reloads_total", {"outcome": "rejected"}) == 1


def test_jobs_the_plan_defers_to_cleaner_hours_are_counted_apart() -> None:
    """A deferred job counted only under waiting, like a job no GPU is free for."""

    def defer_waiting(request: SolveRequest) -> SolveResponse:
        out = place_all(request)
        for a in out.plan.assignments:
            if a.job == "8":
                a.Clear()
                a.job, a.state = "8", JobState.JOB_STATE_QUEUED
                a.queue_reason = QueueReason.QUEUE_REASON_DEFERRED
                a.queue_detail = "cleaner in 3 h"
        return out

    a, _runner, _ = adapter(FakeClient(defer_waiting))
    report = a.round()
    assert report.outcome == "planned"
    m = a.metrics.registry
    assert m.get_sample_value("dsfro_slurm_jobs", {"kind": "deferred"}) == 1
    assert m.get_sample_value("dsfro_slurm_jobs", {"kind": "waiting"}) == 3
