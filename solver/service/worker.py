"""A Solve call as a solve worker runs it: bytes in, the answer's bytes out, off the server's
interpreter (``solver.runtime.workers``).

The worker decodes the request, applies the server's profile, validates and converts it, sets
the call's deadline (``solver.app.pipeline.deadline_of``: its budget from the call's arrival,
never past the RPC deadline) and solves with the solver the server was given. On the way it
reports two things to the server: the instant it will answer by (so that the server kills it
only past that), and plans ahead of the answer as serialized responses (the first checked plan,
then each better one settled for the power margin while re-solves follow), so that a worker
killed or dead later still leaves an answer. A stop request from the server (a cancelled call, a
shutdown) sets the solve's stop event: the best plan so far comes back at once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, replace

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
    cores: int = 0
    """Cores this solve may use, where neither the request nor the solver settings set its
    threads (0: every core of the worker's process)."""
    budget: float = math.inf
    """Its time budget in seconds, as admitted (``head.budget_seconds``), from `arrival`."""


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
    resolve_seconds: float | None = None


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
class PlanAhead:
    """Report: the best checked plan so far, as a serialized SolveResponse labelled FALLBACK
    (each replaces the one before)."""

    response: bytes
    what: str
    """What the plan is, for the answer's detail ("the first plan")."""


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
    # Refused before it is read when reading alone would pass the budget's end. (A caller's
    # deadline shorter than that ends the call by itself: DEADLINE_EXCEEDED, as gRPC says.)
    late = pipeline.unreadable_in_time(
        request, call.solver.settings, arrival=call.arrival, budget=call.budget
    )
    if late is not None:
        return Answer(violations=((late.field, late.description),))
    violations = validate_request(request, call.limits)
    if violations:
        return Answer(violations=tuple((v.field, v.description) for v in violations))
    problem = with_cores(problem_from_proto(request, call.limits), call)
    deadline = pipeline.deadline_of(
        call.solver, problem, arrival=call.arrival, caller_end=call.caller_end
    )
    ctx.report(Due(deadline.answer_by))
    ahead = PlansAhead(call, ctx, problem)
    result = call.solver.solve(
        problem, deadline, ctx.stop, on_first_plan=ahead.first, on_better_plan=ahead.better
    )
    guard = call.solver.settings.guard_params()
    response = result_to_proto(result, problem, guard).SerializeToString()
    return Answer(response=response, summary=summary(result, problem))


def with_cores(problem: Problem, call: SolveCall) -> Problem:
    """The problem with the call's share of the cores as its threads, where neither the
    request nor the solver settings chose them. Solves side by side that each took every core
    ran four solver threads on two cores (the exact side beside each search): under 32 clients
    they answered 12 % fewer calls, proved 36 % fewer optimal and fell back twice as often
    (docs/reliability.md, "Rerun 2026-12-06: each solve its share of the cores")."""
    if call.cores <= 0 or problem.options.threads or call.solver.settings.threads:
        return problem
    return replace(problem, options=replace(problem.options, threads=call.cores))


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
        s.resolve_seconds,
    )


class PlansAhead:
    """Sends plans ahead of the answer to the server, each in a thread of its own (serializing
    a large plan takes milliseconds the solve goes on meanwhile); a plan that would arrive
    after a later one is dropped."""

    def __init__(self, call: SolveCall, ctx: CallContext, problem: Problem) -> None:
        self.call = call
        self.ctx = ctx
        self.problem = problem
        self._lock = threading.Lock()
        self._made = 0
        self._sent = 0

    def first(self, plan: Plan) -> None:
        self._start(plan, "the first plan")

    def better(self, plan: Plan) -> None:
        self._start(plan, "the best plan settled for the power margin")

    def _start(self, plan: Plan, what: str) -> None:
        with self._lock:
            self._made += 1
            order = self._made
        threading.Thread(
            target=self._send, args=(plan, what, order), name="dsfro-plan-ahead", daemon=True
        ).start()

    def _send(self, plan: Plan, what: str, order: int) -> None:
        try:
            response = plan_ahead_response(plan, self.call.arrival, self.problem, what)
            with self._lock:
                if order < self._sent:
                    return
                self._sent = order
                self.ctx.report(PlanAhead(response, what))
        except Exception:  # the answer goes on without it
            log.exception("could not send %s ahead", what)


def plan_ahead_response(
    plan: Plan, arrival: float, problem: Problem | None = None, what: str = "the first plan"
) -> bytes:
    """A plan as the answer of a solve that went no further than it (`what` it is)."""
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
        detail=what,
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
