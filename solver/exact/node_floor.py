"""The node floor in the full model (docs/objective.md, "Node floor"; solver.scoring.node_floor).

Per priced node: ``busy`` is 1 when a job has a GPU there, ``free`` counts its GPUs no job
uses while busy, and the objective charges ``w_E (base busy + idle free) / P_max``. At an
optimum ``free`` is as low as its row allows, ``gpus busy - used``, so the model's value is the
scorer's (to CP-SAT's objective step).
"""

from __future__ import annotations

import numpy as np

from solver.exact.backends.cpsat import SCALE
from solver.exact.blocks import RowPart, VarPart, add_row_parts, add_var_parts, placement
from solver.exact.milp import Formulation
from solver.exact.rows import IntArray, floats, ints, ragged_arange, starts
from solver.scoring.node_floor import priced_floor_nodes


def floor_nodes(f: Formulation) -> IntArray:
    """Layout codes of the priced nodes some job could use, in node order."""
    lay = f.layout
    priced = priced_floor_nodes(f.problem.cluster)
    if not priced or f.problem.weights.energy <= 0:
        return ints([])
    candidate = np.zeros(len(lay.nodes), dtype=bool)
    candidate[lay.pair_node] = True
    return ints([k for k, name in enumerate(lay.node_names) if name in priced and candidate[k]])


def add_node_floor(f: Formulation) -> None:
    """busy[n] marks a priced node a job uses; free[n] its GPUs left idle; both priced."""
    lay = f.layout
    nodes = floor_nodes(f)
    f.index.floor_node = nodes
    if not nodes.size:
        return
    x = placement(f)
    m = nodes.size
    gpus = ints([lay.nodes[k].gpu_count for k in nodes.tolist()])
    names = [lay.node_names[k] for k in nodes.tolist()]
    busy_at, free_at = ints(np.arange(0, 2 * m, 2)), ints(np.arange(1, 2 * m, 2))
    busy, free = add_var_parts(
        f,
        [
            VarPart("busy", busy_at, 0, 1, lambda: names),
            VarPart("free", free_at, 0, gpus, lambda: names),
        ],
    )
    f.index.busy, f.index.free = busy, free
    # The pairs of each priced node, node by node.
    code = np.full(len(lay.nodes), -1, dtype=np.int64)
    code[nodes] = np.arange(m)
    pairs = np.flatnonzero(code[lay.pair_node] >= 0)
    pairs = pairs[np.argsort(code[lay.pair_node[pairs]], kind="stable")]
    count = ints(np.bincount(code[lay.pair_node[pairs]], minlength=m))
    first = starts(count)
    row_x = x[pairs]
    # link: sum x - avail busy <= 0; floor: gpus busy - sum x - free <= 0.
    link_idx = np.empty(pairs.size + m, dtype=np.int64)
    link_coef = np.empty(pairs.size + m, dtype=np.int64)
    at_x = np.repeat(first[:-1] + np.arange(m), count) + ragged_arange(count)
    at_b = first[1:] + np.arange(m)
    link_idx[at_x], link_coef[at_x] = row_x, 1
    link_idx[at_b], link_coef[at_b] = busy, -lay.node_avail[nodes]
    floor_idx = np.empty(pairs.size + 2 * m, dtype=np.int64)
    floor_coef = np.empty(pairs.size + 2 * m, dtype=np.int64)
    at_b2 = first[:-1] + 2 * np.arange(m)
    at_x2 = np.repeat(at_b2 + 1, count) + ragged_arange(count)
    at_f2 = first[1:] + 2 * np.arange(m) + 1
    floor_idx[at_b2], floor_coef[at_b2] = busy, gpus
    floor_idx[at_x2], floor_coef[at_x2] = row_x, -1
    floor_idx[at_f2], floor_coef[at_f2] = free, -1
    add_row_parts(
        f,
        "node_floor",
        [
            RowPart(
                "node_busy", busy_at, count + 1, ints(link_idx), ints(link_coef), -np.inf, 0,
                lambda: names,
            ),
            RowPart(
                "node_free", free_at, count + 2, ints(floor_idx), ints(floor_coef), -np.inf, 0,
                lambda: names,
            ),
        ],
    )  # fmt: skip
    priced = priced_floor_nodes(f.problem.cluster)
    scale = f.problem.weights.energy / f.problem.cluster.max_gpu_watts()
    base = floats([priced[n][0] for n in names])
    idle = floats([priced[n][1] for n in names])
    # Each charge rounded down to CP-SAT's objective step: its coefficients are then exact
    # (no rounding slack on its bound), and the model can only overrate a plan, by under 1e-6
    # per node and GPU, so its bound stays a bound of the scorer's objective.
    charges = np.ceil(-scale * np.concatenate([base, idle]) * SCALE) / SCALE
    f.add_objective(ints(np.concatenate([busy, free])), floats(charges))


def hint_node_floor(f: Formulation, out: np.ndarray, count: IntArray) -> None:
    """busy and free of a plan whose GPUs per candidate pair are `count`."""
    ix, lay = f.index, f.layout
    if not ix.floor_node.size:
        return
    used = np.bincount(lay.pair_node, weights=count, minlength=len(lay.nodes))[ix.floor_node]
    gpus = ints([lay.nodes[k].gpu_count for k in ix.floor_node.tolist()])
    busy = used > 0
    out[ix.busy] = busy
    out[ix.free] = np.where(busy, np.maximum(gpus - used, 0), 0)


__all__ = ["add_node_floor", "floor_nodes", "hint_node_floor"]
