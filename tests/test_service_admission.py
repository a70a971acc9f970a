"""Admission (solver.service.admission) and the budget read from a request's options alone
(solver.service.head)."""

from __future__ import annotations

import threading
import time

import pytest

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.limits import Limits
from solver.app.profile import profile_from_dict
from solver.service import head
from solver.service.admission import MAX_RETRY_SECONDS, MIN_RETRY_SECONDS, Admission, Refused
from tests.factories import make_request


def test_a_free_slot_is_taken_at_once_and_given_back() -> None:
    a = Admission(slots=1, max_queued=0, queue_wait_share=0.5)
    now = time.monotonic()
    running = a.admit(1.0, now, now + 1.0)
    assert a.in_flight() == 1
    a.release(running)
    a.release(running)  # twice is harmless
    assert a.in_flight() == 0
    a.release(a.admit(1.0, now, now + 1.0))


def test_each_admitted_solve_knows_how_many_run_beside_it() -> None:
    """Its share of the cores: the solves running when it was admitted, itself included."""
    a = Admission(slots=3, max_queued=0, queue_wait_share=0.5)
    now = time.monotonic()
    first = a.admit(1.0, now, now + 1.0)
    second = a.admit(1.0, now, now + 1.0)
    assert (first.concurrent, second.concurrent) == (1, 2)
    a.release(first)
    assert a.admit(1.0, now, now + 1.0).concurrent == 2


def test_without_a_queue_the_refusal_hints_at_the_earliest_due_solve() -> None:
    a = Admission(slots=2, max_queued=0, queue_wait_share=0.5)
    now = time.monotonic()
    a.admit(10.0, now, now + 3.0)
    a.admit(10.0, now, now + 1.5)
    with pytest.raises(Refused) as info:
        a.admit(10.0, now, now + 10.0)
    assert 1.3 < info.value.retry_after <= 1.5
    assert "max_concurrent_solves=2" in str(info.value)


def test_the_hint_stays_within_bounds() -> None:
    a = Admission(slots=1, max_queued=0, queue_wait_share=0.0)
    now = time.monotonic()
    a.admit(1.0, now, now - 5.0)  # overdue
    with pytest.raises(Refused) as info:
        a.admit(1.0, now, now + 1.0)
    assert info.value.retry_after == MIN_RETRY_SECONDS
    b = Admission(slots=1, max_queued=0, queue_wait_share=0.0)
    b.admit(600.0, now, now + 600.0)
    with pytest.raises(Refused) as info:
        b.admit(1.0, now, now + 1.0)
    assert info.value.retry_after == MAX_RETRY_SECONDS


def test_a_call_waits_its_share_of_the_budget_then_is_refused() -> None:
    a = Admission(slots=1, max_queued=1, queue_wait_share=0.25)
    now = time.monotonic()
    a.admit(10.0, now, now + 10.0)
    start = time.monotonic()
    with pytest.raises(Refused):
        a.admit(2.0, start, start + 2.0)  # waits 0.5 s (a quarter of 2 s)
    assert 0.45 < time.monotonic() - start < 1.0


def test_a_waiting_call_gets_the_slot_when_it_frees_up() -> None:
    a = Admission(slots=1, max_queued=1, queue_wait_share=0.5)
    now = time.monotonic()
    first = a.admit(10.0, now, now + 10.0)
    threading.Timer(0.2, a.release, args=(first,)).start()
    start = time.monotonic()
    second = a.admit(4.0, start, start + 4.0)
    assert 0.15 < time.monotonic() - start < 1.0
    a.release(second)


def test_a_full_queue_refuses_at_once() -> None:
    a = Admission(slots=1, max_queued=1, queue_wait_share=1.0)
    now = time.monotonic()
    a.admit(10.0, now, now + 10.0)
    refused: list[Refused] = []

    def wait() -> None:
        try:
            a.admit(1.0, now, now + 1.0)
        except Refused as e:
            refused.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)
    start = time.monotonic()
    with pytest.raises(Refused):
        a.admit(10.0, start, start + 10.0)
    assert time.monotonic() - start < 0.1
    waiter.join()
    assert len(refused) == 1  # the waiting call, once its wait ran out


def test_draining_stops_the_running_and_refuses_the_rest() -> None:
    a = Admission(slots=2, max_queued=1, queue_wait_share=1.0)
    now = time.monotonic()
    running = a.admit(10.0, now, now + 10.0)
    a.drain()
    assert running.stop.is_set()
    with pytest.raises(Refused, match="shutting down"):
        a.admit(1.0, now, now + 1.0)


# ---------------------------------------------------------------- the budget, read early


def test_the_budget_is_read_from_the_options_alone() -> None:
    limits = Limits()
    request = make_request()
    request.options.time_budget.FromMilliseconds(1500)
    assert head.budget_seconds(request.SerializeToString(), None, limits) == 1.5
    request.options.ClearField("time_budget")
    data = request.SerializeToString()
    assert head.budget_seconds(data, None, limits) == limits.default_time_budget_seconds
    profile = profile_from_dict({"solver": {"time_budget": "7s"}})
    assert head.budget_seconds(data, profile, limits) == 7.0
    request.options.time_budget.FromSeconds(10_000)  # refused later; capped for admission
    assert head.budget_seconds(request.SerializeToString(), None, limits) == 300.0
    garbage = b"\x0a\xff\xff\xff\xff\x0f"
    assert head.budget_seconds(garbage, None, limits) == limits.default_time_budget_seconds
    assert head.budget_seconds(pb.SolveRequest().SerializeToString(), None, limits) == 5.0
