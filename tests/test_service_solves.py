"""A Solve in its worker process on a real loopback server (solver.service.solves, worker): the
RPC deadline and the budget counted from the call's arrival bound it, a cancelled call frees
its slot long before its budget, and a worker that dies still answers its caller (with the
quick plan, or the last plan it sent ahead)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.core.deadline import Clock
from solver.core.settings import SolverSettings
from solver.domain import Problem, SolveResult
from tests.factories import make_request
from tests.fakes import (
    BrokenAfterFirst,
    DiesOnce,
    Dying,
    Held,
    Recording,
    UntilDeadline,
    records,
    wait_entered,
)
from tests.service_helpers import WAIT, _unproven_in_seconds, serving


def test_the_rpc_deadline_bounds_the_solve(tmp_path: Path) -> None:
    """A 60 s budget under a 3 s RPC deadline: the solver is told to stop before the deadline."""
    req = make_request()
    req.options.time_budget.FromSeconds(60)
    path = tmp_path / "seen.jsonl"
    settings = SolverSettings(rpc_deadline_margin_seconds=0.5)
    with serving(UntilDeadline(path, settings)) as (_, stub):
        start = time.monotonic()
        resp = stub.Solve(req, timeout=3.0)
    assert len(resp.plan.assignments) == 3  # an answer, not DEADLINE_EXCEEDED
    [seen] = records(path)
    # Before the RPC deadline (start + 3 s) by the margin, cut to a tenth of the time left
    # (0.3 s): the solver keeps most of the time.
    assert start + 2.6 < seen["end"] <= start + 3.0 - 0.25


def test_the_budget_counts_from_the_calls_arrival(tmp_path: Path) -> None:
    """Without an RPC deadline, the solver stops at the budget counted from the call's arrival
    (decoding and conversion spend it too), less the time to send the answer."""
    path = tmp_path / "seen.jsonl"
    request = make_request()
    request.options.time_budget.FromSeconds(20)
    with serving(Recording(path)) as (_, stub):
        # The channel connects first: a fresh channel's TCP and HTTP/2 set-up happens before
        # the server can see the call, so it is not the server's to count.
        stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=WAIT)
        sent = time.monotonic()
        stub.Solve(request)
    [seen] = records(path)
    # The budget counts from the server's arrival stamp (before decoding, admission and the
    # worker), never from when the worker began; the answer's reserve comes off its end.
    assert sent <= seen["start"] < seen["called"] < seen["end"] < seen["start"] + 20.0
    assert seen["start"] - sent < 2.0  # stamped on arrival (scheduling delay aside)
    assert seen["pid"] != os.getpid()  # solved in a worker process


def test_a_cancelled_solve_frees_its_slot_long_before_its_budget() -> None:
    """One slot; a 60 s solve of a power-bound snapshot is cancelled: the slot is free again
    within seconds (the search, the solvers and the worker stop), not after the budget."""
    request = _unproven_in_seconds()
    with serving(max_concurrent_solves=1) as (_, stub):
        call = stub.Solve.future(request)
        time.sleep(1.0)  # the solve is under way (the heuristic's first plan takes 0.1 s)
        call.cancel()
        cancelled = time.monotonic()
        quick = pb.SolveRequest()
        quick.CopyFrom(request)
        quick.options.time_budget.FromMilliseconds(200)
        while True:
            try:
                stub.Solve(quick, timeout=WAIT)
                break
            except grpc.RpcError as e:
                assert e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert time.monotonic() - cancelled < 20, "the cancelled solve kept its slot"
                time.sleep(0.05)


def test_a_cancelled_call_gets_no_plan_made_for_it_and_is_logged_as_cancelled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A solve that ignores its stop and offers no plan is cancelled: its worker is killed
    after the stop's grace, and the server makes no quick plan for a caller that has gone
    (on a loaded host that held the slot for seconds); the access log says CANCELLED, not OK,
    and no solve is counted."""
    made: list[str] = []
    quick = Held.quick

    def recorded(self: Held, p: Problem, clock: Clock, why: str) -> SolveResult:
        made.append(why)
        return quick(self, p, clock, why)

    monkeypatch.setattr(Held, "quick", recorded)  # in this process: the server's own plans
    with serving(Held(tmp_path, deaf=True, silent=True)) as (srv, stub), caplog.at_level("INFO"):
        call = stub.Solve.future(make_request(), timeout=WAIT)
        assert wait_entered(tmp_path)
        call.cancel()
        end = time.monotonic() + WAIT
        while srv.servicer.admission.in_flight() and time.monotonic() < end:
            time.sleep(0.02)
        assert srv.servicer.admission.in_flight() == 0
        time.sleep(0.1)  # the access line is written as the handler returns
    assert made == []
    codes = [r.getMessage().split()[1] for r in caplog.records if r.name == "solver.service.access"]
    assert codes == ["CANCELLED"]
    assert not [r for r in caplog.records if r.getMessage().startswith("solved ")]


def test_a_worker_that_dies_before_any_plan_answers_with_the_quick_plan() -> None:
    """The worker dies before it offered a plan: the server answers with the quick plan it
    makes itself, a FALLBACK that says why, and counts the crash."""
    with serving(Dying(first=False)) as (_, stub):
        response = stub.Solve(make_request(), timeout=WAIT)
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    assert "killed by SIGKILL" in response.stats.detail
    assert "before any plan" in response.stats.detail
    assert len(response.plan.assignments) == 3


def test_workers_lost_early_leave_the_quick_plan_the_calls_time() -> None:
    """Every worker dies at once (the retry's too), 20 s before the call is due: the server's
    own quick plan has until then, and starts the waiting jobs. Before, it had a moment
    (`kill_grace`, here 0): 2,048 jobs at 3 s answered with none of 1,467 started."""
    request = make_request()
    request.options.time_budget.FromSeconds(20)
    with serving(Dying(first=False)) as (srv, stub):
        srv.servicer.runner.kill_grace = 0.0
        started = time.monotonic()
        response = stub.Solve(request, timeout=WAIT)
        assert time.monotonic() - started < 20
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    assert "before any plan" in response.stats.detail
    assert "not reached" not in response.stats.detail
    states = [a.state for a in response.plan.assignments]
    assert states.count(pb.JOB_STATE_RUNNING) == len(request.jobs)


def test_a_worker_lost_with_time_left_runs_the_solve_again_on_another(tmp_path: Path) -> None:
    """A worker killed from outside 0.01 s into an 8 s call had left the answer to the server's
    quick plan, which started none of the waiting jobs; with time left the call now runs once
    more on another worker and answers as a solve does (not a FALLBACK), by its due instant."""
    marker = tmp_path / "died"
    request = make_request()
    request.options.time_budget.FromSeconds(20)
    with serving(DiesOnce(marker)) as (_, stub):
        started = time.monotonic()
        response = stub.Solve(request, timeout=WAIT)
        assert time.monotonic() - started < 20
    assert marker.exists()  # the first worker died
    assert response.stats.termination != pb.TERMINATION_FALLBACK
    detail = response.stats.detail
    assert re.match(r"the worker process \d+ was killed by SIGKILL; the solve ran again", detail)
    assert len(response.plan.assignments) == 3


def test_no_second_worker_without_a_warm_one_and_the_time_to_start_one(tmp_path: Path) -> None:
    """With no warm worker idle, a new one would import for about a second: a call with less
    than that and ``RETRY_MIN_SECONDS`` left answers at once (here the server's quick plan),
    and one with the time runs again."""
    for budget_ms, again in ((1500, False), (20000, True)):
        marker = tmp_path / f"died-{budget_ms}"
        request = make_request()
        request.options.time_budget.FromMilliseconds(budget_ms)
        with serving(DiesOnce(marker)) as (srv, stub):
            srv.servicer.pool.idle = lambda: 0  # type: ignore[method-assign]
            response = stub.Solve(request, timeout=WAIT)
        assert marker.exists()
        assert (response.stats.termination != pb.TERMINATION_FALLBACK) is again
        assert ("before any plan" in response.stats.detail) is not again


def test_a_worker_that_dies_after_its_first_plan_answers_with_it() -> None:
    with serving(Dying(first=True)) as (_, stub):
        response = stub.Solve(make_request(), timeout=WAIT)
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    assert "the first plan, sent ahead by the worker" in response.stats.detail
    assert len(response.plan.assignments) == 3


def test_a_solve_that_raises_after_its_first_plan_answers_with_it() -> None:
    """The scheduler's round goes on with the checked plan sent ahead, labelled a FALLBACK
    that names the log entry of the traceback (never the traceback itself)."""
    with serving(BrokenAfterFirst()) as (_, stub):
        response = stub.Solve(make_request(), timeout=WAIT)
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    detail = response.stats.detail
    assert re.search(r"the solve failed \(server log reference [0-9a-f]{12}\)", detail)
    assert "the first plan, sent ahead by the worker" in detail
    assert "secret" not in detail
    assert len(response.plan.assignments) == 3


def test_a_worker_that_dies_after_a_better_plan_answers_with_that_one() -> None:
    """The last plan sent ahead wins: a better one settled for the power margin replaces the
    first (its objective shows which arrived)."""
    with serving(Dying(first=True, better=True)) as (_, stub):
        response = stub.Solve(make_request(), timeout=WAIT)
    assert response.stats.termination == pb.TERMINATION_FALLBACK
    detail = response.stats.detail
    assert "the best plan settled for the power margin, sent ahead by the worker" in detail
    assert response.stats.objective == 123.0
    assert len(response.plan.assignments) == 3
