"""Plans and solve statistics as text for a terminal: one line per job, then the stats."""

from __future__ import annotations

from collections.abc import Iterable

from solver._proto.dsfro.v1 import scheduler_pb2 as pb
from solver.app.convert import enum_label
from solver.app.validation import duration_seconds


def compact_indices(indices: Iterable[int]) -> str:
    """``0,1,2,3,6`` as ``0-3,6``."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(_run(run))
        run = [i]
    if run:
        out.append(_run(run))
    return ",".join(out)


def _run(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def format_placement(placement: Iterable[pb.GpuSlice]) -> str:
    """``node:indices`` per node, e.g. ``a100-0:0-3 a100-1:0,2``."""
    per_node: dict[str, list[int]] = {}
    for s in placement:
        per_node.setdefault(s.node, []).extend(s.gpu_indices)
    return " ".join(f"{node}:{compact_indices(idx)}" for node, idx in per_node.items())


def format_gpus(a: pb.JobAssignment) -> str:
    """Where a running job runs: its GPUs, and its MIG instance (``profile@start``) if any."""
    where = format_placement(a.placement)
    if a.HasField("mig_instance"):
        where += f" {a.mig_instance.profile}@{a.mig_instance.start}"
    return where


def format_plan(plan: pb.Plan) -> str:
    """One line per job: where and how it runs, or why it waits."""
    header = [
        "JOB",
        "STATE",
        "GPU",
        "DPxTPxPP",
        "CLOCK",
        "GPUS",
        "SAMPLES/S",
        "WATTS",
        "MIGRATED",
        "NOTE",
    ]
    rows = [header]
    for a in plan.assignments:
        migrated = "yes" if a.migrated else "no"
        if a.state == pb.JOB_STATE_RUNNING:
            rows.append(
                [
                    a.job,
                    "RUNNING",
                    a.gpu_type,
                    f"{a.data_parallel}x{a.tensor_parallel}x{a.pipeline_parallel}",
                    f"{a.sm_clock_mhz} MHz",
                    format_gpus(a),
                    f"{a.samples_per_second:.1f}",
                    f"{a.watts:.0f}",
                    migrated,
                    "on borrowed quota" if a.borrowed else "",
                ]
            )
        else:
            note = enum_label(pb.QueueReason, a.queue_reason)
            if a.queue_detail:
                note += f": {a.queue_detail}"
            state = enum_label(pb.JobState, a.state)
            rows.append([a.job, state, "-", "-", "-", "-", "-", "-", migrated, note])
    return _table(rows)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def format_queues(plan: pb.Plan) -> str:
    """One line per declared queue and quota resource: what its jobs use of it."""
    rows = [["QUEUE", "RESOURCE", "USED", "NOMINAL", "BORROWED"]]
    for q in plan.queues:
        for u in q.resources:
            rows.append([q.queue, u.resource, f"{u.used:g}", f"{u.nominal:g}", f"{u.borrowed:g}"])
    return _table(rows)


def format_stats(stats: pb.SolveStats, objective: pb.ObjectiveBreakdown) -> str:
    lines = [
        f"termination     {enum_label(pb.Termination, stats.termination)} "
        f"(backend {enum_label(pb.Backend, stats.backend_used)})",
        f"objective       {stats.objective:.6g}  (throughput {objective.throughput:.6g}, "
        f"energy {objective.energy:.6g}, migration {objective.migration:.6g}, "
        f"locality {objective.locality:.6g}, deadline {objective.deadline:.6g}"
        + (f", fairness {objective.fairness:.6g}" if objective.fairness else "")
        + (f", completion {objective.completion:.6g}" if objective.completion else "")
        + (
            f", node preference {objective.node_preference:.6g}"
            if objective.node_preference
            else ""
        )
        + (f", aging {objective.aging:.6g})" if objective.aging else ")"),
    ]
    if stats.HasField("best_bound"):
        bound = f"best bound      {stats.best_bound:.6g}"
        if stats.HasField("relative_gap"):
            bound += f"  (gap {stats.relative_gap:.2%})"
        lines.append(bound)
    lines += [
        f"time            first plan {duration_seconds(stats.time_to_first_plan):.3f}s, "
        f"wall {duration_seconds(stats.wall_time):.3f}s",
        f"configurations  {stats.num_configurations} "
        f"(of {stats.num_configurations_enumerated} enumerated)",
    ]
    if stats.detail:
        lines.append(f"detail          {stats.detail}")
    return "\n".join(lines)


def format_response(resp: pb.SolveResponse) -> str:
    parts = [format_plan(resp.plan)]
    if resp.plan.queues:
        parts.append(format_queues(resp.plan))
    parts.append(format_stats(resp.stats, resp.plan.objective))
    return "\n\n".join(parts)
