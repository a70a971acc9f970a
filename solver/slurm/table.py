"""``--dry-run``'s output: the round's decisions as a table (markdown, readable as text)."""

from __future__ import annotations

from solver.slurm.loop import Report
from solver.wire import Termination


def _cell(text: object) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def decisions_table(report: Report) -> str:
    """One row per job: what the adapter would do and why, with the plan's shape."""
    head = [
        "job",
        "name",
        "action",
        "reason",
        "nodes",
        "GPUs/node",
        "GPU type",
        "dp x tp x pp",
        "SM MHz",
        "detail",
    ]
    rows = []
    for d in sorted(report.decisions, key=lambda d: d.job_id):
        t = d.target
        rows.append(
            [
                d.job_id,
                d.job.name,
                d.action.value,
                d.reason,
                ",".join(t.nodes) if t else "",
                t.gpus_per_node if t else "",
                t.gpu_type if t else "",
                f"{t.data_parallel} x {t.tensor_parallel} x {t.pipeline_parallel}" if t else "",
                t.sm_clock_mhz if t else "",
                d.detail if not t else "",
            ]
        )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    summary = f"round {report.round}: {report.outcome}"
    if report.error:
        summary += f" ({report.error})"
    if report.response is not None:
        stats = report.response.stats
        summary += (
            f"; DSFRO {Termination.Name(stats.termination).removeprefix('TERMINATION_')}"
            f" in {stats.wall_time.ToNanoseconds() / 1e9:.2f} s"
        )
    summary += "; " + ", ".join(f"{k} {v:.3f} s" for k, v in report.phases.items())
    return "\n".join([summary, "", *lines]) + "\n"
