"""Scenarios: a cluster, its power budget over time, a trace, a workload mix and the engine's
settings; the loaders of their files; the default scenarios' data (docs/simulation.md).

Files: a cluster is a ``ClusterSnapshot`` in protobuf JSON (or a whole instance file, a
``SolveRequest``, whose ``cluster`` is taken); a power schedule is JSON ``{"period_s": 86400,
"steps": [{"start_s": 0, "watts": 300000}, ...]}``; a trace is ``trace.read_trace``'s CSV.
Every loader reports all problems at once, each naming the file and the field or row, in one
``SimulationError``. The default scenarios are built in ``solver.simulate.scenarios`` from the
constants and helpers here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import json_format

from solver import resources
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import gpu_type_to_proto
from solver.app.limits import MAX_POWER_WATTS, Limits
from solver.app.validation import validate_request
from solver.files import write_text
from solver.offline.generate.cluster import build_instance_cluster
from solver.offline.generate.spec import InstanceSpec, NodeKind
from solver.perfmodel.catalog import load_gpu_catalog
from solver.simulate.core import PowerSchedule, PowerStep, SimJob, SimulationError, TraceJob
from solver.simulate.settings import EngineSettings
from solver.simulate.trace import check_trace_against, parse_trace
from solver.simulate.workload import WorkloadMix
from solver.wire import read_text

DAY_S = 86_400.0
MIN_STEP_S = 60.0
"""The shortest a power budget may hold, and the shortest period: rounds take seconds, so a
budget that changes faster cannot be followed, and each change is a round of the simulation
(a period of a millisecond made a run of hours billions of rounds)."""


@dataclass(frozen=True)
class Scenario:
    """Everything one simulation run needs besides the policy and the seed of the truth."""

    name: str
    cluster: pb.ClusterSnapshot
    power: PowerSchedule
    jobs: tuple[TraceJob, ...]
    mix: WorkloadMix
    settings: EngineSettings = field(default_factory=EngineSettings)
    """Round interval (300 s), minimum round spacing (30 s), restart cost, reference GPU type of
    the trace's durations, objective weights: the engine's."""

    def sim_jobs(self) -> list[SimJob]:
        """The trace's jobs as the policies see them (the mix, seeded)."""
        return self.mix.realize_all(self.jobs, self.cluster)


# ---------------------------------------------------------------- files


def _read_json(path: Path) -> Any:
    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise SimulationError([f"{path}: duplicate key {key!r}"])
            out[key] = value
        return out

    try:
        return json.loads(read_text(path), object_pairs_hook=no_duplicates)
    except (OSError, UnicodeDecodeError) as e:
        raise SimulationError([f"{path}: cannot read: {e}"]) from e
    except json.JSONDecodeError as e:
        raise SimulationError([f"{path}:{e.lineno}:{e.colno}: malformed JSON: {e.msg}"]) from e


_REQUEST_FIELDS = frozenset({"cluster", "jobs", "weights", "options"})


def load_cluster(path: str | Path) -> pb.ClusterSnapshot:
    """The cluster of a ClusterSnapshot file, or of an instance (SolveRequest) file.

    Validated as the service validates a request; each problem reads ``FILE:FIELD: message``
    with the field's path in the file (``nodes[3].gpu_count``, or ``cluster.nodes[3]...`` in an
    instance file)."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise SimulationError([f"{path}: expected a JSON object (a ClusterSnapshot)"])
    is_request = bool(data) and set(data) <= _REQUEST_FIELDS and "cluster" in data
    cluster = pb.ClusterSnapshot()
    try:
        if is_request:
            request = pb.SolveRequest()
            json_format.ParseDict(data, request)
            cluster.CopyFrom(request.cluster)
        else:
            json_format.ParseDict(data, cluster)
    except json_format.ParseError as e:
        kind = "SolveRequest" if is_request else "ClusterSnapshot"
        raise SimulationError([f"{path}: not a valid {kind}: {e}"]) from e
    violations = validate_request(pb.SolveRequest(cluster=cluster), Limits())
    problems = []
    for v in violations:
        if v.field.startswith("cluster"):
            where = v.field if is_request else v.field.removeprefix("cluster").lstrip(".")
            problems.append(f"{path}:{where or 'cluster'}: {v.description}")
    if problems:
        raise SimulationError(problems)
    return cluster


def cluster_json(cluster: pb.ClusterSnapshot) -> str:
    """The file text of a cluster: protobuf JSON with the proto's field names, indent 1."""
    return json_format.MessageToJson(cluster, preserving_proto_field_name=True, indent=1) + "\n"


def write_cluster(cluster: pb.ClusterSnapshot, path: str | Path) -> None:
    write_text(path, cluster_json(cluster))


def idle_watts(cluster: pb.ClusterSnapshot) -> float:
    """Power of all the cluster's GPUs idle: no budget below it can be met."""
    idle = {t.name: t.idle_watts for t in cluster.gpu_types}
    return sum(n.gpu_count * idle.get(n.gpu_type, 0.0) for n in cluster.nodes)


def tdp_watts(cluster: pb.ClusterSnapshot) -> float:
    """Power of all the cluster's GPUs at their TDP."""
    tdp = {t.name: t.tdp_watts for t in cluster.gpu_types}
    return sum(n.gpu_count * tdp.get(n.gpu_type, 0.0) for n in cluster.nodes)


def _number(x: object) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def load_power_schedule(
    path: str | Path, cluster: pb.ClusterSnapshot | None = None
) -> PowerSchedule:
    """A power budget schedule (module docstring): ``period_s`` (> 0, default one day) and
    ``steps`` with ``start_s`` in [0, period_s), strictly increasing, and ``watts`` in
    (0, 1e10] (the service's limit) or null (no budget). With ``cluster``, a budget below its
    GPUs' idle power is a problem too.
    Problems read ``FILE:FIELD: message``."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise SimulationError([f"{path}: expected a JSON object with period_s and steps"])
    problems = [f"{path}:{k}: unknown field" for k in sorted(set(data) - {"period_s", "steps"})]
    period = _number(data.get("period_s", DAY_S))
    if period is None or period < MIN_STEP_S:
        problems.append(
            f"{path}:period_s: must be a number of seconds >= {MIN_STEP_S:g}, "
            f"got {data.get('period_s')!r}"
        )
        period = math.inf
    raw = data.get("steps")
    if not isinstance(raw, list):
        problems.append(f"{path}:steps: must be a list of {{start_s, watts}} objects")
        raw = []
    idle = idle_watts(cluster) if cluster is not None else 0.0
    steps: list[PowerStep] = []
    for i, s in enumerate(raw):
        where = f"{path}:steps[{i}]"
        if not isinstance(s, dict):
            problems.append(f"{where}: must be an object with start_s and watts")
            continue
        problems += [f"{where}.{k}: unknown field" for k in sorted(set(s) - {"start_s", "watts"})]
        start = _number(s.get("start_s"))
        if start is None or not 0 <= start < period:
            problems.append(f"{where}.start_s: must be in [0, period_s), got {s.get('start_s')!r}")
        elif steps and start < steps[-1].start_s + MIN_STEP_S:
            previous = steps[-1].start_s
            problems.append(
                f"{where}.start_s: must be at least {MIN_STEP_S:g} s after the previous step's "
                f"{previous:g}"
            )
        elif steps and start > steps[0].start_s + period - MIN_STEP_S:
            wrap = steps[0].start_s + period
            problems.append(
                f"{where}.start_s: must be at least {MIN_STEP_S:g} s before the next period's "
                f"first step (at {wrap:g})"
            )
        watts = _number(s.get("watts"))
        if "watts" not in s or (s["watts"] is not None and (watts is None or watts <= 0)):
            got = s.get("watts")
            problems.append(f"{where}.watts: must be a number > 0 or null, got {got!r}")
        elif watts is not None and watts > MAX_POWER_WATTS:
            problems.append(f"{where}.watts: must be at most {MAX_POWER_WATTS:g} W, got {watts:g}")
        elif watts is not None and watts < idle:
            problems.append(
                f"{where}.watts: {watts:g} W is below the idle power of the cluster's GPUs "
                f"({idle:g} W)"
            )
        if start is not None:
            steps.append(PowerStep(start, watts))
    if problems:
        raise SimulationError(problems)
    return PowerSchedule(tuple(steps), period)


def power_schedule_json(schedule: PowerSchedule) -> str:
    steps = [{"start_s": _plain(s.start_s), "watts": _plain(s.watts)} for s in schedule.steps]
    return json.dumps({"period_s": _plain(schedule.period_s), "steps": steps}, indent=1) + "\n"


def _plain(x: float | None) -> float | int | None:
    return int(x) if x is not None and x.is_integer() else x


def write_power_schedule(schedule: PowerSchedule, path: str | Path) -> None:
    write_text(path, power_schedule_json(schedule))


def load_scenario(
    trace: str | Path,
    cluster: str | Path,
    power: str | Path | None = None,
    *,
    mix: WorkloadMix | None = None,
    settings: EngineSettings | None = None,
    name: str | None = None,
) -> Scenario:
    """A scenario from its files; every problem of every file in one SimulationError."""
    problems: list[str] = []
    snapshot: pb.ClusterSnapshot | None = None
    schedule = PowerSchedule()
    try:
        snapshot = load_cluster(cluster)
    except SimulationError as e:
        problems += e.problems
    parsed = parse_trace(trace)
    problems += parsed.problems
    jobs = parsed.good_jobs()
    if power is not None:
        try:
            schedule = load_power_schedule(power, snapshot)
        except SimulationError as e:
            problems += e.problems
    mix = mix or WorkloadMix()
    if snapshot is not None and parsed.jobs:  # faulty rows too: their other columns
        problems += check_trace_against(parsed.jobs, trace, snapshot, mix, parsed.bad)
    if problems or snapshot is None:
        raise SimulationError(problems)
    return Scenario(
        name or Path(trace).stem,
        snapshot,
        schedule,
        tuple(jobs),
        mix,
        settings or EngineSettings(),
    )


# ---------------------------------------------------------------- the default scenarios

PHILLY_WINDOW = resources.data_dir() / "philly" / "trace_window.csv"
PHILLY_START = 0
PHILLY_COUNT = 1100
"""Scenario (a) replays the first 1,100 jobs of the bundled window (chosen as
data/philly/SOURCE.md says): 44.5 hours of submissions, 19,744 GPU-hours, the last job done 4.09
days after the first submission if all started at once, 1 to 32 GPUs per job."""

PHILLY_NODES = (
    NodeKind("A100-80GB", 8, 16.0),
    NodeKind("P100-16GB", 8, 16.0),
    NodeKind("T4", 4, 32.0, nodes_per_rack=16),
    NodeKind("V100-16GB", 8, 16.0),
)
"""512 GPUs, 128 of each of four types: three with measured profiles (Gavel's P100 and V100,
Pollux's T4 on its 4-GPU nodes) and one current type for the larger models (A100-80GB)."""
PHILLY_BUDGET = ((0.0, 0.6), (9 * 3600.0, 0.5), (21 * 3600.0, 0.6))
"""(start of step in the day, budget as a fraction of the GPUs' TDP sum): 60 %, and 50 % in the
peak hours 09:00-21:00 of the simulation clock (which starts at the window's first submission).
A scenario choice, not a measurement: with every GPU busy the cluster draws up to its TDP sum,
so either cap binds whenever most GPUs run (docs/simulation.md)."""
PHILLY_REFERENCE = "V100-16GB"
"""The type the Philly durations are taken to be measured on (a choice: the type with the most
measured workloads; the trace does not say which GPUs Philly's jobs ran on)."""

LLM_NODES = (NodeKind("A100-80GB", 8, 192.0), NodeKind("H100-80GB", 8, 64.0))
"""2,048 GPUs (a choice): 1,536 A100-80GB (the largest jobs, 1,024 GPUs, fit only there) and
512 H100-80GB, in 8-GPU servers."""
LLM_REFERENCE = "A100-80GB"

POWER_HEADROOM = 0.0
"""Flat share of the budget the scheduler keeps back, the same for every policy and the same as
for runs from files: none, the power margin (EngineSettings.power_guard) sizes the headroom by
the planned draw's uncertainty instead. Before it: 0.07, from the truth's per-job power error
(sigma 0.15) over ~30 jobs (2.33 sigma / sqrt(30) = 6.4 %, rounded up); ``--power-guard off
--power-headroom 0.07`` reproduces it (docs/evaluation.md, "Power cap")."""


def build_cluster(kinds: Sequence[NodeKind]) -> pb.ClusterSnapshot:
    """Nodes of the given kinds (share = node count), racks of ``nodes_per_rack`` nodes of one
    type, network bandwidth and GPU figures from the instance generator and the catalog, no
    unavailable GPUs and no budget."""
    spec = InstanceSpec(
        name="sim",
        num_nodes=round(sum(k.share for k in kinds)),
        num_jobs=0,
        node_kinds=tuple(kinds),
        unavailable_share=0.0,
    )
    catalog = load_gpu_catalog()
    built = build_instance_cluster(spec, catalog, np.random.default_rng(0))
    cluster = pb.ClusterSnapshot()
    cluster.gpu_types.extend(gpu_type_to_proto(catalog[t]) for t in built.types())
    cluster.nodes.extend(built.nodes)
    return cluster


def daily_budget(
    cluster: pb.ClusterSnapshot, steps: Sequence[tuple[float, float]]
) -> PowerSchedule:
    """A daily schedule of budgets given as fractions of the cluster's TDP sum."""
    full = tdp_watts(cluster)
    return PowerSchedule(tuple(PowerStep(s, round(f * full, 1)) for s, f in steps), DAY_S)


def checked_scenario(scenario: Scenario, where: str) -> Scenario:
    problems = check_trace_against(scenario.jobs, where, scenario.cluster, scenario.mix)
    if problems:
        raise SimulationError(problems)
    return scenario
