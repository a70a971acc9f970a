"""The constraint families of the full model, one ``add_*`` function each, and its objective.

Each family adds its variables and rows to a ``Formulation`` and is tested on its own by
leaving it out (``solver.exact.formulation.build``). Power is in milliwatts, each draw rounded
up and each budget down, so that the model can only be stricter than the checker.

The power families are in ``solver.exact.budgets`` and the objective in
``solver.exact.objective_terms``; all are listed here. Every family is written with numpy over
the formulation's layout (jobs x nodes x configurations as arrays, ``solver.exact.layout``):
no Python loop per variable or row.
Variables and rows come in the order a loop over jobs, nodes and configurations would list
them, so the model is the same, row for row, whatever its size.
"""

from __future__ import annotations

import numpy as np

from solver.exact.blocks import (
    RowPart,
    VarPart,
    add_row_parts,
    add_var_parts,
    interleave,
    job_keys,
    ones,
    placement,
)
from solver.exact.budgets import MILLIWATTS, add_power_budget, add_rack_power_budget
from solver.exact.milp import Formulation
from solver.exact.objective_terms import config_values, set_objective
from solver.exact.rows import ints, ragged_arange, starts


def add_choice_vars(f: Formulation) -> None:
    """y[j, i] for every job and configuration: the model's core, made before any family."""
    lay = f.layout
    n = lay.num_configs
    keys = job_keys(lay.job_names, lay.cfg_job, lay.cfg_local)
    f.index.y = f.add_vars("y", np.zeros(n), np.ones(n), keys)


def add_config_choice(f: Formulation) -> None:
    """Each job runs in at most one configuration."""
    lay = f.layout
    jobs = ints(np.flatnonzero(lay.has_configs()))
    indptr = starts(ints(np.diff(lay.cfg_start)[jobs]))
    keys = job_keys(lay.job_names, jobs)
    f.add_rows(
        "config_choice", "one_config", indptr, f.index.y, ones(lay.num_configs), -np.inf, 1, keys
    )


def add_placement_vars(f: Formulation) -> None:
    """x[j, n] on the nodes of the types the job's configurations use."""
    lay = f.layout
    p = lay.num_pairs
    f.index.x = f.add_vars("x", np.zeros(p), lay.node_avail[lay.pair_node], lay.pair_keys)


def add_gang_size(f: Formulation) -> None:
    """All or nothing: the GPUs placed equal the chosen configuration's GPU count."""
    lay = f.layout
    jobs = ints(np.flatnonzero(lay.has_configs()))
    x_count = ints(np.diff(lay.pair_start)[jobs])
    y_count = ints(np.diff(lay.cfg_start)[jobs])
    x_at, y_at = interleave([x_count, y_count])
    entries = np.empty(x_at.size + y_at.size, dtype=np.int64)
    coefs = np.empty_like(entries)
    entries[x_at], coefs[x_at] = placement(f), 1  # every pair and configuration is of such a job
    entries[y_at], coefs[y_at] = f.index.y, -lay.cfg_gpus
    part = RowPart(
        "gang_size",
        ints(np.arange(jobs.size)),
        x_count + y_count,
        entries,
        coefs,
        0,
        0,
        job_keys(lay.job_names, jobs),
    )
    add_row_parts(f, "gang_size", [part])


def add_gpu_type_match(f: Formulation) -> None:
    """A job uses only nodes of its chosen configuration's GPU type."""
    lay = f.layout
    types = len(lay.type_names)
    group = lay.cfg_job * types + lay.cfg_type
    order = np.argsort(group, kind="stable")
    groups, first, size = np.unique(group[order], return_index=True, return_counts=True)
    pair_group = np.searchsorted(groups, lay.pair_job * types + lay.node_type[lay.pair_node])
    count = ints(size[pair_group])  # configurations of the node's type: y terms of the row
    indptr = starts(count + 1)
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    coefs = np.empty(int(indptr[-1]), dtype=np.int64)
    indices[indptr[:-1]], coefs[indptr[:-1]] = placement(f), 1
    # Term k of every row with more than k y terms at once (rows sorted by their count).
    longest_first = np.argsort(-count, kind="stable")
    at = indptr[:-1][longest_first] + 1
    y_of = first[pair_group[longest_first]]
    coef = -lay.node_avail[lay.pair_node[longest_first]]
    y = f.index.y[order]
    longer = np.searchsorted(-count[longest_first], -np.arange(int(count.max(initial=0))), "left")
    for k, n in enumerate(longer.tolist()):
        indices[at[:n] + k], coefs[at[:n] + k] = y[y_of[:n] + k], coef[:n]
    f.add_rows("gpu_type_match", "type_match", indptr, indices, coefs, -np.inf, 0, lay.pair_keys)


def add_tensor_groups_in_node(f: Formulation) -> None:
    """Tensor-parallel groups never cross nodes: x[j, n] = tp * q[j, n] for the chosen tp."""
    lay = f.layout
    x = placement(f)
    multi = np.flatnonzero(lay.cfg_tp > 1)
    top = int(lay.cfg_tp.max(initial=1)) + 1
    degree_key, degree_of_cfg = np.unique(
        lay.cfg_job[multi] * top + lay.cfg_tp[multi], return_inverse=True
    )
    tp_job, tp_degree = ints(degree_key // top), ints(degree_key % top)
    nd = ints(np.bincount(tp_job, minlength=lay.num_jobs))
    first_degree = starts(nd)[:-1]
    q_pairs = ints(np.flatnonzero(nd[lay.pair_job] > 0))
    q_job = lay.pair_job[q_pairs]
    nq = ints(np.bincount(q_job, minlength=lay.num_jobs))
    tp_at, q_at = interleave([nd, nq])
    names = lay.job_names
    tp, q = add_var_parts(
        f,
        [
            VarPart("tp", tp_at, 0, 1, job_keys(names, tp_job, tp_degree)),
            VarPart(
                "q",
                q_at,
                0,
                lay.node_avail[lay.pair_node[q_pairs]] // tp_degree[first_degree[q_job]],
                lambda: lay.pair_keys(q_pairs),
            ),
        ],
    )
    f.index.tp_job, f.index.tp_degree, f.index.tp = tp_job, tp_degree, tp
    q_of_pair = np.full(lay.num_pairs, -1, dtype=np.int64)
    q_of_pair[q_pairs] = q
    f.index.q = q_of_pair

    # Per job: tp_chosen[j, t] for each degree, then tp_groups[j, n, t] for each node and degree.
    chosen_at, groups_at = interleave([nd, nq * nd])
    by_degree = np.argsort(degree_of_cfg, kind="stable")
    n_cfg = ints(np.bincount(degree_of_cfg, minlength=tp_job.size))
    t_at, y_at = interleave([ones(tp_job.size), n_cfg])
    entries = np.empty(y_at.size + t_at.size, dtype=np.int64)
    coefs = np.empty_like(entries)
    entries[t_at], coefs[t_at] = tp, 1
    entries[y_at], coefs[y_at] = f.index.y[multi[by_degree]], -1
    chosen = RowPart(
        "tp_chosen",
        chosen_at,
        n_cfg + 1,
        entries,
        coefs,
        0,
        0,
        job_keys(names, tp_job, tp_degree),
    )
    g_pair = np.repeat(q_pairs, nd[q_job])
    g_degree = first_degree[lay.pair_job[g_pair]] + ragged_arange(nd[q_job])
    t = tp_degree[g_degree]
    g_entries = np.stack([x[g_pair], q_of_pair[g_pair]], axis=1).ravel()
    g_coefs = np.stack([ones(t.size), -t], axis=1).ravel()
    node_names = lay.node_names

    def group_keys() -> list[str]:
        return [
            f"{names[j]},{node_names[n]},{d}"
            for j, n, d in zip(
                lay.pair_job[g_pair].tolist(),
                lay.pair_node[g_pair].tolist(),
                t.tolist(),
                strict=True,
            )
        ]

    groups = RowPart(
        "tp_groups",
        groups_at,
        np.full(t.size, 2, np.int64),
        ints(g_entries),
        ints(g_coefs),
        0,
        0,
        group_keys,
        enforce=tp[g_degree],
    )
    add_row_parts(f, "tensor_groups_in_node", [chosen, groups])


def add_gpu_capacity(f: Formulation) -> None:
    """No node gives out more GPUs than it has available."""
    lay = f.layout
    x = placement(f)
    by_node = np.argsort(lay.pair_node, kind="stable")
    count = ints(np.bincount(lay.pair_node, minlength=len(lay.nodes)))
    nodes = ints(np.flatnonzero(count > 1))
    pointer = starts(count)
    rows = np.repeat(pointer[nodes], count[nodes]) + ragged_arange(count[nodes])
    entries = x[by_node[rows]]
    part = RowPart(
        "capacity",
        ints(np.arange(nodes.size)),
        count[nodes],
        ints(entries),
        ones(entries.size),
        -np.inf,
        lay.node_avail[nodes],
        lambda: [lay.node_names[n] for n in nodes.tolist()],
    )
    add_row_parts(f, "gpu_capacity", [part])


def add_locality(f: Formulation) -> None:
    """z and r mark the nodes and racks a job uses; the objective charges w_L per each."""
    if f.problem.weights.locality <= 0:
        return
    lay = f.layout
    x = placement(f)
    p = lay.num_pairs
    racks = len(lay.rack_names)
    rack_key, first, r_of_pair = np.unique(
        lay.pair_job * racks + lay.node_rack[lay.pair_node], return_index=True, return_inverse=True
    )
    new_rack = np.zeros(p, dtype=np.int64)
    new_rack[first] = 1
    z_at, r_at_pair = interleave([ones(p), new_rack])
    r_job, r_rack = ints(rack_key // racks), ints(rack_key % racks)
    # r of a (job, rack) comes right after the z of the job's first node in that rack.
    r_at = ints(np.empty(first.size, dtype=np.int64))
    r_at[np.argsort(first)] = r_at_pair
    z, r = add_var_parts(
        f,
        [
            VarPart("z", z_at, 0, 1, lay.pair_keys),
            VarPart(
                "r",
                r_at,
                0,
                1,
                job_keys(lay.job_names, r_job, [lay.rack_names[k] for k in r_rack.tolist()]),
            ),
        ],
    )
    f.index.z = z
    f.index.r_job, f.index.r_rack, f.index.r = r_job, r_rack, r
    # Per pair: node_used (x - avail z <= 0), then rack_used (z - r <= 0).
    indices = np.empty((p, 4), dtype=np.int32)
    indices[:, 0], indices[:, 1], indices[:, 2], indices[:, 3] = x, z, z, r[r_of_pair]
    coefs = np.empty((p, 4), dtype=np.int64)
    coefs[:, 0], coefs[:, 1], coefs[:, 2], coefs[:, 3] = 1, -lay.node_avail[lay.pair_node], 1, -1

    def keys() -> list[str]:
        return [k for k in lay.pair_keys() for _ in range(2)]

    f.add_rows(
        "locality",
        ("node_used", "rack_used"),
        ints(np.arange(0, 4 * p + 1, 2)),
        indices.ravel(),
        coefs.ravel(),
        -np.inf,
        0,
        keys,
        kind=np.tile(np.array([0, 1], dtype=np.int8), p),
    )


def add_migration(f: Formulation) -> None:
    """keep[j] holds a running job on its GPUs in its shape; non-preemptible jobs must keep."""
    lay = f.layout
    x = placement(f)
    node_index = {n: k for k, n in enumerate(lay.node_names)}
    running, same, kept, current_job, current_node, current_count = [], [], [], [], [], []
    for j, job in enumerate(lay.jobs):
        if job.current is None or job.current.mig is not None:
            continue  # a job on a MIG instance stays only on it (solver.exact.mig_model)
        running.append(j)
        a, b = int(lay.cfg_start[j]), int(lay.cfg_start[j + 1])
        same.append([k for k in range(a, b) if lay.configs[k].shape == job.current.shape])
        kept.append([k for k in range(a, b) if lay.cfg_kept_only[k]])
        for node, gpus in job.current.gpus_per_node().items():
            current_job.append(len(running) - 1)
            current_node.append(node_index.get(node, -1))
            current_count.append(gpus)
    run = ints(running)
    c_run, c_node = ints(current_job), ints(current_node)
    c_pair = lay.pair_of(run[c_run], np.maximum(c_node, 0))
    c_pair[c_node < 0] = -1
    on_candidates = np.ones(run.size, dtype=bool)
    on_candidates[c_run[c_pair < 0]] = False  # a node it runs on is not a candidate: can't keep
    keepable = on_candidates & ints([len(s) > 0 for s in same]).astype(bool)
    hard = np.array([not lay.jobs[j].preemptible for j in running], dtype=bool)
    stuck = ~keepable & hard  # can't keep its shape, nor stop: infeasible, as is the request
    names = lay.job_names

    infeasible_at, keep_at = interleave([stuck.astype(np.int64), keepable.astype(np.int64)])
    infeasible, keep = add_var_parts(
        f,
        [
            VarPart(
                "infeasible",
                infeasible_at,
                1,
                1,
                lambda: [f"keep_shape[{names[j]}]" for j in run[stuck].tolist()],
            ),
            VarPart(
                "keep",
                keep_at,
                hard[keepable].astype(np.float64),
                1,
                job_keys(names, run[keepable]),
            ),
        ],
    )
    f.contradictions += int(stuck.sum())
    keep_of_run = np.full(run.size, -1, dtype=np.int64)
    keep_of_run[keepable] = keep
    f.index.keep = np.full(lay.num_jobs, -1, dtype=np.int64)
    f.index.keep[run] = keep_of_run

    # Per running job: its contradiction, kept_only rows, keep_shape, keep_gpus per candidate.
    n_kept = ints([len(k) for k in kept])
    pairs_of = ints(np.diff(lay.pair_start)[run])
    c_at, k_at, s_at, g_at = interleave(
        [stuck.astype(np.int64), n_kept, keepable.astype(np.int64), np.where(keepable, pairs_of, 0)]
    )
    contradiction = RowPart(
        "contradiction",
        c_at,
        ones(infeasible.size),
        infeasible,
        ones(infeasible.size),
        -np.inf,
        0,
        lambda: [f"keep_shape[{names[j]}]" for j in run[stuck].tolist()],
    )
    kept_cfg = ints([k for ks in kept for k in ks])
    kept_run = ints(np.repeat(np.arange(run.size), n_kept))
    kept_keep = keep_of_run[kept_run]
    with_keep = kept_keep >= 0
    k_entries = [
        [int(v)] + ([int(kk)] if kk >= 0 else [])
        for v, kk in zip(f.index.y[kept_cfg], kept_keep, strict=True)
    ]
    kept_only = RowPart(
        "kept_only",
        k_at,
        1 + with_keep.astype(np.int64),
        ints([v for e in k_entries for v in e]),
        ints([c for e in k_entries for c in [1, -1][: len(e)]]),
        -np.inf,
        0,
        lambda: [f"y[{names[lay.cfg_job[k]]},{lay.cfg_local[k]}]" for k in kept_cfg.tolist()],
    )
    same_cfg = ints([k for s, ok in zip(same, keepable.tolist(), strict=True) if ok for k in s])
    n_same = ints([len(s) for s, ok in zip(same, keepable.tolist(), strict=True) if ok])
    keep_shape = RowPart(
        "keep_shape",
        s_at,
        n_same,
        f.index.y[same_cfg],
        ones(same_cfg.size),
        1,
        np.inf,
        job_keys(names, run[keepable]),
        enforce=keep,
    )
    count = np.zeros(lay.num_pairs, dtype=np.int64)
    held = c_pair >= 0
    count[c_pair[held]] = ints(current_count)[held]
    starts_k = lay.pair_start[run[keepable]]
    g_pairs = ints(np.repeat(starts_k, pairs_of[keepable]) + ragged_arange(pairs_of[keepable]))
    keep_gpus = RowPart(
        "keep_gpus",
        g_at,
        ones(g_pairs.size),
        x[g_pairs],
        ones(g_pairs.size),
        count[g_pairs],
        count[g_pairs],
        lambda: lay.pair_keys(g_pairs),
        enforce=np.repeat(keep, pairs_of[keepable]),
    )
    add_row_parts(f, "migration", [contradiction, kept_only, keep_shape, keep_gpus])


__all__ = [
    "MILLIWATTS",
    "add_choice_vars",
    "add_config_choice",
    "add_gang_size",
    "add_gpu_capacity",
    "add_gpu_type_match",
    "add_locality",
    "add_migration",
    "add_placement_vars",
    "add_power_budget",
    "add_rack_power_budget",
    "add_tensor_groups_in_node",
    "config_values",
    "set_objective",
]
