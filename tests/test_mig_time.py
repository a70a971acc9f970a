"""How a MIG snapshot's time divides (solver.core.mig_time): the whole-GPU paths' share and
the consolidated variant's split."""

from __future__ import annotations

import time

import pytest

from solver.core import mig, mig_time
from solver.core.deadline import Deadline
from solver.core.mig_consolidate import short_of_gpus
from solver.core.settings import SolverSettings
from solver.core.solver import Solver
from tests.mig_cases import large, problem, small


def test_the_slices_never_take_the_whole_gpu_paths_first_plan() -> None:
    """What a MIG snapshot keeps for packing and its bound leaves the whole-GPU paths at least
    their first plan's estimate (here 0.6 s of about 0.85 s; half, as before, left 0.43 s),
    and no half for the variant then."""
    p = problem(small("a"), small("b"), large(), gpus=3)
    solver = Solver(SolverSettings(first_plan_seconds=0.6, mig_seconds_per_slice_job=1.0))
    deadline = Deadline.after(1.0, solver.settings, len(p.jobs))
    estimate = solver.first_plan_estimate(p)
    assert deadline.end - time.monotonic() < 2 * estimate  # half would be short of it
    when, split = mig_time.whole_gpu_time(
        p, deadline, deadline.end, cut=False, settings=solver.settings, estimate=estimate
    )
    assert when.end - time.monotonic() >= estimate - 0.05
    assert when.end < deadline.end and split is None


def test_no_split_where_the_variant_could_place_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variant packs until the slice bound's estimate before the MIG time ends; where that
    leaves it less than a first plan's time after the split, the plain pipeline keeps all the
    whole-GPU time (at 1 s on 1,024 GPUs the variant placed nothing, and the plain pipeline's
    half had no aggregated LP: answers 1.4-1.6 % below, now 0.003-0.125 %)."""
    p = problem(small("a"), small("b"), large(), gpus=3)
    assert short_of_gpus(p)
    settings = SolverSettings(first_plan_seconds=0.5, mig_seconds_per_slice_job=1e-3)
    deadline = Deadline.after(2.0, settings, len(p.jobs))

    def split() -> float | None:
        return mig_time.whole_gpu_time(
            p, deadline, deadline.end, cut=False, settings=settings, estimate=0.5
        )[1]

    at = split()  # about 0.85 s for each half; the bound's estimate 2 ms
    assert at is not None and at - time.monotonic() == pytest.approx(0.85, abs=0.1)
    monkeypatch.setattr(mig, "BOUND_SECONDS_PER_JOB", 0.2)  # 0.6 s: 0.25 s after the split
    assert split() is None
