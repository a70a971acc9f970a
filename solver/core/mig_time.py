"""How a MIG snapshot's time divides: the whole-GPU paths' share, what packing the slices and
bounding them keep back, and where the consolidated variant (solver.core.mig_consolidate)
gets the second half of the whole-GPU time."""

from __future__ import annotations

import dataclasses
import time

from solver.core.deadline import Deadline
from solver.core.mig import answer_margin, uses_mig, variant_end
from solver.core.mig_consolidate import short_of_gpus
from solver.core.mig_exact import EXACT
from solver.core.settings import SolverSettings
from solver.domain import Problem
from solver.exact.mig_model import supports


def whole_gpu_time(
    target: Problem,
    deadline: Deadline,
    mig_end: float,
    *,
    cut: bool,
    settings: SolverSettings,
    estimate: float,
) -> tuple[Deadline, float | None]:
    """The whole-GPU paths' deadline (`deadline` ended at `mig_end`, less what a MIG snapshot
    keeps for its packing and slice bound or its joint model; `cut`: ended at `mig_end`
    anyway) and, where whole GPUs are short, the instant the plain pipeline's whole-GPU solve
    ends and the consolidated variant's begins (None: no variant). `estimate`: seconds to the
    whole-GPU paths' first plan."""
    left = max(mig_end - time.monotonic(), 0.0)
    joint = target.options.backend in EXACT and not supports(target)
    keep = 0.0
    if uses_mig(target):
        if joint:
            keep = left / 2  # the joint MIG model gets the second half (core.mig_exact)
        else:  # packing and the slice bound (solver.core.mig.slice_bound), never the
            # whole-GPU paths' first plan
            slice_jobs = sum(1 for j in target.jobs if j.slices is not None)
            need = answer_margin(target) + settings.mig_seconds_per_slice_job * slice_jobs
            keep = min(need, left / 2, max(left - estimate, 0.0))
    when = deadline
    if cut or keep:
        when = dataclasses.replace(deadline, end=mig_end - keep)
    if not (uses_mig(target) and short_of_gpus(target) and keep and not joint):
        return when, None
    now = time.monotonic()
    half = max(when.end - now, 0.0) / 2
    # The variant gets the second half only where the first plan fits in the first (at 1 s
    # on 1,024 GPUs the half left the quick plan, 36 % below), and where it can place its
    # jobs: it packs until the slice bound's estimate before the MIG time's end, and when
    # that leaves it less than a first plan's time after the split it places none (at 1 s
    # on 1,024 GPUs it did not, and the plain pipeline's half had had no aggregated LP: its
    # answers 1.4-1.6 % below, now 0.003-0.125 %).
    if half < estimate or variant_end(target, mig_end) - (now + half) < estimate:
        return when, None
    return when, now + half
