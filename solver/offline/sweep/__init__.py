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
``<prefix>-points.jsonl`` journals each point as it comes back, for ``--resume``.

The package: ``grid`` (the weight grid and one point solved), ``front`` (the Pareto front and
the changes along it), ``run`` (the sweep), ``journal`` (the points as they come back),
``figure``, ``outputs`` (the files) and ``cli``.
"""

from __future__ import annotations

from solver.offline.sweep.cli import add_arguments, command
from solver.offline.sweep.figure import plot_sweep
from solver.offline.sweep.front import (
    EPS,
    Change,
    dominates,
    front_changes,
    pareto_front,
    same_place,
)
from solver.offline.sweep.grid import (
    MAX_SWEEP_POINTS,
    SHORT,
    JobChoice,
    SweepError,
    SweepPoint,
    SweepTask,
    grid_size,
    parse_weight_spec,
    solve_point,
    weight_grid,
)
from solver.offline.sweep.outputs import CSV_HEADER, csv_rows, sweep_markdown, write_outputs
from solver.offline.sweep.run import SweepOutcome, prepare, run_sweep

__all__ = [
    "CSV_HEADER",
    "EPS",
    "MAX_SWEEP_POINTS",
    "SHORT",
    "Change",
    "JobChoice",
    "SweepError",
    "SweepOutcome",
    "SweepPoint",
    "SweepTask",
    "add_arguments",
    "command",
    "csv_rows",
    "dominates",
    "front_changes",
    "grid_size",
    "pareto_front",
    "parse_weight_spec",
    "plot_sweep",
    "prepare",
    "run_sweep",
    "same_place",
    "solve_point",
    "sweep_markdown",
    "weight_grid",
    "write_outputs",
]
