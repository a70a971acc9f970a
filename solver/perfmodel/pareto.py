"""The Pareto filter of many jobs' configurations at once, in array operations.

Per job, in order of throughput (then power, then GPUs; a stable order), a configuration goes
when an earlier one of the same job dominates it (solver.perfmodel.configs.dominates), unless it
has the job's running shape. The sequential filter drops a configuration when a *kept* earlier
one dominates it; dominance is transitive, so an earlier dropped one is itself dominated by an
earlier kept one and the two rules agree. The survivors are deduplicated by (shape, clock),
the first in that order staying, and sorted by GPU type, GPUs, tensor, pipeline degree and
clock descending.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from solver.domain import Shape
from solver.perfmodel.enumeration import Row

_SHAPE_FIELDS = operator.attrgetter(
    "gpu_type", "data_parallel", "tensor_parallel", "pipeline_parallel"
)


def pareto_rows(groups: Sequence[Sequence[Row]], keeps: Sequence[Shape | None]) -> list[list[int]]:
    """Per group (one job's rows), the indices of the rows that stay, in their final order."""
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    rows = [r for g in groups for r in g]
    if not rows:
        return [[] for _ in groups]
    shapes, clocks, sps_, watts_, _, nodes_, *_ = zip(*rows, strict=True)
    names, dps, tps, pps = zip(*map(_SHAPE_FIELDS, shapes), strict=True)
    type_rank = {t: i for i, t in enumerate(sorted(set(names)))}
    kind = np.array([type_rank[t] for t in names], dtype=np.int64)
    tp = np.array(tps, dtype=np.int64)
    pp = np.array(pps, dtype=np.int64)
    gpus = np.array(dps, dtype=np.int64) * tp * pp
    clock = np.array(clocks, dtype=np.int64)
    sps = np.array(sps_, dtype=np.float64)
    watts = np.array(watts_, dtype=np.float64)
    nodes = np.array(nodes_, dtype=np.int64)
    starts = (np.cumsum(sizes) - sizes).tolist()
    keep = np.zeros(len(rows), dtype=np.bool_)
    for g, k in enumerate(keeps):
        if k is not None:
            keep[starts[g] : starts[g] + len(groups[g])] = [r[0] == k for r in groups[g]]
    group = np.repeat(np.arange(len(groups)), sizes)

    # Only a configuration of the same job and GPU type dominates: segments of those, each in
    # the filter's order (stable: ties keep the enumeration order).
    order = np.lexsort((gpus, watts, -sps, kind, group))
    kind, tp, pp, gpus, clock = kind[order], tp[order], pp[order], gpus[order], clock[order]
    sps, watts, nodes, keep = sps[order], watts[order], nodes[order], keep[order]
    group = group[order]
    segment = group * len(type_rank) + kind
    new_segment = np.ones(segment.size, dtype=np.bool_)
    new_segment[1:] = segment[1:] != segment[:-1]
    seg_starts = np.flatnonzero(new_segment)
    seg_sizes = np.diff(np.append(seg_starts, segment.size))

    # Every pair (i, j) of one segment with i before j: is j dominated by i?
    pairs = seg_sizes * seg_sizes
    pair_seg = np.repeat(np.arange(seg_sizes.size), pairs)
    local = np.arange(int(pairs.sum())) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    width = seg_sizes[pair_seg]
    a, b = local // width, local % width
    before = a < b
    base = seg_starts[pair_seg[before]]
    i, j = base + a[before], base + b[before]
    same = (gpus[i] == gpus[j]) & (tp[i] == tp[j]) & (sps[i] == sps[j]) & (watts[i] == watts[j])
    dominated = (
        (gpus[i] <= gpus[j])
        & (watts[i] <= watts[j])
        & (sps[i] >= sps[j])
        & (nodes[i] <= nodes[j])
        & (tp[j] % tp[i] == 0)
        & ~same
    )
    dropped = np.bincount(j[dominated], minlength=len(rows)) > 0
    stays = np.flatnonzero(~dropped | keep)

    final = stays[
        np.lexsort((-clock[stays], pp[stays], tp[stays], gpus[stays], kind[stays], group[stays]))
    ]
    key = np.stack([group, kind, gpus, tp, pp, clock])[:, final]
    first = np.ones(final.size, dtype=np.bool_)
    first[1:] = (key[:, 1:] != key[:, :-1]).any(axis=0)  # (shape, clock) seen: a duplicate
    final = final[first]
    out: list[list[int]] = [[] for _ in groups]
    for g, row in zip(group[final].tolist(), order[final].tolist(), strict=True):
        out[g].append(row - starts[g])
    return out
