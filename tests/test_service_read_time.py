"""A request that cannot be read within its budget is refused before it is read
(solver.app.pipeline.unreadable_in_time): reading it alone would pass the answer's due instant,
and the answer came seconds late (500,000 profile points at 1 s: 3.1 s after the call)."""

from __future__ import annotations

import time

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.core.deadline import idle_read_seconds
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.wire import load_request_json
from tests.backend_helpers import ROOT
from tests.service_helpers import WAIT, bad_request, serving

SLOW_POINTS = SolverSettings(read_seconds_per_profile_point=0.02)
"""A server that estimates a profile point's reading at 20 ms: small's 52 points take about a
second (its real reading stays milliseconds)."""


def small(budget: float) -> pb.SolveRequest:
    request = load_request_json(ROOT / "instances" / "small.json")
    request.options.time_budget.FromNanoseconds(int(budget * 1e9))
    return request


def test_reading_counts_the_jobs_their_profile_points_and_named_nodes() -> None:
    s = SolverSettings()
    request = small(1.0)
    jobs = len(request.jobs)
    points = sum(len(j.profile.points) for j in request.jobs)
    assert points == 52
    assert pipeline.idle_read_of(request, s) == pytest.approx(idle_read_seconds(s, jobs, points))
    request.jobs[0].excluded_nodes.extend(n.name for n in request.cluster.nodes)
    names = len(request.cluster.nodes)
    expected = idle_read_seconds(s, jobs, points, names)
    assert pipeline.idle_read_of(request, s) == pytest.approx(expected)
    assert expected - idle_read_seconds(s, jobs, points) == pytest.approx(
        names * s.read_seconds_per_node_name
    )


def test_a_request_read_past_its_due_instant_is_refused_with_what_it_needs() -> None:
    request = small(1.0)
    need = pipeline.idle_read_of(request, SLOW_POINTS)
    assert 1.0 < need < 1.1
    now = time.monotonic()
    late = pipeline.unreadable_in_time(request, SLOW_POINTS, arrival=now, budget=0.3)
    assert late is not None and late.field == "options.time_budget"
    assert f"takes about {need:.2f} s" in late.description
    at_least = float(late.description.split("at least ", 1)[1].split(" s ", 1)[0])
    assert need < at_least < need + 0.2  # reading and a first plan, rounded up to 0.1 s
    assert pipeline.unreadable_in_time(request, SLOW_POINTS, arrival=now, budget=5) is None
    # Reading that ends within the kill grace after the due instant answers a little late (a
    # quick plan), as any solve may: not refused.
    grace = SLOW_POINTS.kill_grace_seconds
    just_late = now + need - grace / 2
    assert (
        pipeline.unreadable_in_time(request, SLOW_POINTS, arrival=now, budget=just_late - now)
        is None
    )
    # The default settings read small in milliseconds.
    assert pipeline.unreadable_in_time(request, SolverSettings(), arrival=now, budget=0.3) is None


def test_the_service_refuses_it_at_once_and_solves_it_with_the_time() -> None:
    with serving(Solver(SLOW_POINTS)) as (_, stub):
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            stub.Solve(small(0.3), timeout=WAIT)
        assert time.monotonic() - started < 0.3 + 2.0  # not read, not solved (a cold worker)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        [(field, description)] = bad_request(err.value)
        assert field == "options.time_budget" and "give it at least" in description
        # Only the budget is judged: a caller's deadline shorter than the estimated reading
        # ends the call by itself (DEADLINE_EXCEEDED, as gRPC says) if the reading is slow;
        # here it is fast, and the plan comes before the deadline.
        answer = stub.Solve(small(5.0), timeout=0.8)
        assert answer.stats.termination != pb.TERMINATION_UNSPECIFIED
        response = stub.Solve(small(3.0), timeout=WAIT)
        assert response.stats.termination != pb.TERMINATION_UNSPECIFIED
        assert any(a.state == pb.JOB_STATE_RUNNING for a in response.plan.assignments)
