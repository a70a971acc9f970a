"""Checks of a scenario that need its settings or its jobs' configurations, made before a run
so that input no plan could ever meet is an error naming the field or row, not a failure (or a
stalled run) hours later.

- ``budget_problems``: every cluster budget of the scenario, less the headroom the scheduler keeps
  back (``EngineSettings.power_headroom``), must hold the idle power of all the cluster's GPUs
  and every node's base power (``--node-base-watts``; every node is up at the start): the
  request of a round says budget x (1 - headroom), and the service rejects a budget below the
  floor (each round would end in an internal error).
- ``unrunnable_problems``: every job must fit the largest budget less the headroom in at least
  one of its configurations (any GPU type, count and clock the solver considers), counting the
  idle power of the GPUs it does not hold, as the checker does. A job that fits none would wait
  for ever: the run would stall with it unfinished, whatever the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app import pipeline
from solver.app.limits import Limits
from solver.domain import Problem
from solver.perfmodel.configs import build_config_set
from solver.simulate.core import PowerSchedule, SimJob, SimulationError
from solver.simulate.rounds import LiveJob, Requests
from solver.simulate.scenario import idle_watts
from solver.simulate.settings import EngineSettings


def _budgets(
    cluster: pb.ClusterSnapshot, schedule: PowerSchedule, schedule_name: str, cluster_name: str
) -> list[tuple[str, float | None]]:
    """(field, watts) of every budget the run can be under; watts None: no budget."""
    if schedule.steps:
        steps = enumerate(schedule.steps)
        return [(f"{schedule_name}:steps[{i}].watts", s.watts) for i, s in steps]
    if cluster.HasField("power_budget_watts"):
        return [(f"{cluster_name}:power_budget_watts", cluster.power_budget_watts)]
    return []


def floor_watts(cluster: pb.ClusterSnapshot, node_base_watts: float = 0.0) -> float:
    """What the cluster draws with no job and every node up: its GPUs' idle power and each
    node's base power."""
    return idle_watts(cluster) + node_base_watts * len(cluster.nodes)


def budget_problems(
    cluster: pb.ClusterSnapshot,
    schedule: PowerSchedule,
    headroom: float,
    *,
    schedule_name: str = "power schedule",
    cluster_name: str = "cluster",
    node_base_watts: float = 0.0,
) -> list[str]:
    """One line per budget that, less the headroom, is below the floor of the cluster (its
    GPUs' idle power and its nodes' base power), naming its field (``p.json:steps[1].watts``,
    or the cluster's ``power_budget_watts`` when the schedule is empty)."""
    idle = floor_watts(cluster, node_base_watts)
    what = "the idle power of the cluster's GPUs" + (
        " and its nodes' base power" if node_base_watts else ""
    )
    problems = []
    for where, watts in _budgets(cluster, schedule, schedule_name, cluster_name):
        if watts is None or watts * (1 - headroom) >= idle:
            continue
        problems.append(
            f"{where}: {watts:g} W less the power headroom of {headroom * 100:g} % is "
            f"{watts * (1 - headroom):g} W, below {what} "
            f"({idle:g} W): no plan can meet it; give at least "
            f"{idle / (1 - headroom):.1f} W or a smaller headroom (--power-headroom)"
        )
    return problems


def scenario_problem(
    cluster: pb.ClusterSnapshot, jobs: Sequence[SimJob], settings: EngineSettings, seed: int = 0
) -> Problem:
    """Every job of the run in one snapshot of the whole cluster, without a budget: what their
    configurations are enumerated from. SimulationError if the service would reject it."""
    unbudgeted = pb.ClusterSnapshot()
    unbudgeted.CopyFrom(cluster)
    unbudgeted.ClearField("power_budget_watts")
    request = Requests(unbudgeted, PowerSchedule(), settings, seed).request(
        0.0, [LiveJob(j, 1.0, 1.0) for j in jobs], unbudgeted
    )
    limits = Limits(max_time_budget_seconds=max(300.0, settings.solver_budget_s))
    try:
        return pipeline.to_problem(request, limits)
    except pipeline.InvalidRequest as e:
        raise SimulationError(
            [f"the scenario as one snapshot: {v.field}: {v.description}" for v in e.violations]
        ) from e


def unrunnable_problems(
    problem: Problem,
    cluster: pb.ClusterSnapshot,
    jobs: Sequence[SimJob],
    schedule: PowerSchedule,
    headroom: float,
    where: Callable[[SimJob], str],
    *,
    schedule_name: str = "power schedule",
    cluster_name: str = "cluster",
    node_base_watts: float = 0.0,
) -> list[str]:
    """One line per job that fits the run's largest budget, less the headroom, in none of its
    configurations (those of ``problem``, e.g. ``scenario_problem``'s); ``where(job)`` starts
    the line (e.g. ``t.csv:7``). Nothing without a budget, or when some step has none."""
    budgets = _budgets(cluster, schedule, schedule_name, cluster_name)
    if not budgets or any(w is None for _, w in budgets):
        return []
    field, largest = max(((f, w) for f, w in budgets if w is not None), key=lambda fw: fw[1])
    told = largest * (1 - headroom)
    idle = floor_watts(cluster, node_base_watts)
    room = told - idle
    configs = build_config_set(problem)
    idle_of = {t.name: t.idle_watts for t in cluster.gpu_types}
    problems = []
    for job in jobs:
        options = [c for c in configs.by_job.get(job.name, ()) if not c.kept_only]
        if not options:
            continue  # no configuration at all: the trace check's business
        least = min(c.watts - idle_of.get(c.gpu_type, 0.0) * c.num_gpus for c in options)
        if least > room + 1e-9 * max(told, 1.0):
            problems.append(
                f"{where(job)}: job {job.name!r} fits no power budget of the run: in every "
                f"configuration it draws at least {least:.1f} W above its GPUs' idle power, and "
                f"the largest budget ({field}, {largest:g} W) less the headroom of "
                f"{headroom * 100:g} % leaves {room:.1f} W above the cluster's floor, its GPUs' "
                f"idle power and its nodes' base power ({idle:g} W)"
            )
    return problems
