"""A Solve call as a solve worker runs it: bytes in, the answer's bytes out, off the server's
interpreter (``solver.runtime.workers``).

The worker decodes the request, applies the server's profile, validates and converts it, sets
the call's deadline (``solver.app.pipeline.deadline_of``: its budget from the call's arrival,
never past the RPC deadline) and solves with the solver the server was given. On the way it
reports two things to the server: the instant it will answer by (so that the server kills it
only past that), and the first checked plan as a serialized response (so that a worker killed
or dead later still leaves an answer). A stop request from the server (a cancelled call, a
shutdown) sets the solve's stop event: the best plan so far comes back at once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.convert import duration_to_proto, problem_from_proto, result_to_proto
from solver.app.limits import Limits
from solver.app.profile import Profile
from solver.app.validation import validate_request
from solver.core.solver import Solver
from solver.domain import Backend, Plan, Problem, SolveResult, SolveStats, Termination
from solver.runtime.workers import CallContext
from solver.service import logs

log = logging.getLogger(__name__)

PRELOAD = (
    "solver.exact.backends.highs",
    "solver.exact.backends.cpsat",
    "solver.perfmodel:load_all",
    "solver.service.worker",
)
"""Imported (and the catalog loaded) when a solve worker starts, about a second, not in a
caller's budget."""


@dataclass(frozen=True)
class SolveCall:
    """What the server sends a solve worker."""

    data: bytes
    """The SolveRequest as it came (parsed here, not in the server)."""
    arrival: float
    """time.monotonic() when the call arrived: the budget counts from here."""
    caller_end: float | None
    """time.monotonic() of the RPC deadline; None: none."""
    solver: Solver
    profile: Profile | None
    limits: Limits
    request_id: str | None = None
    log_level: str = "INFO"
    log_format: str = "text"


@dataclass(frozen=True)
class Summary:
    """What the server logs and counts of an answered solve."""

    termination: Termination
    backend: str
    objective: float
    relative_gap: float | None
    wall_seconds: float
    jobs: int
    nodes: int
    first_plan_seconds: float | None = None


@dataclass(frozen=True)
class Answer:
    """The worker's result: the response's bytes, or the request's violations."""

    response: bytes | None = None
    summary: Summary | None = None
    violations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Due:
    """Report: the solve will answer by this time.monotonic() instant."""

    end: float


@dataclass(frozen=True)
class FirstPlan:
    """Report: the first checked plan, as a serialized SolveResponse labelled FALLBACK."""

    response: bytes


def solve_call(call: SolveCall, ctx: CallContext) -> Answer:
    """Run one Solve (top level: called in a solve worker)."""
    logs.configure_worker_logging(call.log_level, call.log_format)
    token = logs.request_id.set(call.request_id)
    try:
        return _solve(call, ctx)
    finally:
        logs.request_id.reset(token)


def _solve(call: SolveCall, ctx: CallContext) -> Answer:
    try:
        request = pb.SolveRequest.FromString(call.data)
    except (DecodeError, ValueError) as e:
        name = pb.SolveRequest.DESCRIPTOR.full_name
        return Answer(violations=(("request", f"not a valid {name} ({e})"),))
    request = pipeline.prepare(request, call.profile)
    violations = validate_request(request, call.limits)
    if violations:
        return Answer(violations=tuple((v.field, v.description) for v in violations))
    problem = problem_from_proto(request, call.limits)
    deadline = pipeline.deadline_of(
        call.solver, problem, arrival=call.arrival, caller_end=call.caller_end
    )
    ctx.report(Due(deadline.end))
    first = FirstReport(call, ctx, problem)
    result = call.solver.solve(problem, deadline, ctx.stop, on_first_plan=first)
    guard = call.solver.settings.guard_params()
    response = result_to_proto(result, problem, guard).SerializeToString()
    return Answer(response=response, summary=summary(result, problem))


def summary(result: SolveResult, problem: Problem) -> Summary:
    s = result.stats
    return Summary(
        s.termination,
        s.backend_used.name,
        s.objective,
        s.relative_gap,
        s.wall_seconds,
        len(problem.jobs),
        len(problem.cluster.nodes),
        s.first_plan_seconds,
    )


class FirstReport:
    """Sends the first checked plan to the server in a thread of its own (serializing a large
    plan takes milliseconds the solve goes on meanwhile)."""

    def __init__(self, call: SolveCall, ctx: CallContext, problem: Problem) -> None:
        self.call = call
        self.ctx = ctx
        self.problem = problem

    def __call__(self, plan: Plan) -> None:
        threading.Thread(
            target=self._send, args=(plan,), name="dsfro-first-plan", daemon=True
        ).start()

    def _send(self, plan: Plan) -> None:
        try:
            self.ctx.report(FirstPlan(first_plan_response(plan, self.call.arrival, self.problem)))
        except Exception:  # the answer goes on without it
            log.exception("could not send the first plan ahead")


def first_plan_response(plan: Plan, arrival: float, problem: Problem | None = None) -> bytes:
    """A plan as the answer of a solve that went no further than its first plan."""
    stats = SolveStats(
        termination=Termination.FALLBACK,
        backend_used=Backend.HEURISTIC,
        objective=plan.objective.total,
        best_bound=None,
        relative_gap=None,
        wall_seconds=time.monotonic() - arrival,
        first_plan_seconds=time.monotonic() - arrival,
        num_configurations=0,
        num_configurations_enumerated=0,
        detail="the first plan",
    )
    return result_to_proto(SolveResult(plan=plan, stats=stats), problem).SerializeToString()


def fallback_stats(detail: str, arrival: float) -> bytes:
    """Serialized SolveResponse fields that, appended to a serialized response, relabel it a
    FALLBACK with `detail` and the wall time so far (protobuf merges concatenated messages:
    the last value of a singular field wins)."""
    stats = pb.SolveStats(
        termination=pb.TERMINATION_FALLBACK,
        detail=detail,
        wall_time=duration_to_proto(time.monotonic() - arrival),
    )
    return pb.SolveResponse(stats=stats).SerializeToString()
