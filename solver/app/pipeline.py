"""The one path of a solve, shared by every door (service, CLI, batch, sweep):

    request (+ profile, + overrides) -> validated domain problem -> solve -> result -> protobuf

The profile fills what the request leaves unset, the overrides (command-line flags, a batch's
or a sweep's grid point) win over both. Validation names every bad field; conversion gives the
plain domain problem; the ``Solver`` the door was given answers it within the call's
``Deadline``. A door adds only what is its own: the service its admission, worker processes
and error statuses, the CLI its file reading and printing.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import problem_from_proto, result_to_proto
from solver.app.convert_mig import geometry_source
from solver.app.limits import Limits
from solver.app.overrides import NO_OVERRIDES as NO_OVERRIDES
from solver.app.overrides import Overrides as Overrides
from solver.app.overrides import prepare as prepare
from solver.app.profile import Profile
from solver.app.validation import FieldViolation, validate_request
from solver.core.deadline import Deadline, first_plan_estimate, idle_read_seconds
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from solver.domain import Problem, SolveResult
from solver.perfmodel.configs import build_config_set
from solver.perfmodel.guard import GuardParams
from solver.perfmodel.throughput import compute_efficiency, efficiency_family
from solver.search.state import avoided_nodes


class InvalidRequest(ValueError):
    """The request breaks the wire contract; ``violations`` names every bad field."""

    def __init__(self, violations: list[FieldViolation]) -> None:
        first = f"{violations[0].field}: {violations[0].description}" if violations else ""
        super().__init__(f"invalid request ({len(violations)} problems): {first}")
        self.violations = violations


def to_problem(request: pb.SolveRequest, limits: Limits) -> Problem:
    """The validated domain problem of a request; InvalidRequest if it breaks the contract."""
    violations = validate_request(request, limits)
    if violations:
        raise InvalidRequest(violations)
    return problem_from_proto(request, limits)


def deadline_of(
    solver: Solver,
    problem: Problem,
    *,
    arrival: float,
    caller_end: float | None = None,
    read_seconds: float | None = None,
) -> Deadline:
    """The call's deadline (solver.core.deadline): its budget from `arrival`, less the time to
    answer, never past `caller_end` (both time.monotonic() instants)."""
    read = time.monotonic() - arrival if read_seconds is None else read_seconds
    return Deadline.for_call(
        solver.settings,
        arrival=arrival,
        budget_seconds=problem.options.time_budget_seconds,
        jobs=len(problem.jobs),
        caller_end=caller_end,
        read_seconds=read,
    )


def idle_read_of(request: pb.SolveRequest, settings: SolverSettings) -> float:
    """What reading `request` takes on an idle machine (``idle_read_seconds``): by its jobs,
    their measured profile points and the nodes they name."""
    jobs = request.jobs
    points = sum(len(j.profile.points) for j in jobs)
    names = sum(len(j.excluded_nodes) for j in jobs)
    return idle_read_seconds(settings, len(jobs), points, names)


def unreadable_in_time(
    request: pb.SolveRequest, settings: SolverSettings, *, arrival: float, budget: float
) -> FieldViolation | None:
    """Why `request`, given `budget` seconds from `arrival` (a time.monotonic() instant), cannot
    be answered within it: reading it alone (``idle_read_of``) would end past the budget's end
    and the kill grace after it (``kill_grace_seconds``: an answer a little late beats none),
    even on an idle machine. Its worker would be killed mid-read and the answer made by reading
    it again: at 500,000 profile points and 1 s, 3.1 s after the call. None when it can."""
    now = time.monotonic()
    need = idle_read_of(request, settings)
    if now + need <= arrival + budget + settings.kill_grace_seconds:
        return None
    jobs = len(request.jobs)
    at_least = math.ceil(10 * (now - arrival + need + first_plan_estimate(settings, jobs))) / 10
    left = max(arrival + budget - now, 0.0)
    return FieldViolation(
        "options.time_budget",
        f"reading this request ({jobs} jobs, their profile points and named nodes) takes about "
        f"{need:.2f} s on an idle server, more than the {left:.2f} s left of its {budget:g} s "
        f"budget: give it at least {at_least:.1f} s to read it and make a first plan, more for "
        "a better one",
    )


@dataclass(frozen=True)
class Solved:
    problem: Problem
    result: SolveResult
    guard: GuardParams | None = None
    """The solver's power-margin parameters (the plan's PowerMargin is sized by them)."""

    def response(self) -> pb.SolveResponse:
        return result_to_proto(self.result, self.problem, self.guard)


def solve_request(
    request: pb.SolveRequest,
    solver: Solver,
    *,
    profile: Profile | None = None,
    overrides: Overrides = NO_OVERRIDES,
    limits: Limits | None = None,
    arrival: float | None = None,
    stop: threading.Event | None = None,
) -> Solved:
    """The whole path for one request: its budget counts from `arrival` (default: now), so
    that reading it spends it too."""
    arrival = time.monotonic() if arrival is None else arrival
    problem = to_problem(prepare(request, profile, overrides), limits or Limits())
    deadline = deadline_of(solver, problem, arrival=arrival)
    return Solved(problem, solver.solve(problem, deadline, stop), solver.settings.guard_params())


def validate_snapshot(
    request: pb.SolveRequest, limits: Limits, profile: Profile | None = None
) -> pb.ValidateSnapshotResponse:
    """Every problem of the request as field violations, or, when it is valid, each job's
    number of configurations and best throughput (ValidateSnapshot and ``dsfro validate``)."""
    request = prepare(request, profile)
    try:
        problem = to_problem(request, limits)
    except InvalidRequest as e:
        return pb.ValidateSnapshotResponse(
            valid=False,
            violations=[
                pb.FieldViolation(field=v.field, description=v.description) for v in e.violations
            ],
        )
    config_set = build_config_set(problem)
    avoided = avoided_nodes(problem)  # barred or disliked, per job that dislikes some node
    nodes = len(problem.cluster.nodes)
    return pb.ValidateSnapshotResponse(
        valid=True,
        jobs=[
            pb.JobSummary(
                job=j.name,
                num_configurations=len(config_set.by_job.get(j.name, ())),
                best_samples_per_second=config_set.best_samples_per_second.get(j.name, 0.0),
                usable_nodes=len(problem.cluster.nodes) - len(j.barred_nodes),
                preferred_nodes=nodes - len(avoided[j.name]) if j.name in avoided else None,
            )
            for j in problem.jobs
        ],
        gpu_types=[
            pb.GpuTypeSummary(
                gpu_type=t.name,
                efficiency_family=efficiency_family(problem.cluster.gpu_types[t.name]) or "",
                compute_efficiency=compute_efficiency(problem.cluster.gpu_types[t.name]),
                mig_geometry=geometry_source(t),
            )
            for t in request.cluster.gpu_types
        ],
    )
