"""Until the search packs MIG slices (issue 20, step 5), MIG snapshots are solved on whole GPUs.

A GPU with MIG instances is made unavailable to the solver's paths, whose plans then never put
a whole-GPU job on a partitioned GPU nor change a layout; slice jobs run on whole GPUs (which
they may, having allowed slices) or wait. Layouts stay in the problem, so the checker applies
every MIG rule to these plans, and a plan valid here is valid for the snapshot (this only takes
GPUs away).
"""

from __future__ import annotations

import dataclasses

from solver.domain import Problem


def whole_gpus_only(problem: Problem) -> Problem:
    """The problem with every partitioned GPU unavailable; the same object without MIG."""
    if not any(n.mig_layouts for n in problem.cluster.nodes):
        return problem
    nodes = tuple(
        dataclasses.replace(
            n,
            unavailable_gpu_indices=n.unavailable_gpu_indices
            | {x.gpu_index for x in n.mig_layouts if x.instances},
        )
        if n.mig_layouts
        else n
        for n in problem.cluster.nodes
    )
    return dataclasses.replace(problem, cluster=dataclasses.replace(problem.cluster, nodes=nodes))
