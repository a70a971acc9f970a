"""The problem as arrays: jobs, nodes, configurations and the candidate (job, node) pairs.

The constraint families (``solver.exact.constraints``) are written over these arrays, vectorised
over jobs x nodes x configurations, instead of one Python object per variable or row. Built
once per formulation; reading every configuration's attributes is its only per-object loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver.domain import Config, Job, Node, Problem
from solver.exact.rows import BoolArray, FloatArray, IntArray, floats, ints, starts
from solver.perfmodel.configs import ConfigSet


@dataclass(frozen=True)
class Layout:
    """Jobs in request order; configurations flattened job by job; candidate pairs job-major."""

    jobs: tuple[Job, ...]
    job_names: list[str]
    nodes: tuple[Node, ...]
    node_names: list[str]
    node_type: IntArray
    """Code into type_names."""
    node_avail: IntArray
    """Available GPUs."""
    node_rack: IntArray
    """Code into rack_names."""
    type_names: list[str]
    type_idle: FloatArray
    """Idle watts per GPU of each type (nan for a type the cluster does not describe)."""
    rack_names: list[str]
    rack_code: dict[str, int]

    configs: list[Config]
    cfg_start: IntArray
    """Configurations of job j: cfg_start[j] .. cfg_start[j + 1] - 1."""
    cfg_job: IntArray
    cfg_local: IntArray
    """Index within its job's configurations."""
    cfg_gpus: IntArray
    cfg_type: IntArray
    cfg_tp: IntArray
    cfg_watts: FloatArray
    cfg_sps: FloatArray
    cfg_min_spread: IntArray
    """min_nodes + min_racks."""
    cfg_kept_only: BoolArray

    pair_job: IntArray
    pair_node: IntArray
    pair_start: IntArray
    """Candidate nodes of job j (of a type one of its configurations uses, with a free GPU):
    pairs pair_start[j] .. pair_start[j + 1] - 1, in node order."""

    @property
    def num_jobs(self) -> int:
        return len(self.jobs)

    @property
    def num_configs(self) -> int:
        return len(self.configs)

    @property
    def num_pairs(self) -> int:
        return int(self.pair_job.size)

    def has_configs(self) -> BoolArray:
        result: BoolArray = np.diff(self.cfg_start) > 0
        return result

    def pair_of(self, job: IntArray, node: IntArray) -> IntArray:
        """Pair index of each (job, node), -1 where the node is not a candidate of the job."""
        n = len(self.nodes)
        if not self.num_pairs:
            return ints(np.full(np.shape(job), -1))
        keys = self.pair_job * n + self.pair_node
        wanted = job * n + node
        at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
        return ints(np.where(keys[at] == wanted, at, -1))

    def pair_keys(self, pairs: IntArray | None = None) -> list[str]:
        """``job,node`` of each pair (all pairs by default): the text of x[...], z[...] names."""
        jobs = self.pair_job if pairs is None else self.pair_job[pairs]
        nodes = self.pair_node if pairs is None else self.pair_node[pairs]
        jn, nn = self.job_names, self.node_names
        return [f"{jn[j]},{nn[k]}" for j, k in zip(jobs.tolist(), nodes.tolist(), strict=True)]


def layout_of(problem: Problem, configs: ConfigSet) -> Layout:
    cluster = problem.cluster
    jobs = tuple(problem.jobs)
    nodes = tuple(cluster.nodes)
    type_code: dict[str, int] = {name: k for k, name in enumerate(cluster.gpu_types)}
    for n in nodes:
        type_code.setdefault(n.gpu_type, len(type_code))
    rack_code: dict[str, int] = {}
    for n in nodes:
        rack_code.setdefault(n.rack, len(rack_code))
    for rack in cluster.rack_power_budgets_watts:
        rack_code.setdefault(rack, len(rack_code))

    flat: list[Config] = []
    counts = []
    for job in jobs:
        options = configs.by_job.get(job.name, ())
        flat.extend(options)
        counts.append(len(options))
    cfg_start = starts(ints(counts))
    cfg_job = ints(np.repeat(np.arange(len(jobs)), counts))
    rows = [
        (
            type_code.setdefault(c.shape.gpu_type, len(type_code)),
            c.shape.data_parallel * c.shape.tensor_parallel * c.shape.pipeline_parallel,
            c.shape.tensor_parallel,
            c.watts,
            c.samples_per_second,
            c.min_nodes + c.min_racks,
            c.kept_only,
        )
        for c in flat
    ]
    cols = list(zip(*rows, strict=True)) if rows else [()] * 7
    type_names = list(type_code)
    idle = [
        cluster.gpu_types[t].idle_watts if t in cluster.gpu_types else float("nan")
        for t in type_names
    ]

    node_type = ints([type_code[n.gpu_type] for n in nodes])
    node_avail = ints([n.available_gpus for n in nodes])
    cfg_type = ints(cols[0])
    uses = np.zeros((len(jobs), len(type_names)), dtype=bool)
    uses[cfg_job, cfg_type] = True
    candidate = uses[:, node_type] & (node_avail > 0)[None, :]
    for j, job in enumerate(jobs):  # no pair of a job and a node it may not newly use
        if job.barred_nodes:
            candidate[j, list(cluster.positions(job.barred_nodes))] = False
    pair_job, pair_node = np.nonzero(candidate)
    pair_start = starts(ints(np.count_nonzero(candidate, axis=1)))
    return Layout(
        jobs=jobs,
        job_names=[j.name for j in jobs],
        nodes=nodes,
        node_names=[n.name for n in nodes],
        node_type=node_type,
        node_avail=node_avail,
        node_rack=ints([rack_code[n.rack] for n in nodes]),
        type_names=type_names,
        type_idle=floats(idle),
        rack_names=list(rack_code),
        rack_code=rack_code,
        configs=flat,
        cfg_start=cfg_start,
        cfg_job=cfg_job,
        cfg_local=ints(np.arange(len(flat)) - cfg_start[cfg_job]),
        cfg_gpus=ints(cols[1]),
        cfg_type=cfg_type,
        cfg_tp=ints(cols[2]),
        cfg_watts=floats(cols[3]),
        cfg_sps=floats(cols[4]),
        cfg_min_spread=ints(cols[5]),
        cfg_kept_only=np.asarray(cols[6], dtype=bool),
        pair_job=ints(pair_job),
        pair_node=ints(pair_node),
        pair_start=pair_start,
    )

