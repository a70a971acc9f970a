"""DSFRO as a policy: the round's snapshot sent as it is, in this process through the same
pipeline as the service, or over gRPC to a running server (``server``), the way a real
scheduler calls it. Ablations change only what DSFRO may decide, through the request:

- ``dsfro-no-dvfs``: every GPU type offers only its top clock;
- ``dsfro-fixed-shape``: each job gets exactly the GPUs it asked for (min = max = requested);
- ``dsfro-heuristic``: the heuristic alone (``BACKEND_HEURISTIC``);
- ``dsfro-whole``: whole GPUs only (no job may run on a MIG instance: the plan never
  partitions a GPU). ``dsfro`` itself uses slices where the snapshot allows them.
- ``dsfro-carbon-blind``: the requests without the grid forecast (``dsfro`` itself defers
  waiting jobs to cleaner hours where the scenario has a grid; docs/carbon.md).
- ``dsfro-floor``: power saving's ``price_node_floor`` on (each busy node's floor charged:
  docs/objective.md, "Node floor"; ``dsfro`` leaves it as the request has it, off by default).

Fairness variants send the request with a fairness mode (docs/objective.md, "Fairness"), the
round interval as its horizon: ``dsfro-maxmin`` (max-min by tenant), ``dsfro-prop``
(proportional by job), ``dsfro-drf`` (DRF by tenant), ``dsfro-ftf`` (finish-time fairness by
job), ``dsfro-ftf-tenant`` (finish-time fairness by tenant). The engine fills every job's and
queue's attained service and each job's age.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import convert_mig, convert_power, pipeline
from solver.app.convert import (
    allocations_from_proto,
    backend_to_proto,
    enum_label,
    fairness_to_proto,
    requested_time_budget,
)
from solver.app.limits import Limits
from solver.client import Client, DsfroError, RetryPolicy
from solver.client.client import TRANSFER_ALLOWANCE_SECONDS
from solver.client.connection import Connection
from solver.core.solver import Solver
from solver.domain import Allocation, Backend, Fairness, JobState, Problem, Termination
from solver.simulate.core import Decision, RoundInput, SimulationError

SERVER_WAIT_SECONDS = TRANSFER_ALLOWANCE_SECONDS + 60.0
"""How long a round over gRPC may take beyond its time budget: the client's transfer
allowance, and a minute's wait for a service that is unreachable (restarting, a rolling
update) or whose slots are full, before the run stops. Simulated time stands still meanwhile;
the wait shows in the round's wall time."""
SERVER_RETRY = RetryPolicy(max_attempts=30, initial_backoff=0.5, max_backoff=5.0)
"""The product client's retries (UNAVAILABLE, RESOURCE_EXHAUSTED with a hint), enough
attempts to fill the wait."""


@dataclass(frozen=True)
class DsfroOptions:
    server: str | None = None
    """HOST:PORT of a running DSFRO service; None: solve in this process."""
    backend: Backend = Backend.AUTO
    dvfs: bool = True
    """False: only the top clock of each GPU type is offered."""
    adaptive_shape: bool = True
    """False: every job gets exactly its requested GPU count."""
    fairness: Fairness = Fairness()  # noqa: RUF009 (immutable)
    """The fairness mode and scope; the horizon is set to the round interval."""
    fairness_weight: float | None = None
    """The fairness term's weight; None: the request's (default 1)."""
    slices: bool = True
    """False: no job may run on a MIG instance (whole GPUs only)."""
    carbon: bool = True
    """False: the requests carry no grid forecast (carbon-blind DSFRO)."""
    node_floor: bool = False
    """True: the node floor is priced (PowerSaving.price_node_floor on)."""
    server_wait_s: float = SERVER_WAIT_SECONDS
    """Over gRPC: how long a round may take beyond its time budget before the run stops."""
    connection: Connection = Connection()  # noqa: RUF009 (immutable)
    """Over gRPC: TLS and the bearer token's source."""


class DsfroPolicy:
    def __init__(
        self,
        name: str = "dsfro",
        options: DsfroOptions | None = None,
        solver: Solver | None = None,
    ) -> None:
        """`solver` answers in this process (default settings when None; closed with the
        policy when it made it)."""
        self._name = name
        self.options = options or DsfroOptions()
        self._own = solver is None
        self.solver = solver if solver is not None else Solver()
        self._client: Client | None = None

    @property
    def name(self) -> str:
        return self._name

    def decide(self, round_input: RoundInput) -> Decision:
        started = time.perf_counter()
        if self.options.server is None:
            # The round's budget counts from the call, as an RPC deadline would.
            arrival = time.monotonic()
            problem = self.restricted(round_input)
            deadline = pipeline.deadline_of(self.solver, problem, arrival=arrival)
            result = self.solver.solve(problem, deadline)
            allocations = {
                a.job: Allocation(a.config.shape, a.config.sm_clock_mhz, a.placement, a.mig)
                for a in result.plan.assignments
                if a.state is JobState.RUNNING and a.config is not None
            }
            changes = result.plan.layout_changes
            actions = result.plan.power_actions
            detail = f"{result.stats.termination.name} ({result.stats.backend_used.name})"
            infeasible = result.stats.termination is Termination.INFEASIBLE
        else:
            response = self._call(self.adapt(round_input), round_input.now_s)
            allocations = {
                name: a for name, a in allocations_from_proto(response.plan).items() if a
            }
            changes = convert_mig.changes_from_proto(response.plan)
            actions = convert_power.actions_from_proto(response.plan)
            s = response.stats
            infeasible = s.termination == pb.TERMINATION_INFEASIBLE
            detail = (
                f"{enum_label(pb.Termination, s.termination)} "
                f"({enum_label(pb.Backend, s.backend_used)})"
            )
        if infeasible:
            # No plan (the request contradicts itself): the scheduler keeps what runs and
            # starts nothing, as dsfro-slurm does, rather than stop every job.
            allocations = {j.name: j.current for j in round_input.problem.jobs if j.current}
            changes, actions = (), ()
        return Decision(allocations, time.perf_counter() - started, detail, changes, actions)

    def restricted(self, round_input: RoundInput) -> Problem:
        """The round's problem with this variant's backend and restrictions: the engine's
        validated problem as it is unless the variant restricts clocks or shapes."""
        o = self.options
        if o.dvfs and o.adaptive_shape:
            p = round_input.problem
            p = replace(p, options=replace(p.options, backend=o.backend))
            if not o.slices:
                p = replace(p, jobs=tuple(replace(j, slices=None) for j in p.jobs))
            if not o.carbon:
                p = replace(p, cluster=replace(p.cluster, grid=None))
            if o.node_floor:
                saving = replace(p.cluster.power_saving, price_node_floor=True)
                p = replace(p, cluster=replace(p.cluster, power_saving=saving))
            if not o.fairness.active:
                return p
            weights = p.weights
            if o.fairness_weight is not None:
                weights = replace(weights, fairness=o.fairness_weight)
            fair = replace(o.fairness, horizon_seconds=round_input.round_length_s)
            return replace(p, fairness=fair, weights=weights)
        return pipeline.to_problem(self.adapt(round_input), Limits())

    def adapt(self, round_input: RoundInput) -> pb.SolveRequest:
        """The round's request with this variant's restrictions."""
        o = self.options
        request = pb.SolveRequest()
        request.CopyFrom(round_input.request)
        request.options.backend = backend_to_proto(o.backend)
        if o.fairness.active:
            fair = replace(o.fairness, horizon_seconds=round_input.round_length_s)
            request.fairness.CopyFrom(fairness_to_proto(fair))
            if o.fairness_weight is not None:
                request.weights.fairness = o.fairness_weight
        if not o.dvfs:
            top_clocks(request)
        if not o.adaptive_shape:
            for job in request.jobs:
                n = round_input.history[job.name].requested_gpus
                job.min_gpus = job.max_gpus = n
        if not o.slices:
            for job in request.jobs:
                job.ClearField("slices")
        if not o.carbon:
            request.cluster.ClearField("grid")
        if o.node_floor:
            request.cluster.power_saving.price_node_floor = True
        return request

    def _call(self, request: pb.SolveRequest, now_s: float) -> pb.SolveResponse:
        """The service's answer, as a scheduler gets it: through the product's client, with its
        retries; SimulationError naming the service and the round when none came."""
        server = self.options.server
        assert server is not None
        if self._client is None:
            try:
                self._client = self.options.connection.client(
                    server, retry=SERVER_RETRY, max_message_bytes=-1
                )
            except ValueError as e:  # an unreadable TLS file, a token in plaintext
                raise SimulationError([f"{self.name}: the DSFRO service at {server}: {e}"]) from e
        budget = requested_time_budget(request.options) or 0.0
        timeout = budget + self.options.server_wait_s
        try:
            return self._client.solve(request, timeout=timeout)
        except DsfroError as e:
            raise SimulationError(
                [
                    f"{self.name}: the round at t={now_s:.0f} s got no plan from the DSFRO "
                    f"service at {server} (after {e.attempts} attempt(s), within "
                    f"{timeout:.0f} s): {e}"
                ]
            ) from e

    def close(self) -> None:
        if self._own:
            self.solver.close()
        if self._client is not None:
            self._client.close()
            self._client = None


def top_clocks(request: pb.SolveRequest) -> None:
    """Every GPU type at its top clock alone: running jobs moved to it, and profile points at
    other clocks dropped (a slice job's points and a profile from what a job showed cover every
    clock; a point without a clock is at the top one)."""
    top = {t.name: max(t.sm_clocks_mhz) for t in request.cluster.gpu_types if t.sm_clocks_mhz}
    for t in request.cluster.gpu_types:
        if t.name in top:
            del t.sm_clocks_mhz[:]
            t.sm_clocks_mhz.append(top[t.name])
    for job in request.jobs:
        if job.HasField("current_allocation") and job.current_allocation.gpu_type in top:
            job.current_allocation.sm_clock_mhz = top[job.current_allocation.gpu_type]
        if job.HasField("profile"):
            kept = pb.ThroughputProfile()
            kept.points.extend(
                point
                for point in job.profile.points
                if point.sm_clock_mhz in (0, top.get(point.gpu_type, point.sm_clock_mhz))
            )
            job.profile.ClearField("points")
            job.profile.MergeFrom(kept)
