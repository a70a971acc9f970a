"""The files of simulated runs, each written atomically (``solver.files``: a temporary file in
the same folder, then ``os.replace``), so a reader never sees half a file and a failed write
leaves none.

- ``write_run``: ``<prefix>-summary.json`` (the ``Summary``), ``<prefix>-jobs.csv`` (one row per
  job, plus ``jct_s`` and ``queue_s``), ``<prefix>-rounds.csv`` and ``<prefix>-power.csv`` (the
  log's rounds and power segments, one row each), ``<prefix>-tenants.csv`` (one row per tenant,
  ``solver.simulate.tenant_metrics``);
- ``write_comparison``: ``<prefix>.md`` and ``<prefix>.csv``, the headline metrics per scenario
  and policy (mean over seeds; the CSV also has a row per seed) and their ratios to baseline
  policies, energy three ways (own makespan, equal horizon, the jobs' own per sample) with its
  ratios on the equal horizon (``metrics.equal_horizon``); ``<prefix>-tenants.csv`` and a table
  in the markdown, the per-tenant metrics (mean over seeds);

The figures are ``solver.simulate.figures``.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

from solver.files import write_text
from solver.offline.report import csv_cell, markdown_table
from solver.simulate.core import JobRecord, PowerSegment, RoundRecord, SimulationLog
from solver.simulate.metrics import Summary, equal_horizon, jct, queue_delay
from solver.simulate.tenant_metrics import TENANT_COLUMNS, TenantSummary, tenant_table

# ---------------------------------------------------------------- files


def write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    buffer = io.StringIO()
    w = csv.writer(buffer, lineterminator="\n")
    w.writerow(header)
    w.writerows([csv_cell(v) for v in row] for row in rows)
    return write_text(path, buffer.getvalue())


# ---------------------------------------------------------------- one run

JOB_COLUMNS = (*(f.name for f in fields(JobRecord)), "jct_s", "queue_s")
ROUND_COLUMNS = tuple(f.name for f in fields(RoundRecord) if f.name != "tenant_shares")
"""The rounds' CSV columns (the per-tenant shares, a mapping, are in the summary's tenants)."""
POWER_COLUMNS = tuple(f.name for f in fields(PowerSegment))
TENANT_FIELDS = tuple(f.name for f in fields(TenantSummary))


def job_rows(log: SimulationLog) -> list[tuple[Any, ...]]:
    return [(*astuple(j), jct(j), queue_delay(j)) for j in log.jobs]


def write_summary(summary: Summary, out_dir: Path, prefix: str) -> Path:
    """``<prefix>-summary.json``: the summary as JSON (``Summary.to_dict``)."""
    text = json.dumps(summary.to_dict(), indent=2, allow_nan=False) + "\n"
    return write_text(out_dir / f"{prefix}-summary.json", text)


def write_run(log: SimulationLog, summary: Summary, out_dir: Path, prefix: str) -> list[Path]:
    """The summary and the log of one run; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        write_summary(summary, out_dir, prefix),
        write_csv(out_dir / f"{prefix}-jobs.csv", JOB_COLUMNS, job_rows(log)),
        write_csv(
            out_dir / f"{prefix}-rounds.csv",
            ROUND_COLUMNS,
            ([getattr(r, c) for c in ROUND_COLUMNS] for r in log.rounds),
        ),
        write_csv(out_dir / f"{prefix}-power.csv", POWER_COLUMNS, map(astuple, log.power)),
        write_csv(
            out_dir / f"{prefix}-tenants.csv",
            TENANT_FIELDS,
            [astuple(t) for t in summary.tenants.values()],
        ),
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
    Metric("energy_kwh", "energy to own makespan (kWh)", ".4g"),
    Metric("energy_horizon_kwh", "energy at equal horizon (kWh)", ".4g"),
    Metric("horizon_s", "horizon (s)", ".4g"),
    Metric("jobs_energy_per_sample_j", "jobs' J/sample", ".4g"),
    Metric("over_budget_share", "time over budget", ".2%"),
    Metric("max_excess", "max excess", ".2%"),
    Metric("utilisation_busy", "GPU util.", ".1%"),
    Metric("migrations_per_job", "migrations/job", ".3g"),
    Metric("preemptions_per_job", "preemptions/job", ".3g"),
    Metric("restarts_per_job", "restarts/job", ".3g"),
    Metric("restart_gpu_share", "GPU time restarting", ".2%"),
    Metric("deadline_hit_rate", "deadline hits", ".1%"),
    Metric("solver_p99_budget_ratio", "solver p99/budget", ".3g"),
    Metric("jct_small_mean_s", "small jobs' mean JCT (s)", ".4g"),
    Metric("jct_large_mean_s", "large jobs' mean JCT (s)", ".4g"),
    Metric("gpu_work_per_gpu_hour", "GPU-work per GPU-hour", ".4g"),
    Metric("small_on_slices", "small jobs on slices", ".1%"),
    Metric("reconfigurations", "reconfigurations", ".4g"),
    Metric("invalid_layouts", "invalid layouts", ".3g"),
    Metric("suspends", "node suspends", ".4g"),
    Metric("resumes", "node resumes", ".4g"),
    Metric("node_hours_suspended", "node-hours suspended", ".4g"),
    Metric("resume_gpu_hours", "GPU-h waiting for resumes", ".4g"),
    Metric("carbon_horizon_kg", "kg CO2 at equal horizon", ".4g"),
    Metric("cost_horizon", "cost at equal horizon", ".4g"),
    Metric("queue_max_s", "max queueing (s)", ".4g"),
)
RATIO_METRICS = ("jct_mean_s", "energy_horizon_kwh", "carbon_horizon_kg")
"""Metrics given as ratios to each baseline policy: energy on the equal horizon, the fair
figure (a cluster keeps running after a trace ends)."""


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
    """One row per (scenario, policy) in order of first appearance, energy at the equal
    horizon of each scenario and seed (``equal_horizon``); ratios compare with the baseline
    policy of the same scenario (None where it is absent or its value is 0)."""
    runs: dict[tuple[str, str], dict[int, Summary]] = defaultdict(dict)
    for s in equal_horizon(summaries):
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


def _ratio_keys(baselines: Sequence[str], rows: Sequence[ComparisonRow]) -> list[tuple[str, str]]:
    """The ratio columns: each metric some row defines (kg CO2 only with a grid), per baseline."""
    shown = [k for k in RATIO_METRICS if any(r.mean.get(k) is not None for r in rows)]
    return [(k, b) for b in baselines for k in shown]


def comparison_csv_rows(
    rows: Sequence[ComparisonRow], baselines: Sequence[str] = ()
) -> tuple[list[str], list[list[Any]]]:
    """Header and rows: per scenario and policy, a row per seed then the mean (seed ``mean``)."""
    ratio_keys = _ratio_keys(baselines, rows)
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


def _tenant_rows(summaries: Sequence[Summary]) -> list[tuple[str, str, str, int, dict[str, Any]]]:
    return tenant_table([(s.scenario, s.policy, s.seed, s.tenants) for s in summaries])


def tenants_markdown(summaries: Sequence[Summary]) -> str:
    """The per-tenant table (means over seeds); "" without tenants."""
    rows = _tenant_rows(summaries)
    if not rows:
        return ""
    header = ["scenario", "policy", "tenant", "seeds", *(label for _, label, _ in TENANT_COLUMNS)]
    cells = [
        [sc, po, te, str(n), *(_fmt(means[k], spec) for k, _, spec in TENANT_COLUMNS)]
        for sc, po, te, n, means in rows
    ]
    jain = {
        (s.scenario, s.policy): _mean_defined(
            x.fairness_jain_entitlement
            for x in summaries
            if (x.scenario, x.policy) == (s.scenario, s.policy)
        )
        for s in summaries
    }
    lines = [
        "## Per tenant",
        "",
        "Means over seeds. rho: finish-time fairness (JCT over the isolated duration); "
        "entitled GPU-h: the queue's nominal GPUs times the time the tenant had work; borrowed "
        "GPU-h: GPU-hours of jobs on quota borrowed from the cohort. Jain's index of received / "
        "entitled over the tenants: "
        + ", ".join(f"{p} {_fmt(v, '.3f')}" for (_, p), v in jain.items())
        + ". Definitions: `solver/simulate/tenant_metrics.py`.",
        "",
        markdown_table(header, cells),
    ]
    return "\n".join(lines) + "\n"


def comparison_markdown(
    rows: Sequence[ComparisonRow], baselines: Sequence[str] = (), figures: Sequence[Path] = ()
) -> str:
    ratio_keys = _ratio_keys(baselines, rows)
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
        "queueing over finished and started jobs. Energy three ways: the cluster's true draw, "
        "idle GPUs included, to each run's own makespan (from the first submission to its "
        "end); the same at an equal horizon, every run of a scenario and seed padded with the "
        "cluster's idle power up to the longest of them (the horizon column: a cluster keeps "
        "running after a trace ends, so this is the fair figure, and the energy ratios use "
        "it); and the jobs' own energy per sample trained. Time over budget is the share of "
        "time with a budget during which the true draw exceeded it; solver p99/budget is the "
        "p99 of each round's solver time over its time budget. Definitions: "
        "`solver/simulate/metrics.py`.",
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
    """``<prefix>.md`` (means, ratios, the per-tenant table, links to ``figures``),
    ``<prefix>.csv`` and ``<prefix>-tenants.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = comparison_rows(summaries, baselines)
    header, csv_rows = comparison_csv_rows(rows, baselines)
    text = comparison_markdown(rows, baselines, figures)
    tenants = tenants_markdown(summaries)
    if tenants:
        text += "\n" + tenants
    tenant_header = ["scenario", "policy", "tenant", "runs", *(k for k, _, _ in TENANT_COLUMNS)]
    tenant_rows = [
        [sc, po, te, n, *(means[k] for k, _, _ in TENANT_COLUMNS)]
        for sc, po, te, n, means in _tenant_rows(summaries)
    ]
    return [
        write_text(out_dir / f"{prefix}.md", text),
        write_csv(out_dir / f"{prefix}.csv", header, csv_rows),
        write_csv(out_dir / f"{prefix}-tenants.csv", tenant_header, tenant_rows),
    ]
