"""Stand-in solvers for the service and CLI tests, injected where a real one would go.

The service runs every Solve in a worker process, so these are picklable Solver subclasses
that talk to the test through files: ``entered`` appears when a solve starts, a solve waits for
``release`` (or its stop), and records go to a JSON Lines file. Each answers with every job
queued (``canned_result``) unless it says otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.core.deadline import Deadline
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Plan, Problem, SolveResult
from tests.factories import canned_result

WAIT = 30.0
"""Longest a held solve waits for its release."""


@dataclass(frozen=True)
class Call:
    """One solve as a fake sees it: the arguments of Solver.solve."""

    problem: Problem
    deadline: Deadline | None
    stop: threading.Event | None
    on_first_plan: Callable[[Plan], None] | None
    on_better_plan: Callable[[Plan], None] | None = None


class Fake(Solver, ABC):
    """A Solver whose solve is `answer(call)`: each fake overrides that alone."""

    def solve(
        self,
        problem: Problem,
        deadline: Deadline | None = None,
        stop: threading.Event | None = None,
        on_first_plan: Callable[[Plan], None] | None = None,
        on_better_plan: Callable[[Plan], None] | None = None,
    ) -> SolveResult:
        return self.answer(Call(problem, deadline, stop, on_first_plan, on_better_plan))

    @abstractmethod
    def answer(self, call: Call) -> SolveResult: ...


class Canned(Fake):
    """Answers at once with every job queued."""

    def answer(self, call: Call) -> SolveResult:
        return canned_result(call.problem, call.problem.options.backend)


class Remembering(Canned):
    """Keeps every problem it is asked (in this process only: the CLI, not the service)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Problem] = []

    def answer(self, call: Call) -> SolveResult:
        self.seen.append(call.problem)
        return super().answer(call)


class Recording(Canned):
    """Writes each solve's jobs, options and deadline to `path` (JSON Lines)."""

    def __init__(self, path: Path, settings: SolverSettings | None = None) -> None:
        super().__init__(settings)
        self.path = str(path)

    def answer(self, call: Call) -> SolveResult:
        problem, deadline = call.problem, call.deadline
        record = {
            "jobs": [j.name for j in problem.jobs],
            "backend": problem.options.backend.name,
            "budget": problem.options.time_budget_seconds,
            "weights": dataclasses.asdict(problem.weights),
            "start": None if deadline is None else deadline.start,
            "end": None if deadline is None else deadline.end,
            "called": time.monotonic(),
            "pid": os.getpid(),
        }
        with open(self.path, "a") as f:
            f.write(json.dumps(record, default=lambda o: o.name) + "\n")  # enums by name
        return super().answer(call)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Held(Canned):
    """Marks `folder/entered`, offers its first plan (unless `silent`), then waits for
    `folder/release`, its stop (unless `deaf`), `seconds`, or with `until_deadline` the end of
    its deadline; answers with every job queued."""

    def __init__(
        self,
        folder: Path,
        seconds: float = WAIT,
        *,
        deaf: bool = False,
        until_deadline: bool = False,
        silent: bool = False,
    ) -> None:
        super().__init__()
        self.folder = str(folder)
        self.seconds = seconds
        self.deaf = deaf
        self.until_deadline = until_deadline
        self.silent = silent

    def answer(self, call: Call) -> SolveResult:
        folder, deadline, stop = Path(self.folder), call.deadline, call.stop
        answer = super().answer(call)
        if call.on_first_plan is not None and not self.silent:
            call.on_first_plan(answer.plan)
        (folder / f"entered-{os.getpid()}-{time.monotonic_ns()}").touch()
        end = time.monotonic() + self.seconds
        if self.until_deadline and deadline is not None:
            end = min(end, deadline.end)
        while time.monotonic() < end and not (folder / "release").exists():
            if stop is not None and stop.is_set() and not self.deaf:
                break
            time.sleep(0.01)
        return answer


def entered(folder: Path) -> int:
    """How many held solves have started."""
    return len(list(folder.glob("entered-*")))


def wait_entered(folder: Path, count: int = 1, timeout: float = WAIT) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if entered(folder) >= count:
            return True
        time.sleep(0.01)
    return False


def release(folder: Path) -> None:
    (folder / "release").touch()


class Broken(Fake):
    """Raises: the service must answer INTERNAL and leak nothing."""

    def answer(self, call: Call) -> SolveResult:
        raise RuntimeError("secret detail")


class BrokenAfterFirst(Canned):
    """Offers its first plan, gives the worker a moment to send it, then raises."""

    def answer(self, call: Call) -> SolveResult:
        plan = super().answer(call).plan
        if call.on_first_plan is not None:
            call.on_first_plan(plan)
            time.sleep(0.3)
        raise RuntimeError("secret detail")


class Dying(Canned):
    """Kills its own process, after offering its first plan when `first`, and a better plan
    (its first, worth 123) when `better`, giving the worker
    a moment to send each."""

    def __init__(self, *, first: bool, better: bool = False) -> None:
        super().__init__()
        self.first = first
        self.better = better

    def answer(self, call: Call) -> SolveResult:
        plan = super().answer(call).plan
        if self.first and call.on_first_plan is not None:
            call.on_first_plan(plan)
            time.sleep(0.5)
        if self.better and call.on_better_plan is not None:
            worth = dataclasses.replace(plan.objective, total=123.0)
            call.on_better_plan(dataclasses.replace(plan, objective=worth))
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")


class DiesOnce(Canned):
    """Kills its own process the first time it is asked (where `marker` does not exist yet,
    which it creates), and answers at once after that: a worker lost once, by itself."""

    def __init__(self, marker: Path) -> None:
        super().__init__()
        self.marker = str(marker)

    def answer(self, call: Call) -> SolveResult:
        if not os.path.exists(self.marker):
            Path(self.marker).write_text(f"{call.deadline}")
            os.kill(os.getpid(), signal.SIGKILL)
        return super().answer(call)


class UntilDeadline(Recording):
    """Records its deadline, then works until it."""

    def answer(self, call: Call) -> SolveResult:
        answer = super().answer(call)
        assert call.deadline is not None
        while time.monotonic() < call.deadline.end:
            time.sleep(0.01)
        return answer


class RequestIds(Canned):
    """Writes the request id its solve logs with (in the worker) to `path` (JSON Lines)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = str(path)

    def answer(self, call: Call) -> SolveResult:
        from solver.service import logs

        with open(self.path, "a") as f:
            f.write(json.dumps(logs.request_id.get()) + "\n")
        return super().answer(call)
