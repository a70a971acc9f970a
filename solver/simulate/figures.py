"""The figures of simulated runs (``write_figures``): ``<prefix>-jct-cdf.png``,
``<prefix>-energy-jct.png``, ``<prefix>-power.png``, ``<prefix>-utilisation.png`` and, with
an energy-weight sweep, ``<prefix>-front.png`` (``solver.simulate.front``), each written
atomically.

The figures come from the ``plot_*`` functions (matplotlib Figures, the ``plot`` extra), which
draw the data of the ``*_data``/``*_series`` functions: tests check those without images.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solver.extras import new_figure
from solver.files import write_png
from solver.simulate.core import PowerSegment, SimulationLog
from solver.simulate.front import front_data, plot_front
from solver.simulate.metrics import Summary, equal_horizon, jct, summarize

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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


ENERGY_VIEWS = (
    ("energy_kwh", "cluster energy to own makespan (kWh)"),
    ("energy_horizon_kwh", "cluster energy at equal horizon (kWh)"),
    ("jobs_energy_per_sample_j", "jobs' energy per sample (J)"),
)
"""The three energy figures of a run (``solver.simulate.metrics``), a panel each."""


def energy_jct_points(
    summaries: Sequence[Summary], key: str = "energy_horizon_kwh"
) -> dict[str, list[tuple[float, float]]]:
    """(mean JCT s, the summary's ``key``) per policy, a point per seed (runs without a finished
    job, or without the value, are left out). Pass summaries at their equal horizon
    (``metrics.equal_horizon``) for ``energy_horizon_kwh``."""
    scenarios = {s.scenario for s in summaries}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in summaries:
        value = getattr(s, key)
        if s.jct_mean_s is not None and value is not None:
            out[_label(s, scenarios)].append((s.jct_mean_s, float(value)))
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
    """Energy three ways over mean JCT, a panel each (own makespan, equal horizon, the jobs'
    own per sample), a point per policy and seed; ``summaries`` at their equal horizon."""
    fig = new_figure(15, 4.5)
    axes = fig.subplots(1, len(ENERGY_VIEWS))
    for ax, (key, label) in zip(axes, ENERGY_VIEWS, strict=True):
        for i, (policy, points) in enumerate(energy_jct_points(summaries, key).items()):
            xs, ys = [p[0] / 3600 for p in points], [p[1] for p in points]
            ax.scatter(xs, ys, color=f"C{i % 10}", label=policy)
        ax.set_xlabel("mean JCT (h)")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_title("to each run's own makespan")
    axes[1].set_title("at an equal horizon (idle power added)")
    axes[2].set_title("the jobs' own energy")
    if axes[1].collections:
        axes[1].legend(fontsize="small")
    fig.suptitle("Energy against mean JCT (a point per seed)")
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
    return write_png(path, fig, dpi=120, metadata={"Software": None})


def write_figures(
    logs: Sequence[SimulationLog],
    out_dir: Path,
    prefix: str,
    summaries: Sequence[Summary] | None = None,
    run: SimulationLog | None = None,
    front: Mapping[str, float] | None = None,
) -> list[Path]:
    """The four figures; ``summaries`` default to those of ``logs`` (their energy is taken at
    the equal horizon of each scenario and seed); the power figure shows
    ``run`` (default: the first log), the utilisation one each policy's lowest seed. With
    ``front`` (DSFRO's labels and their energy weights), the JCT-energy front too."""
    if not logs:
        raise ValueError("no runs to draw")
    summaries = equal_horizon([summarize(g) for g in logs] if summaries is None else summaries)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {
        "jct-cdf": plot_jct_cdf(logs),
        "energy-jct": plot_energy_vs_jct(summaries),
        "power": plot_power(run or logs[0]),
        "utilisation": plot_utilisation(first_seed_per_policy(logs)),
    }
    if front:
        figures["front"] = plot_front(front_data(summaries, front))
    return [_save(fig, out_dir / f"{prefix}-{name}.png") for name, fig in figures.items()]
