"""The end table of a batch (per instance, backend and optionally budget) and its failures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from solver.offline.batch.records import TIMING_KEY, Record, _none_first


@dataclass(frozen=True)
class SummaryRow:
    instance: str
    backend: str
    budget_s: float | None
    """Set when the rows are per budget too."""
    runs: int
    failed: int
    terminations: str
    best_objective: float | None
    mean_objective: float | None
    mean_gap: float | None
    mean_first_plan_s: float | None
    mean_wall_s: float | None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(records: Iterable[Record], *, by_budget: bool = False) -> list[SummaryRow]:
    """One row per instance and backend (and budget), sorted."""
    groups: dict[tuple[Any, ...], list[Record]] = {}
    for r in records:
        budget = r.get("budget_s") if by_budget else None
        groups.setdefault(
            (str(r.get("instance")), str(r.get("backend") or "-"), _none_first(budget)), []
        ).append(r)
    rows = []
    for _, group in sorted(groups.items(), key=lambda kv: kv[0]):
        first = group[0]
        ok = [r for r in group if r["ok"]]
        objectives = [r["objective"]["total"] for r in ok]
        counts = Counter(r["termination"] for r in ok)
        rows.append(
            SummaryRow(
                instance=str(first.get("instance")),
                backend=str(first.get("backend") or "-"),
                budget_s=first.get("budget_s") if by_budget else None,
                runs=len(group),
                failed=len(group) - len(ok),
                terminations=", ".join(f"{t} {n}" for t, n in sorted(counts.items())),
                best_objective=max(objectives) if objectives else None,
                mean_objective=_mean(objectives),
                mean_gap=_mean([r["gap"] for r in ok if r["gap"] is not None]),
                mean_first_plan_s=_mean(
                    [
                        r[TIMING_KEY]["first_plan_s"]
                        for r in ok
                        if r[TIMING_KEY]["first_plan_s"] is not None
                    ]
                ),
                mean_wall_s=_mean(
                    [r[TIMING_KEY]["wall_s"] for r in ok if r[TIMING_KEY]["wall_s"] is not None]
                ),
            )
        )
    return rows


SUMMARY_HEADER = (
    "instance",
    "backend",
    "budget s",
    "runs",
    "failed",
    "terminations",
    "best objective",
    "mean objective",
    "mean gap",
    "mean first plan s",
    "mean wall s",
)


def summary_header(rows: Sequence[SummaryRow]) -> list[str]:
    """SUMMARY_HEADER, without the budget column unless the rows are per budget."""
    per_budget = any(r.budget_s is not None for r in rows)
    return [h for h in SUMMARY_HEADER if per_budget or h != "budget s"]


def summary_cells(row: SummaryRow, per_budget: bool = False) -> list[str]:
    def num(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    budget = [num(row.budget_s, "g")] if per_budget else []
    return [
        row.instance,
        row.backend,
        *budget,
        str(row.runs),
        str(row.failed),
        row.terminations or "-",
        num(row.best_objective, ".6g"),
        num(row.mean_objective, ".6g"),
        "-" if row.mean_gap is None else f"{row.mean_gap:.2%}",
        num(row.mean_first_plan_s, ".3f"),
        num(row.mean_wall_s, ".3f"),
    ]


def format_summary(rows: Sequence[SummaryRow]) -> str:
    header = summary_header(rows)
    per_budget = len(header) == len(SUMMARY_HEADER)
    table = [header] + [summary_cells(r, per_budget) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table
    )


def format_errors(records: Iterable[Record], limit: int = 20) -> str:
    """The failures, one entry per distinct error (with its run count and violations), at
    most `limit` entries."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        if not r["ok"]:
            e = r["error"]
            message = str(e["message"])
            text = f"{e['kind']}: {message}"
            if not message.startswith(str(r["file"])):
                text = f"{r['file']}: {text}"
            if len(e["violations"]) > 1:  # the message quotes the first
                text += "".join(f"\n    {v['field']}: {v['description']}" for v in e["violations"])
            groups.setdefault(text, []).append(r)
    lines = []
    for text, runs in list(groups.items())[:limit]:
        head, _, rest = text.partition("\n")
        lines.append(f"{head} ({len(runs)} run{'s' if len(runs) > 1 else ''})")
        if rest:
            lines.append(rest)
    if len(groups) > limit:
        lines.append(f"... and {len(groups) - limit} more errors")
    return "\n".join(lines)
