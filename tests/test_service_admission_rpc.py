"""Admission on a real loopback server (solver.service.admission through the servicer): a call
beyond the solve slots and the queue is refused with a RetryInfo hint, a queued call waits
within its share of the budget, refusal comes before decoding, and ValidateSnapshot calls
have slots of their own."""

from __future__ import annotations

import queue
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.service.config import ServerConfig
from solver.service.servicer import check_slots
from tests.factories import make_request
from tests.fakes import Held, release, wait_entered
from tests.service_helpers import WAIT, serving


def retry_delay(err: grpc.RpcError) -> float:
    """The google.rpc.RetryInfo delay of a refused call, in seconds."""
    status = rpc_status.from_call(err)
    assert status is not None
    [detail] = status.details
    retry = error_details_pb2.RetryInfo()
    assert detail.Unpack(retry)
    return float(retry.retry_delay.ToMilliseconds()) / 1000


def test_over_max_concurrent_solves_and_queue_a_call_is_refused_with_a_hint(
    tmp_path: Path,
) -> None:
    """Two slots and no queue: the third call is refused at once, told to come back about when
    the earliest running solve is due (a 2 s budget: within it)."""
    request = make_request()
    request.options.time_budget.FromSeconds(2)
    try:
        with serving(Held(tmp_path), max_concurrent_solves=2, max_queued_solves=0) as (_, stub):
            finished: queue.Queue[Any] = queue.Queue()
            calls = [stub.Solve.future(request, timeout=WAIT) for _ in range(2)]
            assert wait_entered(tmp_path, 2)
            third = stub.Solve.future(request, timeout=WAIT)
            third.add_done_callback(finished.put)
            refused = finished.get(timeout=WAIT)
            assert _code(refused) == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_concurrent_solves=2" in refused.exception().details()
            assert 0.05 <= retry_delay(refused.exception()) <= 2.0
            release(tmp_path)
            assert [_code(c) for c in calls].count(grpc.StatusCode.OK) == 2
            # The slots are free again once the held solves returned.
            assert len(stub.Solve(make_request(), timeout=WAIT).plan.assignments) == 3
    finally:
        release(tmp_path)


def test_a_call_waits_for_a_slot_within_its_share_of_the_budget(tmp_path: Path) -> None:
    """One slot, one place in the queue: a call that finds the slot taken waits, and is
    solved once the slot frees up within a quarter of its budget."""
    request = make_request()
    request.options.time_budget.FromSeconds(8)
    try:
        with serving(Held(tmp_path), max_concurrent_solves=1, max_queued_solves=1) as (_, stub):
            first = stub.Solve.future(request, timeout=WAIT)
            assert wait_entered(tmp_path, 1)
            waiting = stub.Solve.future(request, timeout=WAIT)
            time.sleep(0.5)
            assert not waiting.done()  # queued, not refused
            release(tmp_path)
            assert first.result(timeout=WAIT).plan.assignments
            assert waiting.result(timeout=WAIT).plan.assignments
    finally:
        release(tmp_path)


def test_admission_comes_before_decoding(tmp_path: Path) -> None:
    """With every slot taken, bytes that are no request are refused for the slot: they were
    never parsed. Once a slot is free, the same bytes are INVALID_ARGUMENT."""
    garbage = b"\x0a\xff\xff\xff\xff\x0f"
    try:
        with serving(Held(tmp_path), max_concurrent_solves=1, max_queued_solves=0) as (srv, stub):
            call = stub.Solve.future(make_request(), timeout=WAIT)
            assert wait_entered(tmp_path)
            with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
                raw = ch.unary_unary("/dsfro.v1.SchedulerService/Solve")
                with pytest.raises(grpc.RpcError) as info:
                    raw(garbage, timeout=WAIT)
                assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                release(tmp_path)
                assert call.result(timeout=WAIT).plan.assignments
                with pytest.raises(grpc.RpcError) as info:
                    raw(garbage, timeout=WAIT)
                assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    finally:
        release(tmp_path)


def _code(call: Any) -> grpc.StatusCode:
    exc = call.exception(timeout=WAIT)
    return grpc.StatusCode.OK if exc is None else exc.code()


def test_checks_over_their_limit_are_refused_with_a_retry_hint() -> None:
    """ValidateSnapshot calls beyond the check slots get RESOURCE_EXHAUSTED with RetryInfo, so
    that they cannot hold every worker thread; health still answers meanwhile."""
    config = ServerConfig(
        host="127.0.0.1", port=0, max_concurrent_solves=1, max_queued_solves=1, grpc_workers=6
    )
    slots = check_slots(config)
    assert slots == 2
    with serving(max_concurrent_solves=1, max_queued_solves=1, grpc_workers=6) as (srv, stub):
        taken = [srv.servicer._checks.take() for _ in range(slots)]  # as if running
        assert all(taken)
        try:
            request = pb.ValidateSnapshotRequest(request=make_request())
            with pytest.raises(grpc.RpcError) as refused:
                stub.ValidateSnapshot(request, timeout=WAIT)
            assert refused.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert retry_delay(refused.value) == pytest.approx(1.0)
            with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
                health = health_pb2_grpc.HealthStub(ch)
                answer = health.Check(health_pb2.HealthCheckRequest(), timeout=WAIT)
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            for _ in range(slots):
                srv.servicer._checks.give()
        assert stub.ValidateSnapshot(request, timeout=WAIT).valid
