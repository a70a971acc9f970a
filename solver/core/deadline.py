"""When a solve must answer: computed once where a call arrives, only read below.

The one rule: the time budget counts from the call's arrival (reading the request spends it
too), less the time to turn the plan into an answer and send it, and never past the caller's
own deadline (an RPC deadline) less a margin. The margin is cut to a tenth of a short deadline,
yet never below the time to send this answer: a short deadline keeps most of its time for
solving. When reading the request took longer than it does on an idle machine (solves share
the machine), every per-job reserve stretches by that slowdown.

``Deadline.after(budget)`` is the same rule for a caller with no call (the CLI, the simulator,
tests): the budget from now. The solver reads a Deadline through a ``Clock``, which adds the
caller's stop request.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from solver.core.settings import RESERVE_FLOOR_SECONDS, RESERVE_SECONDS_PER_JOB, SolverSettings

_NO_DEADLINE = 1e7
"""A caller deadline farther than this many seconds is no deadline."""


@dataclass(frozen=True)
class Deadline:
    """The instants a solve works to (time.monotonic(): one clock for every process)."""

    start: float
    """Where the budget counts from: the call's arrival."""
    end: float
    """The solver's result must be ready by now; answering happens after it."""
    finish_seconds: float
    """Kept back before `end` to turn choices into a checked plan, as long as on an idle
    machine (on a slowed one the rest of it comes off `end`)."""
    slowdown: float = 1.0
    """How much slower than on an idle machine the call was read (``slowdown``)."""
    answer_by: float = math.inf
    """When the answer must be ready to send: `end` and the time kept after it to turn the
    result into the answer (at the call's pace), never so late that a solve past it could not
    be stopped and answered for before the caller's deadline. A service kills a solve still
    running a little past it (inf: no one waits)."""

    @classmethod
    def for_call(
        cls,
        settings: SolverSettings,
        *,
        arrival: float,
        budget_seconds: float,
        jobs: int,
        caller_end: float | None = None,
        read_seconds: float = 0.0,
        now: float | None = None,
    ) -> Deadline:
        """The deadline of a call that arrived at `arrival`, asked for `budget_seconds` over
        `jobs` jobs, took `read_seconds` to read, and must answer by `caller_end` (None: no
        caller deadline)."""
        now = time.monotonic() if now is None else now
        # Gauged by the jobs alone: a request of many profile points, slow to read, is slow
        # after reading too (its configurations), and the stretched reserves keep its answer in
        # time (500,000 points at 2 s: answered at 1.65 s; gauged by its points as well, the
        # worker ran past its limit and the answer came at 2.15 s).
        slow = slowdown(settings, read_seconds, idle_read_seconds(settings, jobs))
        respond = (settings.respond_seconds + settings.respond_seconds_per_job * jobs) * slow
        finish = finish_seconds(settings, jobs)
        # The solver keeps back what finishing needs on an idle machine; on a slowed one the
        # rest of that comes off its deadline.
        respond += (slow - 1.0) * finish
        end = arrival + budget_seconds - respond
        # A solve killed a little past its answer's due instant is answered for with a plan
        # sent ahead: that answer too must reach a caller with a deadline in time.
        late = math.inf
        if caller_end is not None and math.isfinite(caller_end):
            remaining = caller_end - now
            if remaining < _NO_DEADLINE:
                margin = min(settings.rpc_deadline_margin_seconds, max(respond, remaining / 10))
                end = min(end, caller_end - margin)
                late = caller_end - 2 * settings.kill_grace_seconds
        answer_by = max(min(end + respond, late), end)
        return cls(
            start=arrival, end=end, finish_seconds=finish, slowdown=slow, answer_by=answer_by
        )

    @classmethod
    def after(
        cls, budget_seconds: float, settings: SolverSettings | None = None, jobs: int = 0
    ) -> Deadline:
        """The whole budget from now, for callers that answer nobody over a wire."""
        s = settings if settings is not None else SolverSettings()
        now = time.monotonic()
        return cls(start=now, end=now + budget_seconds, finish_seconds=finish_seconds(s, jobs))

    def sooner(self, end: float) -> Deadline:
        """This deadline, ending no later than `end` (the answer due no later than before)."""
        return Deadline(
            self.start, min(self.end, end), self.finish_seconds, self.slowdown, self.answer_by
        )

    def at_pace(self, seconds: float) -> float:
        """An idle machine's `seconds` at this call's pace: what work after a step's end keeps
        back. On a slowed machine it takes that much longer: at 1,024 nodes beside the test
        suite, idle-sized reserves let answers run 0.2 s past a step's end and the call past
        its due instant."""
        return seconds * self.slowdown

    def finishes(self, count: float = 1.0) -> float:
        """`count` finish reserves at this call's pace (``at_pace``): what settling a plan for
        the power margin, or ruin and recreate's last attempt, keeps back."""
        return self.at_pace(count * self.finish_seconds)


def idle_read_seconds(
    settings: SolverSettings, jobs: int, points: int = 0, names: int = 0
) -> float:
    """What reading a request of `jobs` jobs, `points` measured profile points and `names` named
    nodes (decoding, validation, conversion, configurations) takes on an idle machine."""
    return (
        settings.read_seconds
        + settings.read_seconds_per_job * jobs
        + settings.read_seconds_per_profile_point * points
        + settings.read_seconds_per_node_name * names
    )


def first_plan_estimate(settings: SolverSettings, jobs: int, *, decomposed: bool = False) -> float:
    """Roughly how long the normal path (`decomposed`: the decomposed one, on an idle machine)
    takes over `jobs` jobs to its first answer; with less time left the quick plan answers."""
    per_job = (
        settings.decomposed_first_plan_seconds_per_job
        if decomposed
        else settings.first_plan_seconds_per_job
    )
    return settings.first_plan_seconds + per_job * jobs


def slowdown(settings: SolverSettings, read_seconds: float, expected: float) -> float:
    """How much slower than on an idle machine (`expected` seconds, ``idle_read_seconds``) a
    request was read, in [1, max_slowdown]."""
    if expected < settings.min_read_seconds_to_gauge:
        return 1.0
    return min(max(read_seconds / expected, 1.0), settings.max_slowdown)


def finish_seconds(settings: SolverSettings, jobs: int) -> float:
    """Time to keep back for turning choices into a checked plan."""
    return settings.finish_seconds + settings.finish_seconds_per_job * jobs


def reserve_by_size(
    full: float,
    jobs: int,
    floor: float = RESERVE_FLOOR_SECONDS,
    per_job: float = RESERVE_SECONDS_PER_JOB,
) -> float:
    """A reserve for finishing after a step: `full` for large snapshots, the floor plus a
    share per job below (fixed sizes left small snapshots at short budgets no time to solve)."""
    return min(full, floor + per_job * jobs)


def extract_seconds(settings: SolverSettings, jobs: int) -> float:
    """Time to keep back after an exact solver stops, to extract, check and return its plan."""
    return reserve_by_size(
        settings.extract_seconds,
        jobs,
        settings.extract_floor_seconds,
        settings.extract_seconds_per_job,
    )


class Clock:
    """A Deadline as the solver reads it, with the caller's stop request (a cancelled call,
    a shutdown): once stopped, no time is left."""

    def __init__(self, deadline: Deadline, stop: threading.Event | None = None) -> None:
        self.deadline = deadline
        self.start = deadline.start
        self.end = deadline.end
        self._stop = stop

    @property
    def stop(self) -> threading.Event | None:
        """The caller's stop request, if any."""
        return self._stop

    def stopped(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def left(self) -> float:
        """Seconds to the end; 0 once stopped."""
        return 0.0 if self.stopped() else self.end - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def work_end(self) -> float:
        """When search must stop so that the finish fits before the end."""
        return self.end - self.deadline.finish_seconds

    def share_of_budget(self, share: float) -> float:
        """The instant `share` of the whole window after its start."""
        return self.start + share * (self.end - self.start)


__all__ = [
    "Clock",
    "Deadline",
    "extract_seconds",
    "finish_seconds",
    "first_plan_estimate",
    "idle_read_seconds",
    "reserve_by_size",
    "slowdown",
]
