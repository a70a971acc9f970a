"""Slice jobs consolidated before the whole-GPU solve (docs/mig.md, "Consolidating slices").

The packing after the whole-GPU solve only fills GPUs the whole-GPU plan leaves; when GPUs are
short, whole GPUs that small jobs hold are what large jobs wait for. This packer places slice
jobs first, each only on an instance where it keeps at least ``LOSSLESS_SHARE`` of its best
rate (a small job that uses a fraction of a GPU loses little on an instance that size), new
instances going to GPUs that already hold some (fewest GPUs partitioned); the whole-GPU solve
then gets the GPUs left (solver.core.mig_consolidate).
"""

from __future__ import annotations

from solver.domain import Config, Job
from solver.mig import MigInstance
from solver.search.mig_gpus import MigGpu
from solver.search.slices import Packer

LOSSLESS_SHARE = 0.9
"""A slice job is consolidated only onto an instance where its predicted rate is at least this
share of its best (a design choice: a job slowed more than that keeps a whole GPU)."""


class LosslessPacker(Packer):
    """The packer restricted to instances where each job keeps LOSSLESS_SHARE of its rate."""

    def _choose(
        self, job: Job, gpu: MigGpu, inst: MigInstance, new: bool
    ) -> tuple[float, Config] | None:
        got = super()._choose(job, gpu, inst, new)
        if got is None:
            return None
        best = self.configs.best_samples_per_second[job.name]
        return got if got[1].samples_per_second >= LOSSLESS_SHARE * best else None
