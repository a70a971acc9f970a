"""The power families of the full model: the cluster's budget and the racks' budgets, in mW.

Each configuration's draw is rounded up and each budget down (milliwatts), so the model can
only be stricter than the checker. Written with numpy over the layout, like every family
(``solver.exact.constraints``, which lists them with the others).
"""

from __future__ import annotations

import math

import numpy as np

from solver.exact.blocks import (
    RowPart,
    VarPart,
    add_row_parts,
    add_var_parts,
    interleave,
    ones,
    placement,
)
from solver.exact.milp import Formulation
from solver.exact.rows import IntArray, ints, ragged_arange
from solver.perfmodel import budgets as rooms

MILLIWATTS = 1000
"""Power rows count milliwatts: each configuration's draw rounded up, each budget down, so the
model is at most 1 mW per running job stricter than the checker."""


def add_power_budget(f: Formulation) -> None:
    """Assigned GPUs at their configuration's power, all others idle, within the budget (mW)."""
    budget = f.problem.cluster.power_budget_watts
    if budget is None:
        return
    lay = f.layout
    extra = lay.cfg_watts - lay.type_idle[lay.cfg_type] * lay.cfg_gpus
    coef = ints(np.ceil(extra * MILLIWATTS))
    used = np.flatnonzero(coef)
    room = rooms.power_room(f.problem.cluster)
    assert room is not None
    cap = math.floor(room * MILLIWATTS)
    f.add_rows(
        "power_budget",
        "power_budget",
        ints([0, used.size]),
        f.index.y[used],
        coef[used],
        -np.inf,
        cap,
        lambda: ["cluster"],
    )


def add_rack_power_budget(f: Formulation) -> None:
    """Per rack, in mW: w[j, k, i] = GPUs of job j in rack k when in configuration i."""
    lay = f.layout
    budgets = f.problem.cluster.rack_power_budgets_watts
    if not budgets:
        return
    x = placement(f)
    racks = [lay.rack_code[r] for r in budgets]
    rank = np.full(len(lay.rack_names), -1, dtype=np.int64)
    rank[racks] = np.arange(len(racks))
    pair_rank = rank[lay.node_rack[lay.pair_node]]
    in_budget = np.flatnonzero(pair_rank >= 0)
    # Entries (budgeted rack, job with candidates in it), rack by rack in budget order.
    entry_key, entry_of = np.unique(
        pair_rank[in_budget] * lay.num_jobs + lay.pair_job[in_budget], return_inverse=True
    )
    e_rack, e_job = ints(entry_key // lay.num_jobs), ints(entry_key % lay.num_jobs)
    cap = ints(
        np.bincount(
            entry_of, weights=lay.node_avail[lay.pair_node[in_budget]], minlength=e_job.size
        )
    )
    n_cfg = ints(np.diff(lay.cfg_start)[e_job])
    w_entry = np.repeat(np.arange(e_job.size), n_cfg)
    w_cfg = ints(lay.cfg_start[e_job][w_entry] + ragged_arange(n_cfg))
    rack_name = [lay.rack_names[racks[k]] for k in e_rack.tolist()]
    names = lay.job_names

    def w_keys() -> list[str]:
        return [
            f"{names[e_job[e]]},{rack_name[e]},{i}"
            for e, i in zip(w_entry.tolist(), lay.cfg_local[w_cfg].tolist(), strict=True)
        ]

    [w] = add_var_parts(f, [VarPart("w", ints(np.arange(w_cfg.size)), 0, cap[w_entry], w_keys)])
    f.index.w_job, f.index.w_rack, f.index.w_config, f.index.w = (
        e_job[w_entry],
        ints(np.asarray(racks, dtype=np.int64)[e_rack[w_entry]]),
        w_cfg,
        w,
    )

    # Per rack: for each of its entries, rack_share_on per configuration then rack_share;
    # then the rack's rack_power row.
    body_at, power_at = interleave(
        [ints(np.bincount(e_rack, weights=n_cfg + 1, minlength=len(racks))), ones(len(racks))]
    )
    share_on_local, share_local = interleave([n_cfg, ones(e_job.size)])
    share_on = RowPart(
        "rack_share_on",
        body_at[share_on_local],
        np.full(w.size, 2, np.int64),
        _pairs(w, f.index.y[w_cfg]),
        _pairs(ones(w.size), -cap[w_entry]),
        -np.inf,
        0,
        w_keys,
    )
    x_sorted = x[in_budget[np.argsort(entry_of, kind="stable")]]
    n_x = ints(np.bincount(entry_of, minlength=e_job.size))
    w_at, x_at = interleave([n_cfg, n_x])
    entries = np.empty(w_at.size + x_at.size, dtype=np.int64)
    coefs = np.empty_like(entries)
    entries[w_at], coefs[w_at] = w, 1
    entries[x_at], coefs[x_at] = x_sorted, -1
    share = RowPart(
        "rack_share",
        body_at[share_local],
        n_cfg + n_x,
        entries,
        coefs,
        0,
        0,
        lambda: [f"{names[j]},{rack_name[e]}" for e, j in enumerate(e_job.tolist())],
    )
    per_gpu = lay.cfg_watts / lay.cfg_gpus - lay.type_idle[lay.cfg_type]
    w_coef = ints(np.ceil(per_gpu[w_cfg] * MILLIWATTS))
    used = np.flatnonzero(w_coef)  # w is listed rack by rack: so are these terms
    room = rooms.rack_power_room(f.problem.cluster)
    caps = [math.floor(room[rack] * MILLIWATTS) for rack in budgets]
    power = RowPart(
        "rack_power",
        power_at,
        ints(np.bincount(e_rack[w_entry[used]], minlength=len(racks))),
        w[used],
        w_coef[used],
        -np.inf,
        ints(caps),
        lambda: list(budgets),
    )
    add_row_parts(f, "rack_power_budget", [share_on, share, power])


def _pairs(first: IntArray, second: IntArray) -> IntArray:
    """Two terms per row: first[k], second[k], row after row."""
    return ints(np.stack([first, second], axis=1).ravel())
