"""The files of simulated runs, each written atomically (a temporary file in the same folder,
then ``os.replace``), so a reader never sees half a file and a failed write leaves none.

- ``write_run``: ``<prefix>-summary.json`` (the ``Summary``), ``<prefix>-jobs.csv`` (one row per
  job, plus ``jct_s`` and ``queue_s``), ``<prefix>-rounds.csv`` and ``<prefix>-power.csv`` (the
  log's rounds and power segments, one row each);
- ``write_comparison``: ``<prefix>.md`` and ``<prefix>.csv``, the headline metrics per scenario
  and policy (mean over seeds; the CSV also has a row per seed) and their ratios to baseline
  policies;
- ``write_figures``: ``<prefix>-jct-cdf.png``, ``<prefix>-energy-jct.png``,
  ``<prefix>-power.png`` and ``<prefix>-utilisation.png``.

The figures come from the ``plot_*`` functions (matplotlib Figures, the ``plot`` extra), which
draw the data of the ``*_data``/``*_series`` functions: tests check those without images.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import secrets
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from solver.extras import new_figure
from solver.offline.report import csv_cell, markdown_table
from solver.simulate.core import JobRecord, PowerSegment, RoundRecord, SimulationLog
from solver.simulate.metrics import Summary, jct, queue_delay, summarize

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# ---------------------------------------------------------------- atomic files


def write_atomic(path: Path, write: Callable[[IO[bytes]], object]) -> Path:
    """Write ``path`` through ``write`` into a temporary file beside it, then rename it over
    ``path``; on any failure the temporary file is removed and ``path`` is left as it was."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text(path: Path, text: str) -> Path:
    return write_atomic(path, lambda f: f.write(text.encode("utf-8")))


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    buffer = io.StringIO()
    w = csv.writer(buffer, lineterminator="\n")
    w.writerow(header)
    w.writerows([csv_cell(v) for v in row] for row in rows)
    return write_text(path, buffer.getvalue())


# ---------------------------------------------------------------- one run

JOB_COLUMNS = (*(f.name for f in fields(JobRecord)), "jct_s", "queue_s")
ROUND_COLUMNS = tuple(f.name for f in fields(RoundRecord))
POWER_COLUMNS = tuple(f.name for f in fields(PowerSegment))


def job_rows(log: SimulationLog) -> list[tuple[Any, ...]]:
    return [(*astuple(j), jct(j), queue_delay(j)) for j in log.jobs]


def write_run(log: SimulationLog, summary: Summary, out_dir: Path, prefix: str) -> list[Path]:
    """The summary and the log of one run; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(summary.to_dict(), indent=2, allow_nan=False) + "\n"
    return [
        write_text(out_dir / f"{prefix}-summary.json", text),
        write_csv(out_dir / f"{prefix}-jobs.csv", JOB_COLUMNS, job_rows(log)),
        write_csv(out_dir / f"{prefix}-rounds.csv", ROUND_COLUMNS, map(astuple, log.rounds)),
        write_csv(out_dir / f"{prefix}-power.csv", POWER_COLUMNS, map(astuple, log.power)),
    ]


# ---------------------------------------------------------------- comparison of runs


@dataclass(frozen=True)
class Metric:
    key: str
    """A ``Summary`` field."""
    label: str
    spec: str
    """Format spec of the markdown cell."""


HEADLINE = (
    Metric("jct_mean_s", "mean JCT (s)", ".4g"),
    Metric("jct_p95_s", "p95 JCT (s)", ".4g"),
    Metric("queue_mean_s", "mean queueing (s)", ".4g"),
    Metric("makespan_s", "makespan (s)", ".4g"),
    Metric("jobs_unfinished", "unfinished", ".3g"),
    Metric("energy_kwh", "energy (kWh)", ".4g"),
    Metric("energy_per_sample_j", "J/sample", ".4g"),
    Metric("over_budget_share", "time over budget", ".2%"),
    Metric("max_excess", "max excess", ".2%"),
    Metric("utilisation_busy", "GPU util.", ".1%"),
    Metric("migrations_per_job", "migrations/job", ".3g"),
    Metric("deadline_hit_rate", "deadline hits", ".1%"),
    Metric("solver_p99_budget_ratio", "solver p99/budget", ".3g"),
)
RATIO_METRICS = ("jct_mean_s", "energy_kwh")
"""Metrics given as ratios to each baseline policy."""


@dataclass(frozen=True)
class ComparisonRow:
    """One policy in one scenario: per-seed and mean values of the headline metrics, and the
    mean's ratios to the baselines (``ratios[(metric, baseline)]``)."""

    scenario: str
    policy: str
    seeds: tuple[int, ...]
    per_seed: dict[int, dict[str, float | None]]
    mean: dict[str, float | None]
    ratios: dict[tuple[str, str], float | None]
    seed_ratios: dict[int, dict[tuple[str, str], float | None]]
    """The same ratios seed by seed, against the baseline's run with that seed."""


def _value(s: Summary, key: str) -> float | None:
    v = getattr(s, key)
    return None if v is None else float(v)


def _mean_defined(values: Iterable[float | None]) -> float | None:
    """The mean of the defined values (None if none is)."""
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def comparison_rows(
    summaries: Sequence[Summary], baselines: Sequence[str] = ()
) -> list[ComparisonRow]:
    """One row per (scenario, policy) in order of first appearance; ratios compare with the
    baseline policy of the same scenario (None where it is absent or its value is 0)."""
    runs: dict[tuple[str, str], dict[int, Summary]] = defaultdict(dict)
    for s in summaries:
        group = runs[(s.scenario, s.policy)]
        if s.seed in group:
            raise ValueError(f"two summaries of {s.scenario}/{s.policy} seed {s.seed}")
        group[s.seed] = s
    keys = [m.key for m in HEADLINE]
    per_seed = {
        g: {seed: {k: _value(s, k) for k in keys} for seed, s in sorted(by_seed.items())}
        for g, by_seed in runs.items()
    }
    means = {
        g: {k: _mean_defined(v[k] for v in values.values()) for k in keys}
        for g, values in per_seed.items()
    }
    rows = []
    for (scenario, policy), values in per_seed.items():
        ratios: dict[tuple[str, str], float | None] = {}
        seed_ratios: dict[int, dict[tuple[str, str], float | None]] = {s: {} for s in values}
        for base in baselines:
            base_mean = means.get((scenario, base), {})
            base_seeds = per_seed.get((scenario, base), {})
            for k in RATIO_METRICS:
                ratios[(k, base)] = _ratio(means[(scenario, policy)][k], base_mean.get(k))
                for seed, v in values.items():
                    other = base_seeds.get(seed, {}).get(k)
                    seed_ratios[seed][(k, base)] = _ratio(v[k], other)
        rows.append(
            ComparisonRow(
                scenario=scenario,
                policy=policy,
                seeds=tuple(values),
                per_seed=values,
                mean=means[(scenario, policy)],
                ratios=ratios,
                seed_ratios=seed_ratios,
            )
        )
    return rows


def _ratio_keys(baselines: Sequence[str]) -> list[tuple[str, str]]:
    return [(k, b) for b in baselines for k in RATIO_METRICS]


def comparison_csv_rows(
    rows: Sequence[ComparisonRow], baselines: Sequence[str] = ()
) -> tuple[list[str], list[list[Any]]]:
    """Header and rows: per scenario and policy, a row per seed then the mean (seed ``mean``)."""
    ratio_keys = _ratio_keys(baselines)
    header = [
        "scenario",
        "policy",
        "seed",
        "runs",
        *(m.key for m in HEADLINE),
        *(f"{k}/{b}" for k, b in ratio_keys),
    ]
    out: list[list[Any]] = []
    for r in rows:
        for seed in r.seeds:
            values = r.per_seed[seed]
            out.append(
                [
                    r.scenario,
                    r.policy,
                    seed,
                    1,
                    *(values[m.key] for m in HEADLINE),
                    *(r.seed_ratios[seed][rk] for rk in ratio_keys),
                ]
            )
        out.append(
            [
                r.scenario,
                r.policy,
                "mean",
                len(r.seeds),
                *(r.mean[m.key] for m in HEADLINE),
                *(r.ratios[rk] for rk in ratio_keys),
            ]
        )
    return header, out


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def comparison_markdown(
    rows: Sequence[ComparisonRow], baselines: Sequence[str] = (), figures: Sequence[Path] = ()
) -> str:
    ratio_keys = _ratio_keys(baselines)
    labels = {m.key: m.label for m in HEADLINE}
    header = [
        "scenario",
        "policy",
        "seeds",
        *(m.label for m in HEADLINE),
        *(f"{labels[k]} / {b}" for k, b in ratio_keys),
    ]
    cells = [
        [
            r.scenario,
            r.policy,
            str(len(r.seeds)),
            *(_fmt(r.mean[m.key], m.spec) for m in HEADLINE),
            *(_fmt(r.ratios[rk], ".3f") for rk in ratio_keys),
        ]
        for r in rows
    ]
    parts = [
        "# Policy comparison",
        "",
        "Means over seeds (of the seeds where a metric is defined; `-`: never defined). JCT and "
        "queueing over finished and started jobs; energy is the cluster's true draw, idle GPUs "
        "included; time over budget is the share of time with a budget during which the true "
        "draw exceeded it; solver p99/budget is the p99 of each round's solver time over its "
        "time budget. Definitions: `solver/simulate/metrics.py`.",
        "",
        markdown_table(header, cells),
    ]
    if figures:
        parts += ["", "## Figures", ""]
        parts += [f"![{p.stem}]({p.name})" for p in figures]
    return "\n".join(parts) + "\n"


def write_comparison(
    summaries: Sequence[Summary],
    out_dir: Path,
    prefix: str,
    baselines: Sequence[str] = (),
    figures: Sequence[Path] = (),
) -> list[Path]:
    """``<prefix>.md`` (means, ratios, links to ``figures``) and ``<prefix>.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = comparison_rows(summaries, baselines)
    header, csv_rows = comparison_csv_rows(rows, baselines)
    return [
        write_text(out_dir / f"{prefix}.md", comparison_markdown(rows, baselines, figures)),
        write_csv(out_dir / f"{prefix}.csv", header, csv_rows),
    ]


# ---------------------------------------------------------------- figure data


def _label(log: SimulationLog | Summary, scenarios: set[str]) -> str:
    return log.policy if len(scenarios) <= 1 else f"{log.scenario}: {log.policy}"


def jct_cdf_data(logs: Sequence[SimulationLog]) -> dict[str, list[float]]:
    """Sorted JCTs of the finished jobs per policy, pooled over seeds."""
    scenarios = {g.scenario for g in logs}
    out: dict[str, list[float]] = defaultdict(list)
    for log in logs:
        out[_label(log, scenarios)].extend(t for j in log.jobs if (t := jct(j)) is not None)
    return {k: sorted(v) for k, v in out.items()}


def energy_jct_points(summaries: Sequence[Summary]) -> dict[str, list[tuple[float, float]]]:
    """(mean JCT s, energy kWh) per policy, a point per seed (runs without a finished job are
    left out)."""
    scenarios = {s.scenario for s in summaries}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in summaries:
        if s.jct_mean_s is not None:
            out[_label(s, scenarios)].append((s.jct_mean_s, s.energy_kwh))
    return dict(out)


def step_series(
    log: SimulationLog, value: Callable[[PowerSegment], float | None]
) -> tuple[list[float], list[float]]:
    """A step line over the power segments: each segment's start and end at its value (NaN
    where None); zero-length segments are skipped."""
    xs: list[float] = []
    ys: list[float] = []
    for s in log.power:
        if s.end_s <= s.start_s:
            continue
        v = value(s)
        y = math.nan if v is None else v
        xs += [s.start_s, s.end_s]
        ys += [y, y]
    return xs, ys


def power_series(log: SimulationLog) -> dict[str, tuple[list[float], list[float]]]:
    """True, predicted and budget watts over time."""
    return {
        "true": step_series(log, lambda s: s.true_watts),
        "predicted": step_series(log, lambda s: s.predicted_watts),
        "budget": step_series(log, lambda s: s.budget_watts),
    }


def utilisation_series(log: SimulationLog) -> dict[str, tuple[list[float], list[float]]]:
    """Busy and computing GPUs as shares of the available ones over time."""

    def share(n: Callable[[PowerSegment], int]) -> Callable[[PowerSegment], float | None]:
        return lambda s: n(s) / s.gpus_available if s.gpus_available > 0 else None

    return {
        "busy": step_series(log, share(lambda s: s.gpus_busy)),
        "computing": step_series(log, share(lambda s: s.gpus_computing)),
    }


# ---------------------------------------------------------------- figures


def plot_jct_cdf(logs: Sequence[SimulationLog]) -> Figure:
    """The CDF of the finished jobs' JCT, a line per policy (seeds pooled), log time axis."""
    fig = new_figure(7, 4.5)  # matplotlib: the ``plot`` extra
    ax = fig.subplots()
    data = jct_cdf_data(logs)
    for label, values in data.items():
        if values:
            n = len(values)
            ax.step(
                [v / 3600 for v in values],
                [(i + 1) / n for i in range(n)],
                where="post",
                label=label,
            )
    if any(v > 0 for values in data.values() for v in values):
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("share of finished jobs")
    ax.set_ylim(0, 1.02)
    ax.set_title("JCT distribution (finished jobs, seeds pooled)")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize="small", loc="lower right")
    return fig


def plot_energy_vs_jct(summaries: Sequence[Summary]) -> Figure:
    """Cluster energy over mean JCT, a point per policy and seed."""
    fig = new_figure(7, 4.5)
    ax = fig.subplots()
    for label, points in energy_jct_points(summaries).items():
        ax.scatter([p[0] / 3600 for p in points], [p[1] for p in points], label=label)
    ax.set_xlabel("mean JCT (h)")
    ax.set_ylabel("cluster energy (kWh)")
    ax.set_title("Energy against mean JCT (a point per seed)")
    ax.grid(True, alpha=0.3)
    if ax.collections:
        ax.legend(fontsize="small")
    return fig


def plot_power(log: SimulationLog) -> Figure:
    """True and predicted cluster draw of one run against the budget in force."""
    fig = new_figure(9, 4)
    ax = fig.subplots()
    styles: dict[str, dict[str, Any]] = {
        "true": {"color": "C0", "linewidth": 1.2, "label": "true draw"},
        "predicted": {"color": "C1", "linewidth": 1.0, "linestyle": "--", "label": "predicted"},
        "budget": {"color": "C3", "linewidth": 1.5, "label": "budget"},
    }
    for key, (xs, ys) in power_series(log).items():
        if xs:
            ax.plot([x / 3600 for x in xs], [y / 1000 for y in ys], **styles[key])
    ax.set_xlabel("time (h)")
    ax.set_ylabel("power (kW)")
    ax.set_title(f"Cluster power: {log.policy}, seed {log.seed}, {log.scenario}")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize="small")
    return fig


def plot_utilisation(logs: Sequence[SimulationLog]) -> Figure:
    """Busy GPUs over available ones, a line per run (one run: computing GPUs too)."""
    fig = new_figure(9, 4)
    ax = fig.subplots()
    scenarios = {g.scenario for g in logs}
    for i, log in enumerate(logs):
        series = utilisation_series(log)
        label = _label(log, scenarios) + ("" if len(logs) == 1 else f" (seed {log.seed})")
        xs, ys = series["busy"]
        ax.plot([x / 3600 for x in xs], ys, color=f"C{i % 10}", linewidth=1.0, label=label)
        if len(logs) == 1:
            xs, ys = series["computing"]
            ax.plot([x / 3600 for x in xs], ys, color="C1", linestyle="--", label="computing")
    ax.set_xlabel("time (h)")
    ax.set_ylabel("share of available GPUs")
    ax.set_ylim(0, 1.05)
    ax.set_title("GPU utilisation over time")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize="small")
    return fig


def first_seed_per_policy(logs: Sequence[SimulationLog]) -> list[SimulationLog]:
    """Each (scenario, policy)'s run with the lowest seed, in order of first appearance."""
    best: dict[tuple[str, str], SimulationLog] = {}
    for log in logs:
        key = (log.scenario, log.policy)
        if key not in best or log.seed < best[key].seed:
            best[key] = log
    return list(best.values())


def _save(fig: Figure, path: Path) -> Path:
    return write_atomic(
        path, lambda f: fig.savefig(f, format="png", dpi=120, metadata={"Software": None})
    )


def write_figures(
    logs: Sequence[SimulationLog],
    out_dir: Path,
    prefix: str,
    summaries: Sequence[Summary] | None = None,
    run: SimulationLog | None = None,
) -> list[Path]:
    """The four figures; ``summaries`` default to those of ``logs``; the power figure shows
    ``run`` (default: the first log), the utilisation one each policy's lowest seed."""
    if not logs:
        raise ValueError("no runs to draw")
    if summaries is None:
        summaries = [summarize(g) for g in logs]
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {
        "jct-cdf": plot_jct_cdf(logs),
        "energy-jct": plot_energy_vs_jct(summaries),
        "power": plot_power(run or logs[0]),
        "utilisation": plot_utilisation(first_seed_per_policy(logs)),
    }
    return [_save(fig, out_dir / f"{prefix}-{name}.png") for name, fig in figures.items()]
