"""The aggregated model's solution as a guide to place: each chosen job's configuration and
how its GPUs split over racks.

The model splits each power class's GPUs over racks (not each job's), so the split is handed
out to the class's chosen jobs here, largest first: a job goes whole into the tightest rack
that holds it, else in whole tensor groups from the racks with the most left. Split finer (one
GPU here, one there, as the model's totals allow), a tensor-parallel job's groups were rounded
into racks the model had filled, and the rack's watts went with them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from solver.domain import Config, Problem

PowerClass = tuple[str, float, int, frozenset[str]]
"""A GPU type, the watts per GPU above idle of configurations of it, their tensor-parallel
degree where the split counts whole groups (else 0: GPUs), and the barred nodes of their jobs
where the split follows rules (``bound_rules.RackRules``; else empty)."""


@dataclass(frozen=True)
class Guide:
    """An aggregated solution to place: each job's configuration, and its rack split."""

    choice: dict[str, Config]
    racks: dict[str, dict[str, float]]


def extract_guide(
    problem: Problem,
    opts: Mapping[str, Sequence[Config]],
    y: Mapping[str, list[tuple[int, int]]],
    classes: Mapping[PowerClass, list[tuple[str, int, int, float]]],
    splits: Mapping[PowerClass, list[tuple[str, int]]],
    values: Sequence[float] | npt.NDArray[np.float64],
) -> Guide:
    """Each job's configuration of largest value in `values` when it is at least a half, and
    the GPUs the solution puts in each rack for it."""
    choice: dict[str, Config] = {}
    chosen: dict[str, int] = {}
    for j in problem.jobs:
        weight: dict[int, float] = {}
        for i, col in y[j.name]:
            weight[i] = weight.get(i, 0.0) + float(values[col])
        if not weight or max(weight.values()) < 0.5 - 1e-9:
            continue
        chosen[j.name] = max(weight, key=lambda i: (weight[i], -i))
        choice[j.name] = opts[j.name][chosen[j.name]]
    racks: dict[str, dict[str, float]] = {}
    for key, members in classes.items():
        unit = key[2] or 1
        left = {r: unit * float(values[z]) for r, z in splits.get(key, ())}
        mine = [
            (gpus * float(values[col]), job, opts[job][i].tensor_parallel)
            for job, i, col, gpus in members
            if chosen.get(job) == i
        ]
        for need, job, group in sorted(mine, key=lambda m: (-m[0], -m[2])):
            # (need 0: a running job kept on its GPUs, in a column of its own: no split)
            split = split_over_racks(need, group, left) if need > 1e-6 else {}
            if split:
                racks[job] = split
    return Guide(choice, racks)


def split_over_racks(need: float, group: float, left: dict[str, float]) -> dict[str, float]:
    """A chosen job's GPUs from its class's GPUs left per rack (taken from `left`): the
    tightest rack that holds it whole, else whole tensor groups from the racks with the most
    left, else what is left (the model's split need not be in whole groups)."""
    eps = 1e-6
    whole = [r for r, v in left.items() if v >= need - eps]
    if whole:
        rack = min(whole, key=lambda r: (left[r], r))
        left[rack] -= need
        return {rack: need}
    split: dict[str, float] = {}
    for unit in (group, 0.0):  # whole groups first, then what is left
        for rack in sorted(left, key=lambda r: (-left[r], r)):
            room = unit * math.floor((left[rack] + eps) / unit) if unit else left[rack]
            take = min(need, room)
            if take > eps:
                split[rack] = split.get(rack, 0.0) + take
                left[rack] -= take
                need -= take
            if need <= eps:
                return split
    return split
