"""The one deadline rule (solver.core.deadline) and the solver's settings (solver.core.settings):
what they compute, where their defaults come from, and how bad values are named."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from solver.app.profile import ProfileError, profile_from_dict, solver_settings
from solver.core.deadline import Clock, Deadline, finish_seconds, idle_read_seconds, slowdown
from solver.core.settings import SettingsError, SolverSettings, describe, load_settings

S = SolverSettings()


def test_without_a_caller_deadline_the_budget_counts_from_arrival_less_the_answer() -> None:
    d = Deadline.for_call(S, arrival=100.0, budget_seconds=2.0, jobs=1000, now=100.1)
    respond = S.respond_seconds + S.respond_seconds_per_job * 1000
    assert d.start == 100.0
    assert d.end == pytest.approx(102.0 - respond)
    assert d.finish_seconds == pytest.approx(finish_seconds(S, 1000))


def test_a_caller_deadline_ends_the_solve_before_it_by_a_margin() -> None:
    # 3 s left: the margin is the configured 0.2 s (a tenth of 3 s is more).
    assert _rpc(budget=60.0, jobs=10, left=3.0).end == pytest.approx(103.0 - 0.2)
    # 0.5 s left: the margin shrinks to a tenth of it, but never below the answer's time.
    assert _rpc(budget=60.0, jobs=10, left=0.5).end == pytest.approx(100.5 - 0.05)
    respond = S.respond_seconds + S.respond_seconds_per_job * 10000
    assert _rpc(budget=60.0, jobs=10000, left=0.5).end == pytest.approx(100.5 - respond)
    # A caller deadline farther than the budget changes nothing.
    far = _rpc(budget=1.0, jobs=10, left=1e9)
    assert far.end == pytest.approx(101.0 - S.respond_seconds - 10 * S.respond_seconds_per_job)


def test_the_answer_is_due_after_the_solver_ends_by_the_time_to_build_it() -> None:
    # A worker is killed a little past the instant its answer is due. At 1,024 nodes on a
    # loaded machine one was killed building its response: it had been due at the solver's
    # end, though the budget kept time after it for the response.
    d = Deadline.for_call(S, arrival=100.0, budget_seconds=2.0, jobs=1000, now=100.1)
    assert d.answer_by == pytest.approx(102.0) and d.answer_by > d.end
    assert d.sooner(101.0).answer_by == d.answer_by
    # Under a caller deadline, a solve killed past it must still be answered for in time.
    respond = S.respond_seconds + S.respond_seconds_per_job * 10
    roomy = _rpc(budget=60.0, jobs=10, left=3.0)
    assert roomy.answer_by == pytest.approx(roomy.end + respond)
    short = _rpc(budget=60.0, jobs=10, left=0.5)
    assert short.answer_by == pytest.approx(short.end)  # no later than before
    assert Deadline.after(1.0).answer_by == float("inf")


def _rpc(*, budget: float, jobs: int, left: float) -> Deadline:
    """The deadline of a call that arrived at 100 s with `left` seconds to its RPC deadline."""
    return Deadline.for_call(
        S, arrival=100.0, budget_seconds=budget, jobs=jobs, caller_end=100.0 + left, now=100.0
    )


def test_a_request_read_slowly_stretches_every_reserve() -> None:
    jobs = 2048
    idle = S.read_seconds + S.read_seconds_per_job * jobs
    assert idle_read_seconds(S, jobs) == pytest.approx(idle)
    assert slowdown(S, idle, idle) == 1.0
    assert slowdown(S, idle / 2, idle) == 1.0  # faster than measured: no credit
    assert slowdown(S, 3 * idle, idle) == pytest.approx(3.0)
    assert slowdown(S, 100 * idle, idle) == S.max_slowdown
    assert slowdown(S, 1.0, idle_read_seconds(S, 1)) == 1.0  # tiny requests say nothing
    fast = Deadline.for_call(S, arrival=0.0, budget_seconds=5.0, jobs=jobs, read_seconds=idle)
    slow = Deadline.for_call(S, arrival=0.0, budget_seconds=5.0, jobs=jobs, read_seconds=3 * idle)
    respond = S.respond_seconds + S.respond_seconds_per_job * jobs
    assert fast.end - slow.end == pytest.approx(2 * respond + 2 * finish_seconds(S, jobs))
    # Reading counts profile points and named nodes too (the service's refusal of a request
    # it cannot read in time reads it so).
    big = idle_read_seconds(S, jobs, points=500_000, names=1_000_000)
    assert big == pytest.approx(
        idle + 500_000 * S.read_seconds_per_profile_point + 1e6 * S.read_seconds_per_node_name
    )
    # Work after a step's end (settling a plan, ruin's last attempt) keeps reserves at the
    # call's pace; the solver's own finish keeps its idle size (the rest came off the end).
    assert slow.finish_seconds == fast.finish_seconds == pytest.approx(finish_seconds(S, jobs))
    assert fast.finishes(3) == pytest.approx(3 * finish_seconds(S, jobs))
    assert slow.finishes(3) == pytest.approx(9 * finish_seconds(S, jobs))
    assert slow.sooner(1.0).finishes() == pytest.approx(slow.finishes())


def test_a_clock_has_no_time_once_stopped() -> None:
    stop = threading.Event()
    clock = Clock(Deadline.after(10.0, S, 100), stop)
    assert 9.0 < clock.left() <= 10.0
    assert clock.work_end() == pytest.approx(clock.end - finish_seconds(S, 100))
    assert clock.share_of_budget(0.5) == pytest.approx(clock.start + 5.0)
    stop.set()
    assert clock.stopped() and clock.left() == 0.0
    assert Deadline.after(1.0).sooner(time.monotonic()).end <= time.monotonic()


# ---------------------------------------------------------------- settings


def test_settings_are_frozen_and_travel_to_worker_processes() -> None:
    assert pickle.loads(pickle.dumps(S)) == S
    with pytest.raises(ValueError):
        S.heuristic_share = 0.9  # type: ignore[misc]


def test_every_setting_says_where_its_default_comes_from() -> None:
    described = describe()
    assert {name for name, _, _ in described} == set(SolverSettings.model_fields)
    assert all(len(text) > 20 for _, _, text in described), "a setting without provenance"


def test_the_environment_wins_over_the_profile_table() -> None:
    table = {"heuristic_share": 0.4, "part_gpus": 1024}
    env = {"DSFRO_TUNING_HEURISTIC_SHARE": "0.3", "HOME": "/root"}
    s = load_settings(table, source="prod.toml", environ=env)
    assert (s.heuristic_share, s.part_gpus) == (0.3, 1024)
    assert load_settings(environ={}) == S


def test_bad_settings_name_their_key_or_variable() -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(
            {"heuristic_share": 3, "no_such": 1},
            source="prod.toml",
            environ={"DSFRO_TUNING_MAX_SLOWDOWN": "fast", "DSFRO_TUNING_TYPO": "1"},
        )
    problems = info.value.problems
    assert "DSFRO_TUNING_TYPO: no such setting (see docs/operations.md, Tuning)" in problems
    assert any(p.startswith("prod.toml: [tuning] heuristic_share: ") for p in problems)
    assert "prod.toml: [tuning] no_such: no such setting" in problems
    assert any(p.startswith("DSFRO_TUNING_MAX_SLOWDOWN: ") and "'fast'" in p for p in problems)


def test_a_profile_carries_the_tuning_table_checked_when_it_is_read() -> None:
    profile = profile_from_dict({"tuning": {"kept_exact_workers": 1}}, source="ops.toml")
    assert solver_settings(profile, environ={}).kept_exact_workers == 1
    with pytest.raises(ProfileError) as info:
        profile_from_dict({"tuning": {"part_gpus": 2}}, source="ops.toml")
    assert "ops.toml: [tuning] part_gpus: Input should be greater than or equal to 8" in str(
        info.value
    )
