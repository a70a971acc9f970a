"""Each solve's share of the cores (solver.service.worker.with_cores, and the servicer that
gives it): solves side by side must not each take every core, and a thread count the request
or the settings chose stays theirs."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Problem, SolveResult
from solver.runtime.cores import available_cores
from solver.service.worker import SolveCall, with_cores
from tests.factories import make_request, random_tiny
from tests.fakes import Call, Held, release, wait_entered
from tests.service_helpers import WAIT, serving


def _call(cores: int, settings: SolverSettings | None = None) -> SolveCall:
    return SolveCall(b"", 0.0, None, Solver(settings), None, None, cores=cores)  # type: ignore[arg-type]


def _with_threads(problem: Problem, threads: int) -> Problem:
    return replace(problem, options=replace(problem.options, threads=threads))


def _problem() -> Problem:
    return _with_threads(random_tiny(1), 0)


def test_the_share_becomes_the_threads_of_a_request_that_sets_none() -> None:
    assert with_cores(_problem(), _call(3)).options.threads == 3


def test_the_request_threads_and_the_settings_threads_win() -> None:
    assert with_cores(_with_threads(_problem(), 5), _call(1)).options.threads == 5
    chosen = _call(1, SolverSettings(threads=4))
    assert with_cores(_problem(), chosen).options.threads == 0  # the settings' 4 apply


def test_no_share_leaves_the_problem_as_it_is() -> None:
    problem = _problem()
    assert with_cores(problem, _call(0)) is problem


class HeldThreads(Held):
    """Held, first writing the threads its problem came with to `folder/threads-<pid>-<ns>`."""

    def answer(self, call: Call) -> SolveResult:
        stamp = f"{os.getpid()}-{time.monotonic_ns()}"
        (Path(self.folder) / f"threads-{stamp}").write_text(str(call.problem.options.threads))
        return super().answer(call)


def _request(threads: int = 0) -> pb.SolveRequest:
    request = make_request()
    request.options.threads = threads
    return request


def _threads_seen(folder: Path) -> list[int]:
    return sorted(int(p.read_text()) for p in folder.glob("threads-*"))


def test_solves_side_by_side_share_the_cores(tmp_path: Path) -> None:
    """Alone, a solve gets every core; admitted beside a running one, its share of them."""
    cores = available_cores()
    try:
        with serving(HeldThreads(tmp_path), max_concurrent_solves=2) as (_, stub):
            first = stub.Solve.future(_request(), timeout=WAIT)
            assert wait_entered(tmp_path, 1)
            second = stub.Solve.future(_request(), timeout=WAIT)
            assert wait_entered(tmp_path, 2)
            assert _threads_seen(tmp_path) == sorted([cores, max(1, cores // 2)])
            release(tmp_path)
            assert first.result() and second.result()
    finally:
        release(tmp_path)


def test_a_request_that_sets_its_threads_keeps_them(tmp_path: Path) -> None:
    release(tmp_path)  # answers at once
    with serving(HeldThreads(tmp_path)) as (_, stub):
        stub.Solve(_request(7), timeout=WAIT)
    assert _threads_seen(tmp_path) == [7]
