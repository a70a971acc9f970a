"""Solves of large requests through a real server on loopback, in this process (its solves in
its workers), timed from the client: what the node-rule benchmarks share."""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence

import grpc

from solver.service.config import ServerConfig
from solver.service.server import build_server
from solver.wire import JobState, SchedulerServiceStub, SolveRequest, SolveResponse, Termination

MAX_BYTES = 512 << 20
"""Requests of 20,000 nodes named one by one run to 170 MB."""


@contextlib.contextmanager
def loopback_stub() -> Iterator[SchedulerServiceStub]:
    srv = build_server(ServerConfig(host="127.0.0.1", port=0, max_message_bytes=MAX_BYTES))
    srv.start()
    options = [("grpc.max_send_message_length", MAX_BYTES)]
    try:
        with grpc.insecure_channel(f"127.0.0.1:{srv.port}", options=options) as channel:
            yield SchedulerServiceStub(channel)  # type: ignore[no-untyped-call]
    finally:
        srv.stop(None).wait(30)


def timed_solves(
    requests: Mapping[str, SolveRequest], budgets: Sequence[float]
) -> Iterator[tuple[str, float, float, SolveResponse]]:
    """(variant, budget, wall seconds, response) of each request at each budget, budget by
    budget."""
    with loopback_stub() as stub:
        for budget in budgets:
            for name, req in requests.items():
                req.options.time_budget.FromMilliseconds(round(budget * 1000))
                start = time.perf_counter()
                response = stub.Solve(req, timeout=budget + 120)
                yield name, budget, time.perf_counter() - start, response


def running(response: SolveResponse) -> int:
    return sum(a.state == JobState.JOB_STATE_RUNNING for a in response.plan.assignments)


def termination(response: SolveResponse) -> str:
    return Termination.Name(response.stats.termination).removeprefix("TERMINATION_")


def size_arguments(ap: argparse.ArgumentParser) -> None:
    """The generated request's size and seed, the reads' repeats and the solves' budgets."""
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budgets", type=float, nargs="*", default=[1.0, 3.0, 10.0])
