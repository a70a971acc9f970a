"""``dsfro sweep``: one snapshot re-solved across a grid of objective weights.

Every combination of the ``--weight NAME=V1,V2,...`` values is one point: the request with
those weights (the other weights as the request, then the profile, then the defaults set them)
solved once. Each plan is placed by

- cluster throughput, normalised: ``sum_j w_j u_j / sum_j w_j`` (the objective's throughput
  term over the total job weight: 1 when every job runs as fast as it can at all), and
- power drawn: the watts of the running jobs (their GPUs at the plan's clocks; idle GPUs left
  out).

A plan is on the Pareto front when no other plan has at least its throughput for at most its
power and is better in one of them. Equal plans (same throughput and power) count once, at the
first grid point that found them. Infeasible snapshots and failed solves have no place.

Outputs, in ``--out DIR``: ``<prefix>.png`` (the trade-off figure), ``<prefix>.md`` (the points
and, between neighbouring points of the front, the jobs whose clock, GPU type, parallelism or
state changed) and ``<prefix>.csv`` (one row per point); the prefix defaults to ``sweep``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from solver import orchestrator
from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.batch import Progress, make_batch_executor
from solver.convert import (
    RequestFileError,
    backend_from_proto,
    duration_to_proto,
    load_request_json,
    problem_from_proto,
)
from solver.domain import JobState, Termination
from solver.executor import Executor, available_cores
from solver.profile import (
    WEIGHT_KEYS,
    Profile,
    apply_profile,
    parse_backend,
    parse_duration,
    wire_backend,
)
from solver.report import markdown_table
from solver.validation import Limits, duration_seconds, validate_request

EPS = 1e-9
"""Relative tolerance for equal throughput or power."""
SHORT = {"throughput": "T", "energy": "E", "migration": "M", "locality": "L", "deadline": "D"}


class SweepError(Exception):
    """Bad arguments or input: exit 2."""


# ---------------------------------------------------------------- the grid


def parse_weight_spec(text: str) -> tuple[str, list[float]]:
    """``energy=0,0.05,0.1`` -> ("energy", [0.0, 0.05, 0.1]); ValueError says what is wrong."""
    name, sep, values = text.partition("=")
    name = name.strip()
    if not sep:
        raise ValueError(f"expected NAME=V1,V2,... got {text!r}")
    if name not in WEIGHT_KEYS:
        raise ValueError(f"unknown weight {name!r}; one of {', '.join(WEIGHT_KEYS)}")
    out: list[float] = []
    for v in values.split(","):
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"{name}: invalid number {v.strip()!r}") from None
        if not (math.isfinite(x) and x >= 0):
            raise ValueError(f"{name}: weights must be finite and >= 0, got {v.strip()}")
        out.append(x)
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: repeated value")
    return name, out


def weight_grid(axes: Sequence[tuple[str, Sequence[float]]]) -> list[dict[str, float]]:
    """Every combination of the axes' values, the first axis varying slowest."""
    names = [n for n, _ in axes]
    if len(set(names)) != len(names):
        raise ValueError("a weight is given twice")
    return [
        dict(zip(names, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))
    ]


# ---------------------------------------------------------------- one point (in a worker)


@dataclass(frozen=True)
class JobChoice:
    job: str
    state: str
    gpu_type: str = ""
    shape: str = ""
    """dp x tp x pp."""
    clock_mhz: int = 0
    gpus: int = 0
    watts: float = 0.0

    def describe(self) -> tuple[str, str, str, str]:
        """(state, GPU type, shape, clock) as table cells."""
        if self.state != "RUNNING":
            return (self.state, "-", "-", "-")
        return (self.state, self.gpu_type, self.shape, str(self.clock_mhz))


@dataclass(frozen=True)
class SweepPoint:
    index: int
    swept: dict[str, float]
    """The weights this point sets (the grid's axes)."""
    weights: dict[str, float]
    """Every effective weight."""
    termination: str = ""
    objective: float = 0.0
    throughput: float = 0.0
    """Normalised: sum_j w_j u_j / sum_j w_j."""
    power_w: float = 0.0
    gpus_used: int = 0
    jobs: tuple[JobChoice, ...] = ()
    error: str | None = None

    @property
    def placed(self) -> bool:
        """Has a plan to place on the figure."""
        return self.error is None and self.termination != Termination.INFEASIBLE.name

    def label(self) -> str:
        return ", ".join(f"{SHORT[k]}={v:g}" for k, v in self.swept.items())


@dataclass(frozen=True)
class SweepTask:
    index: int
    swept: dict[str, float]
    request: bytes


def solve_point(task: SweepTask) -> SweepPoint:
    """Solve one grid point (top-level: runs in worker processes)."""
    req = pb.SolveRequest.FromString(task.request)
    weights: dict[str, float] = {}
    try:
        problem = problem_from_proto(req, Limits())
        weights = {k: getattr(problem.weights, k) for k in WEIGHT_KEYS}
        result = orchestrator.solve(problem)
    except Exception as e:  # reported with the point
        return SweepPoint(task.index, task.swept, weights, error=f"{type(e).__name__}: {e}")
    total_weight = sum(j.weight for j in problem.jobs) or 1.0
    jobs = []
    for a in sorted(result.plan.assignments, key=lambda a: a.job):
        c = a.config
        if a.state is JobState.RUNNING and c is not None:
            s = c.shape
            jobs.append(
                JobChoice(
                    a.job,
                    "RUNNING",
                    c.gpu_type,
                    f"{s.data_parallel}x{s.tensor_parallel}x{s.pipeline_parallel}",
                    c.sm_clock_mhz,
                    c.num_gpus,
                    c.watts,
                )
            )
        else:
            jobs.append(JobChoice(a.job, "QUEUED"))
    return SweepPoint(
        index=task.index,
        swept=task.swept,
        weights=weights,
        termination=result.stats.termination.name,
        objective=result.plan.objective.total,
        throughput=result.plan.objective.throughput / total_weight,
        power_w=sum(j.watts for j in jobs),
        gpus_used=sum(j.gpus for j in jobs),
        jobs=tuple(jobs),
    )


# ---------------------------------------------------------------- the front


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= EPS * max(1.0, abs(a), abs(b))


def same_place(a: SweepPoint, b: SweepPoint) -> bool:
    return _close(a.throughput, b.throughput) and _close(a.power_w, b.power_w)


def dominates(a: SweepPoint, b: SweepPoint) -> bool:
    """`a` has at least `b`'s throughput for at most its power, and is better in one."""
    at_least = a.throughput >= b.throughput or _close(a.throughput, b.throughput)
    at_most = a.power_w <= b.power_w or _close(a.power_w, b.power_w)
    return at_least and at_most and not same_place(a, b)


def pareto_front(points: Sequence[SweepPoint]) -> list[int]:
    """Indices (into `points`) of the non-dominated plans, by power ascending; of plans in the
    same place only the first counts."""
    placed = [p for p in points if p.placed]
    distinct: list[SweepPoint] = []
    for p in placed:
        if not any(same_place(p, q) for q in distinct):
            distinct.append(p)
    front = [p for p in distinct if not any(dominates(q, p) for q in distinct)]
    front.sort(key=lambda p: (p.power_w, -p.throughput))
    position = {id(p): i for i, p in enumerate(points)}
    return [position[id(p)] for p in front]


@dataclass(frozen=True)
class Change:
    step: str
    job: str
    before: JobChoice
    after: JobChoice

    def cells(self) -> list[str]:
        def cell(a: str, b: str) -> str:
            return a if a == b else f"{a} -> {b}"

        return [self.step, self.job] + [
            cell(a, b) for a, b in zip(self.before.describe(), self.after.describe(), strict=True)
        ]


def front_changes(points: Sequence[SweepPoint], front: Sequence[int]) -> list[Change]:
    """Jobs whose state, GPU type, parallelism or clock differ between neighbouring front
    points (placement alone is not a change here)."""
    out: list[Change] = []
    for a, b in itertools.pairwise(front):
        pa, pb_ = points[a], points[b]
        step = f"#{pa.index} ({pa.label()}) -> #{pb_.index} ({pb_.label()})"
        before = {j.job: j for j in pa.jobs}
        for after in pb_.jobs:
            prev = before.get(after.job)
            if prev is not None and prev.describe() != after.describe():
                out.append(Change(step, after.job, prev, after))
    return out


# ---------------------------------------------------------------- running


@dataclass
class SweepOutcome:
    points: list[SweepPoint]
    front: list[int]
    changes: list[Change] = field(default_factory=list)
    title: str = ""


def prepare(
    path: str,
    *,
    profile: Profile | None = None,
    backend: str | None = None,
    time_budget: float | None = None,
    seed: int | None = None,
    threads: int | None = 1,
) -> pb.SolveRequest:
    """The base request of a sweep: the file, then the profile, then these flags (which win).
    SweepError if it can't be read."""
    try:
        req = load_request_json(path)
    except RequestFileError as e:
        raise SweepError(str(e)) from e
    if profile is not None:
        apply_profile(req, profile)
    o = req.options
    if backend is not None:
        o.backend = wire_backend(parse_backend(backend))
    if time_budget is not None:
        o.time_budget.CopyFrom(duration_to_proto(time_budget))
    if seed is not None:
        o.seed = seed
    if threads is not None:
        o.threads = threads
    return req


def run_sweep(
    request: pb.SolveRequest,
    axes: Sequence[tuple[str, Sequence[float]]],
    *,
    executor: Executor | None = None,
    progress: TextIO | None = None,
    title: str = "",
) -> SweepOutcome:
    """Solve every grid point; SweepError if a point's request is invalid."""
    grid = weight_grid(axes)
    tasks = []
    for i, swept in enumerate(grid, start=1):
        req = pb.SolveRequest()
        req.CopyFrom(request)
        for name, value in swept.items():
            setattr(req.weights, name, value)
        violations = validate_request(req, Limits())
        if violations:
            lines = [f"{v.field}: {v.description}" for v in violations]
            raise SweepError("invalid request:\n" + "\n".join(lines))
        tasks.append(SweepTask(i, swept, req.SerializeToString(deterministic=True)))
    own = executor is None
    ex = executor or make_batch_executor(1, None)
    bar = Progress(len(tasks), progress)
    points: list[SweepPoint] = []
    try:
        for start in range(0, len(tasks), max(ex.workers, 1)):
            for point in ex.map(solve_point, tasks[start : start + max(ex.workers, 1)]):
                points.append(point)
                bar.update(_progress_record(point))
    finally:
        bar.finish()
        if own:
            ex.close()
    front = pareto_front(points)
    return SweepOutcome(points, front, front_changes(points, front), title)


def _progress_record(p: SweepPoint) -> dict[str, Any]:
    """A batch-like record for the progress display."""
    return {
        "ok": p.error is None,
        "error": {"kind": "internal", "message": p.error},
        "file": f"#{p.index}",
        "sha256": None,
        "backend": p.label(),
        "budget_s": None,
        "seed": None,
        "termination": p.termination,
        "objective": {"total": p.objective},
        "gap": None,
        "timing": {"wall_s": None},
    }


# ---------------------------------------------------------------- outputs


def plot_sweep(outcome: SweepOutcome) -> Figure:
    """Normalised throughput over power, every plan a point, the Pareto front marked."""
    fig = Figure(figsize=(7.5, 5.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    points = outcome.points
    on_front = set(outcome.front)
    front_points = [points[i] for i in outcome.front]
    others = [
        p
        for i, p in enumerate(points)
        if p.placed and i not in on_front and not any(same_place(p, q) for q in front_points)
    ]
    if others:
        ax.scatter(
            [p.power_w / 1000 for p in others],
            [p.throughput for p in others],
            color="0.6",
            label="dominated plan",
            zorder=2,
        )
    front = [points[i] for i in outcome.front]
    if front:
        ax.plot(
            [p.power_w / 1000 for p in front],
            [p.throughput for p in front],
            color="C3",
            marker="o",
            linewidth=1.5,
            label="Pareto front",
            zorder=3,
        )
        labels = []
        for p in front:
            same = [q for q in points if q.placed and same_place(p, q)]
            text = "; ".join(q.label() for q in same)
            if len(text) > 40:
                text = f"{same[0].label()} (+{len(same) - 1})"
            labels.append((p.power_w / 1000, p.throughput, text))
        _annotate(ax, labels)
    ax.set_xlabel("power drawn by running jobs (kW)")
    ax.set_ylabel(r"cluster throughput  $\Sigma_j w_j u_j \,/\, \Sigma_j w_j$")
    ax.margins(x=0.1, y=0.08)
    ax.set_title(outcome.title or "Throughput against power over objective weights")
    ax.grid(True, alpha=0.3)
    if ax.lines or ax.collections:
        ax.legend(fontsize="small", loc="lower right")
    return fig


_LABEL_OFFSETS = ((6, -12), (-6, 6), (6, 6), (-6, -14), (6, -24), (-6, 18), (6, 18), (-6, -26))
"""Where a front label may go, in points from its marker, tried in this order."""
_AXES_POINTS = (430.0, 300.0)
"""Rough size of the plot area in points (figure 7.5 x 5.2 in), to tell labels apart."""


def _annotate(ax: Any, labels: Sequence[tuple[float, float, str]]) -> None:
    """Label the front's points, each where it overlaps no earlier label and no marker."""
    if not labels:
        return
    xs = [x for x, _, _ in labels]
    ys = [y for _, y, _ in labels]
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0

    def to_points(x: float, y: float) -> tuple[float, float]:
        return (
            (x - min(xs)) / span_x * _AXES_POINTS[0],
            (y - min(ys)) / span_y * _AXES_POINTS[1],
        )

    markers = [to_points(x, y) for x, y, _ in labels]
    boxes: list[tuple[float, float, float, float]] = []
    for x, y, text in labels:
        px, py = to_points(x, y)
        width, height = 4.2 * len(text), 8.0
        chosen = _LABEL_OFFSETS[0]
        for dx, dy in _LABEL_OFFSETS:
            left = px + dx if dx > 0 else px + dx - width
            box = (left, py + dy, left + width, py + dy + height)
            clear = all(
                box[2] < b[0] or b[2] < box[0] or box[3] < b[1] or b[3] < box[1] for b in boxes
            ) and not any(
                box[0] - 3 <= mx <= box[2] + 3 and box[1] - 3 <= my <= box[3] + 3
                for mx, my in markers
            )
            if clear:
                chosen = (dx, dy)
                boxes.append(box)
                break
        else:
            dx, dy = chosen
            left = px + dx
            boxes.append((left, py + dy, left + width, py + dy + height))
        ax.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=chosen,
            ha="left" if chosen[0] > 0 else "right",
            fontsize="x-small",
        )


CSV_HEADER = (
    "point",
    *WEIGHT_KEYS,
    "termination",
    "objective",
    "throughput_normalised",
    "power_w",
    "gpus_used",
    "jobs_running",
    "on_front",
    "same_as",
    "error",
)


def _same_as(points: Sequence[SweepPoint], i: int) -> str:
    p = points[i]
    for q in points[:i]:
        if q.placed and p.placed and same_place(p, q):
            return f"#{q.index}"
    return ""


def csv_rows(outcome: SweepOutcome) -> list[list[str]]:
    front = set(outcome.front)
    rows = []
    for i, p in enumerate(outcome.points):
        rows.append(
            [
                str(p.index),
                *(repr(p.weights[k]) if k in p.weights else "" for k in WEIGHT_KEYS),
                p.termination,
                repr(p.objective),
                repr(p.throughput),
                repr(p.power_w),
                str(p.gpus_used),
                str(sum(1 for j in p.jobs if j.state == "RUNNING")),
                "yes" if i in front else "no",
                _same_as(outcome.points, i),
                p.error or "",
            ]
        )
    return rows


def sweep_markdown(outcome: SweepOutcome, figure_name: str) -> str:
    points = outcome.points
    front = set(outcome.front)
    swept = list(points[0].swept) if points else []
    header = [
        "point",
        *swept,
        "termination",
        "objective",
        "throughput (norm.)",
        "power (W)",
        "GPUs",
        "front",
    ]
    rows = []
    for i, p in enumerate(points):
        same = _same_as(points, i)
        mark = "yes" if i in front else (f"same as {same}" if same else "no")
        if p.error:
            mark = f"error: {p.error}"
        rows.append(
            [
                f"#{p.index}",
                *(f"{p.swept[k]:g}" for k in swept),
                p.termination or "-",
                f"{p.objective:.6g}",
                f"{p.throughput:.4f}",
                f"{p.power_w:.0f}",
                str(p.gpus_used),
                mark,
            ]
        )
    parts = [
        f"# {outcome.title or 'Weight sweep'}",
        "",
        f"![trade-off]({figure_name})",
        "",
        "Throughput is `sum_j w_j u_j / sum_j w_j` (1: every job at its best speed); power is "
        "the watts of the running jobs. The front is the set of plans no other plan beats in "
        "both.",
        "",
        "## Points",
        "",
        markdown_table(header, rows),
        "",
        "## Changes along the front (lowest power first)",
        "",
    ]
    if outcome.changes:
        parts.append(
            markdown_table(
                ["step", "job", "state", "GPU type", "dp x tp x pp", "clock (MHz)"],
                (c.cells() for c in outcome.changes),
            )
        )
    elif len(outcome.front) < 2:
        parts.append("The front has a single plan: no changes.")
    else:
        parts.append("Neighbouring plans differ only in placement.")
    return "\n".join(parts) + "\n"


def write_outputs(outcome: SweepOutcome, out: Path, prefix: str = "sweep") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    png, md, table = out / f"{prefix}.png", out / f"{prefix}.md", out / f"{prefix}.csv"
    plot_sweep(outcome).savefig(png, dpi=120)
    md.write_text(sweep_markdown(outcome, png.name), encoding="utf-8")
    with table.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_HEADER)
        w.writerows(csv_rows(outcome))
    return [png, md, table]


# ---------------------------------------------------------------- command line


def _weight_arg(text: str) -> tuple[str, list[float]]:
    try:
        return parse_weight_spec(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _backend_arg(text: str) -> str:
    try:
        return parse_backend(text).name.lower()
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _int_arg(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], got {n}")
        return n

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="SolveRequest in protobuf JSON")
    parser.add_argument(
        "--weight",
        type=_weight_arg,
        action="append",
        required=True,
        metavar="NAME=V1,V2,...",
        help="values of one objective weight (throughput, energy, migration, "
        "locality, deadline); repeat for a grid",
    )
    parser.add_argument("--out", type=Path, help="output directory (default: sweep-<instance>)")
    parser.add_argument(
        "--prefix", default="sweep", help="output file names: PREFIX.png, .md, .csv (default sweep)"
    )
    parser.add_argument("--backend", type=_backend_arg, help="e.g. auto, heuristic")
    parser.add_argument(
        "--time-budget", type=_duration_arg, metavar="DURATION", help="per point, e.g. 2s"
    )
    parser.add_argument("--seed", type=_int_arg(0, 2**31 - 1))
    parser.add_argument(
        "--threads", type=_int_arg(0, 256), default=1, help="solver threads per point (default 1)"
    )
    parser.add_argument(
        "--workers",
        type=_int_arg(1, 4096),
        default=None,
        help="points solved in parallel (default: the cores here)",
    )
    parser.add_argument("--ray-address", metavar="ADDR", help="solve the points on Ray")
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def command(args: argparse.Namespace) -> int:
    """``dsfro sweep``: 0 written, 1 if a point failed, 2 for bad arguments or input."""
    out = args.out or Path(f"sweep-{Path(args.file).stem}")
    try:
        names = [n for n, _ in args.weight]
        if len(set(names)) != len(names):
            raise SweepError("a weight is given twice; give all its values in one --weight")
        req = prepare(
            args.file,
            profile=getattr(args, "profile", None),
            backend=args.backend,
            time_budget=args.time_budget,
            seed=args.seed,
            threads=args.threads,
        )
        workers = args.workers if args.workers is not None else available_cores()
        points = len(weight_grid(args.weight))
        executor = make_batch_executor(min(workers, points), args.ray_address)
        try:
            outcome = run_sweep(
                req,
                args.weight,
                executor=executor,
                progress=None if args.quiet else sys.stderr,
                title=_title(args.file, req),
            )
        finally:
            executor.close()
    except SweepError as e:
        print(f"dsfro sweep: error: {e}", file=sys.stderr)
        return 2
    try:
        paths = write_outputs(outcome, out, args.prefix)
    except OSError as e:
        print(f"dsfro sweep: error: cannot write {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    failed = [p for p in outcome.points if p.error]
    for point in failed:
        print(
            f"dsfro sweep: point #{point.index} ({point.label()}) failed: {point.error}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def _title(path: str, req: pb.SolveRequest) -> str:
    o = req.options
    budget = (
        duration_seconds(o.time_budget)
        if o.HasField("time_budget")
        else Limits().default_time_budget_seconds
    )
    backend = backend_from_proto(o.backend).name.lower()
    return f"{Path(path).stem}: throughput against power ({backend}, {budget:g} s per point)"


__all__ = [
    "SweepOutcome",
    "SweepPoint",
    "dominates",
    "front_changes",
    "pareto_front",
    "plot_sweep",
    "run_sweep",
    "write_outputs",
]
