"""Input limits on a real loopback server: the issue's input holes are INVALID_ARGUMENT from
ValidateSnapshot and Solve, a solve at the maxima has a finite objective, and request bytes
that don't decode are INVALID_ARGUMENT on every RPC (issue 10, point 3)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import grpc
import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import (
    MAX_JOB_WEIGHT,
    MAX_OBJECTIVE_WEIGHT,
    MAX_POWER_WATTS,
    MAX_SAMPLES_PER_SECOND,
)
from tests.factories import make_request
from tests.service_helpers import WAIT, Stub
from tests.service_helpers import bad_request as _bad_request
from tests.validation_helpers import P0, Mutation, _extend, _set


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(
            _set("cluster.power_budget_watts", 1e306),
            "cluster.power_budget_watts",
            id="power-1e306",
        ),
        pytest.param(
            _set("cluster.power_budget_watts", 1e308),
            "cluster.power_budget_watts",
            id="power-1e308",
        ),
        pytest.param(
            _set("cluster.rack_power_budgets[0].watts", 1e306),
            "cluster.rack_power_budgets[0].watts",
            id="rack-1e306",
        ),
        pytest.param(
            _set("cluster.rack_power_budgets[0].watts", 1e308),
            "cluster.rack_power_budgets[0].watts",
            id="rack-1e308",
        ),
        pytest.param(_set("weights.throughput", 1e308), "weights.throughput", id="weight-1e308"),
        pytest.param(
            _extend(f"{P0}.sm_clocks_mhz", list(range(2000, 1_002_000))),
            f"{P0}.sm_clocks_mhz",
            id="million-clocks",
        ),
        pytest.param(_set("jobs[0].name", "llm\x00"), "jobs[0].name", id="nul-name"),
        pytest.param(_set("jobs[0].name", "x" * 1_000_000), "jobs[0].name", id="1mb-name"),
    ],
)
def test_the_issues_input_holes_are_invalid_argument(
    stub: Stub, mutate: Mutation, field: str
) -> None:
    req = make_request()
    mutate(req)
    check = stub.ValidateSnapshot(pb.ValidateSnapshotRequest(request=req), timeout=WAIT)
    assert not check.valid
    assert [v.field for v in check.violations] == [field]
    with pytest.raises(grpc.RpcError) as info:
        stub.Solve(req, timeout=WAIT)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in _bad_request(info.value)] == [field]
    assert field in info.value.details()


def test_a_solve_at_the_maxima_has_a_finite_objective(stub: Stub) -> None:
    req = make_request()
    req.cluster.power_budget_watts = MAX_POWER_WATTS
    req.cluster.rack_power_budgets[0].watts = MAX_POWER_WATTS
    for name in ("throughput", "energy", "migration", "locality", "deadline"):
        setattr(req.weights, name, MAX_OBJECTIVE_WEIGHT)
    for job in req.jobs:
        job.weight = MAX_JOB_WEIGHT
    for point in req.jobs[1].profile.points:
        point.samples_per_second = MAX_SAMPLES_PER_SECOND
        point.watts = MAX_POWER_WATTS
    req.options.backend = pb.BACKEND_CPSAT
    req.options.time_budget.seconds = 2
    resp = stub.Solve(req, timeout=WAIT)
    assert math.isfinite(resp.stats.objective)
    assert resp.stats.termination in (pb.TERMINATION_OPTIMAL, pb.TERMINATION_FEASIBLE)


@pytest.fixture
def raw(channel: grpc.Channel) -> Iterator[Callable[[str, bytes], bytes]]:
    """Calls a method of the service with request bytes as they are."""

    def call(method: str, data: bytes) -> bytes:
        rpc = channel.unary_unary(f"/dsfro.v1.SchedulerService/{method}")
        out: bytes = rpc(data, timeout=WAIT)
        return out

    yield call


GARBAGE = b"\xff\xff\xff\xff\xff"
TRUNCATED = b"\x0a\x10\x0a"
"""Field 1 (the request or cluster) says 16 bytes follow; one does."""
BAD_UTF8 = b"\x12\x04\x0a\x02\xff\xfe"
"""A SolveRequest whose job's name is not UTF-8 (with ``ab`` in its place, it decodes)."""


@pytest.mark.parametrize(
    ("method", "message", "data"),
    [
        ("Solve", "dsfro.v1.SolveRequest", GARBAGE),
        ("Solve", "dsfro.v1.SolveRequest", TRUNCATED),
        ("ValidateSnapshot", "dsfro.v1.ValidateSnapshotRequest", GARBAGE),
        ("ValidateSnapshot", "dsfro.v1.ValidateSnapshotRequest", TRUNCATED),
        ("Solve", "dsfro.v1.SolveRequest", BAD_UTF8),
        ("ValidateSnapshot", "dsfro.v1.ValidateSnapshotRequest", b"\x0a\x06" + BAD_UTF8),
        ("EvaluatePlan", "dsfro.v1.EvaluatePlanRequest", GARBAGE),
        ("GetServerInfo", "dsfro.v1.GetServerInfoRequest", GARBAGE),
    ],
)
def test_undecodable_bytes_are_invalid_argument(
    raw: Callable[[str, bytes], bytes], method: str, message: str, data: bytes
) -> None:
    with pytest.raises(grpc.RpcError) as info:
        raw(method, data)
    err = info.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    [(field, description)] = _bad_request(err)
    assert field == "request"
    assert description.startswith(f"not a valid {message} (")
    assert err.details().startswith("invalid request (1 problems): request: not a valid")


def test_well_formed_bytes_still_reach_the_service(raw: Callable[[str, bytes], bytes]) -> None:
    info = pb.GetServerInfoResponse.FromString(raw("GetServerInfo", b""))
    assert info.version
    data = pb.ValidateSnapshotRequest(request=make_request()).SerializeToString()
    resp = pb.ValidateSnapshotResponse.FromString(raw("ValidateSnapshot", data))
    assert resp.valid
